#!/bin/sh
# paper_table.sh [--mrr | --keys "K..."] [--budget "SPEC"] TITLE DIR "RUN:HR10/HR20/NDCG10/NDCG20 ..." RUN...
#
# A Markdown table of the test metrics of each RUN (DIR/RUN.json from
# seqrec-metrics --json -k 10,20) next to the paper's cells and our/paper
# ratios ("-" where the paper has no cell), with the epochs each run trained,
# its best validation epoch and its mean seconds per epoch (DIR/RUN.log), and
# the device it trained on and whether it ran at the paper's budget (DIR/RUN.run,
# pipelines/repro_run.sh's record of the run; "-" where there is none).
#
# --mrr: MRR@10 and MRR@20 columns too; the paper's cells are then
# HR10/HR20/NDCG10/NDCG20/MRR10/MRR20. --keys "hr@10 mrr@10 ndcg@10": those
# columns of seqrec-metrics --json instead, the paper's cells in that order
# ("-" where the paper has none). A RUN written NAME:NOTE is a model
# not run here: its row ("NAME (NOTE)") shows the paper's cells only.
# --budget "SPEC": the paper's training budget as seqrec-train options
# (pipelines/run_budget.sh): the budget column "paper" for a run whose
# recorded options meet every one, else what falls short.
set -eu
here=$(dirname "$0")
keys="hr@10 hr@20 ndcg@10 ndcg@20"
budget=
while :; do
  case ${1:-} in
    --mrr) keys="$keys mrr@10 mrr@20"; shift ;;
    --keys) keys=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    *) break ;;
  esac
done
title=$1 dir=$2 paper=$3
shift 3
sh "$here/run_budget.sh" /dev/null "$budget" > /dev/null # a bad SPEC: exit 65 here
printf '### %s\n\n' "$title"
head='| run' rule='|---'
for k in $keys; do
  head="$head | $(printf '%s' "$k" | tr '[:lower:]' '[:upper:]') | paper | ratio"
  rule="$rule|---|---|---"
done
printf '%s | epochs | best | s/epoch | device | budget |\n%s|---|---|---|---|---|\n' "$head" "$rule"
for run in "$@"; do
  name=${run%%:*} note=
  [ "$name" = "$run" ] || note=${run#*:}
  cells=-
  for c in $paper; do [ "${c%%:*}" = "$name" ] && cells=${c#*:}; done
  json=$dir/$name.json
  if [ -n "$note" ]; then
    json=/dev/null
  elif [ ! -s "$json" ]; then
    printf '| %s | (not run) |\n' "$name"
    continue
  fi
  awk -v run="$name" -v note="$note" -v cells="$cells" -v keys="$keys" \
      -v logf="$dir/$name.log" \
      -v budget="$(sh "$here/run_budget.sh" "$dir/$name.run" "$budget")" '
    function get(s, key,   m) {
      if (match(s, "\"" key "\": *[0-9.e+-]+")) {
        m = substr(s, RSTART, RLENGTH); sub(/.*: */, "", m); return m + 0
      }
      return -1
    }
    { json = json $0 }
    END {
      nk = split(keys, k, " ")
      n = split(cells, p, "/")
      if (note != "") {
        line = "| " run " (" note ")"
        for (i = 1; i <= nk; i++)
          line = line sprintf(" | - | %s | -", (n == nk && p[i] > 0) ? p[i] : "-")
        print line " | - | - | - | - | - |"
        exit
      }
      line = "| " run
      for (i = 1; i <= nk; i++) {
        v = get(json, k[i])
        if (n == nk && p[i] > 0)
          line = line sprintf(" | %.4f | %s | %.2f", v, p[i], v / p[i])
        else
          line = line sprintf(" | %.4f | - | -", v)
      }
      ep = 0; best = 0; bestv = -1; secs = 0
      while ((getline l < logf) > 0) {
        ep++
        s = get(l, "seconds"); if (s > 0) secs += s
        v = get(l, "ndcg@10"); if (v > bestv) { bestv = v; best = get(l, "epoch") }
      }
      sub(/\t/, " | ", budget) # run_budget.sh: DEVICE<TAB>VERDICT
      printf "%s | %d | %d | %.1f | %s |\n", line, ep, best, ep ? secs / ep : 0, budget
    }' "$json"
done
printf '\n'
