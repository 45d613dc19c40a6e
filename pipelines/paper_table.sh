#!/bin/sh
# paper_table.sh TITLE DIR "RUN:HR10/HR20/NDCG10/NDCG20 ..." RUN...
#
# A Markdown table of the test metrics of each RUN (DIR/RUN.json from
# seqrec-metrics --json -k 10,20) next to the paper's cells and our/paper
# ratios ("-" where the paper has no cell), with the epochs each run trained,
# its best validation epoch and its mean seconds per epoch (DIR/RUN.log).
set -eu
title=$1 dir=$2 paper=$3
shift 3
printf '### %s\n\n' "$title"
printf '| run | HR@10 | paper | ratio | HR@20 | paper | ratio | NDCG@10 | paper | ratio | NDCG@20 | paper | ratio | epochs | best | s/epoch |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n'
for run in "$@"; do
  cells=-
  for c in $paper; do [ "${c%%:*}" = "$run" ] && cells=${c#*:}; done
  if [ ! -s "$dir/$run.json" ]; then
    printf '| %s | (not run) |\n' "$run"
    continue
  fi
  awk -v run="$run" -v cells="$cells" -v logf="$dir/$run.log" '
    function get(s, key,   m) {
      if (match(s, "\"" key "\": *[0-9.e+-]+")) {
        m = substr(s, RSTART, RLENGTH); sub(/.*: */, "", m); return m + 0
      }
      return -1
    }
    { json = json $0 }
    END {
      n = split(cells, p, "/")
      split("hr@10 hr@20 ndcg@10 ndcg@20", keys, " ")
      line = "| " run
      for (i = 1; i <= 4; i++) {
        v = get(json, keys[i])
        if (n == 4 && p[i] > 0)
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
      printf "%s | %d | %d | %.1f |\n", line, ep, best, ep ? secs / ep : 0
    }' "$dir/$run.json"
done
printf '\n'
