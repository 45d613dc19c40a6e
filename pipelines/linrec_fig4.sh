#!/bin/sh
# linrec_fig4.sh DIR - LinRec Figure 4, the ablations of LinRec+SASRec:
# full (DIR/sasrec-linrec.json), w/o L2 norm (nol2.json: --linrec-variant
# no-l2) and w/o ELU (noelu.json: no-elu); test Recall@10 (= HR@10), MRR@10
# and NDCG@10 as DIR/fig4.md and a bar chart DIR/fig4.png (gnuplot; skipped
# with a message when it is absent). The paper ran them on Gowalla and
# shows bars only (no numbers): full > w/o ELU > w/o L2 on every metric.
set -eu
dir=$1
dat=$dir/fig4.dat md=$dir/fig4.md
: > "$dat"
{
  printf '### LinRec Figure 4: ablations of LinRec+SASRec (test)\n\n'
  printf '| variant | run | Recall@10 | MRR@10 | NDCG@10 |\n|---|---|---|---|---|\n'
  for v in "full sasrec-linrec" "w/o-L2 nol2" "w/o-ELU noelu"; do
    set -- $v
    f=$dir/$2.json
    if [ ! -s "$f" ]; then printf '| %s | %s | (not run) | | |\n' "$1" "$2"; continue; fi
    vals=$(awk '{
        for (i = 1; i <= 3; i++) {
          k = i == 1 ? "hr@10" : i == 2 ? "mrr@10" : "ndcg@10"
          v[i] = match($0, "\"" k "\": *[0-9.e+-]+") ? substr($0, RSTART, RLENGTH) : "-"
          sub(/.*: */, "", v[i])
        }
        printf "%.4f %.4f %.4f", v[1], v[2], v[3]
      }' "$f")
    printf '%s %s\n' "$1" "$vals" >> "$dat"
    set -- $1 $2 $vals
    printf '| %s | %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4" "$5"
  done
  printf '\nThe paper (Gowalla, bars only): full > w/o ELU > w/o L2 on Recall@10, MRR and NDCG@10.\n\n'
} > "$md"
if ! command -v gnuplot > /dev/null; then
  echo "linrec_fig4.sh: gnuplot not found: $md written, no PNG" >&2
  exit 0
fi
[ -s "$dat" ] || exit 0
gnuplot <<GP
call '$(dirname "$0")/png.gp' '800' '500'
set output '$dir/fig4.png'
set title 'LinRec Figure 4: ablations of LinRec+SASRec (test, pop:100)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel 'metric'
set yrange [0:*]
set key outside right
set grid ytics
plot '$dat' using 2:xtic(1) title 'Recall@10', '' using 3 title 'MRR@10', '' using 4 title 'NDCG@10'
GP
