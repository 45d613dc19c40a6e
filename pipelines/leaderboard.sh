#!/bin/sh
# pipelines/leaderboard.sh DIR NAME MODEL... - the table and the plot of
# `make leaderboard` (pipelines/leaderboard.mk) from DIR/MODEL.json (the
# test metrics, seqrec-metrics --json -k 10) and DIR/MODEL.log (the epoch
# lines of seqrec-train):
#   DIR/table.md     one row a model, best test NDCG@10 first: HR@10,
#                    NDCG@10, MRR@10, the epochs trained, the best
#                    validation epoch, seconds an epoch (training and
#                    validation), the training seconds in all, the peak
#                    resident memory (MiB)
#   DIR/table.csv    the same, comma-separated, for the plot
#   DIR/quality.png  test NDCG@10 against training seconds, a point a
#                    model (gnuplot; skipped with a message without it)
# A model trained without epochs (pop) shows "-" where it has none.
set -eu
dir=$1 name=$2
shift 2
csv=$dir/table.csv
echo "model,hr10,ndcg10,mrr10,epochs,best,sec_per_epoch,train_seconds,peak_mib" > "$csv.tmp"
for m in "$@"; do
  j=$dir/$m.json l=$dir/$m.log
  [ -s "$j" ] || { echo "leaderboard: no $j (the run failed?)" >&2; exit 1; }
  [ -f "$l" ] || : > "$l"
  awk -v m="$m" '
    function get(s, key,   v) {
      if (!match(s, "\"" key "\": *[0-9.e+-]+")) return ""
      v = substr(s, RSTART, RLENGTH); sub(/.*: */, "", v); return v
    }
    FILENAME == ARGV[1] { json = json $0; next }
    /"epoch":/ {
      ep++; e = get($0, "epoch") + 0
      s = get($0, "seconds"); if (s != "") { secs += s; ns++ }
      t = get($0, "train_seconds"); if (t != "") train += t
      r = get($0, "max_rss_mib"); if (r != "" && r + 0 > rss) rss = r + 0
      v = $0; sub(/.*"valid":/, "", v); nd = get(v, "ndcg@10")
      if (nd != "" && (best == "" || nd + 0 > bestv)) { bestv = nd + 0; best = e }
    }
    END {
      printf "%s,%s,%s,%s,%s,%s,%s,%s,%s\n", m, get(json, "hr@10"), get(json, "ndcg@10"),
        get(json, "mrr@10"), ep ? ep : "-", best != "" ? best : "-",
        ns ? sprintf("%.2f", secs / ns) : "-", ep ? sprintf("%.2f", train) : "-",
        rss ? sprintf("%.0f", rss) : "-"
    }' "$j" "$l" >> "$csv.tmp"
done
{ head -n 1 "$csv.tmp"; tail -n +2 "$csv.tmp" | sort -t, -k3,3gr; } > "$csv"
rm -f "$csv.tmp"

{
  echo "### Leaderboard: $name"
  echo
  echo "Every model at its defaults; test targets, full ranking; the checkpoint of"
  echo "the best validation NDCG@10 (make leaderboard, pipelines/leaderboard.mk)."
  echo
  echo "| model | HR@10 | NDCG@10 | MRR@10 | epochs | best | s/epoch | train s | peak MiB |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  tail -n +2 "$csv" | awk -F, '{printf "| %s | %.4f | %.4f | %.4f | %s | %s | %s | %s | %s |\n",
    $1, $2, $3, $4, $5, $6, $7, $8, $9}'
} | tee "$dir/table.md"

if command -v gnuplot >/dev/null 2>&1; then
  # a model without training seconds (pop) sits at the left edge
  awk -F, -v OFS=' ' 'NR > 1 {print $1, ($8 == "-" ? 0.01 : ($8 > 0 ? $8 : 0.01)), $3}' "$csv" \
    > "$dir/quality.dat"
  gnuplot -e "dat='$dir/quality.dat'; out='$dir/quality.png'; title='$name'" \
    "$(dirname "$0")/leaderboard.gp"
  echo "leaderboard: $dir/table.md, $dir/quality.png"
else
  echo "leaderboard: $dir/table.md (no gnuplot: no quality.png)"
fi
