#!/bin/sh
# blin_fig5.sh DIR "DATASETS" "LAMBDAS": Blin Figure 5, test HR@10 and
# NDCG@10 against lambda (the runs DIR/DATASET-lambdaL.json and, for
# lambda = 2, DIR/DATASET-blin.json), as DIR/fig5.dat and DIR/fig5.png.
set -eu
dir=$1 datasets=$2 lambdas=$3
dat=$dir/fig5.dat
: > "$dat"
for d in $datasets; do
  printf '# %s\n' "$d" >> "$dat"
  for l in $(printf '%s\n' $lambdas 2 | sort -g); do
    f=$dir/$d-lambda$l.json
    [ "$l" = 2 ] && f=$dir/$d-blin.json
    [ -s "$f" ] || continue
    hr=$(sed 's/.*"hr@10": \([0-9.]*\).*/\1/' "$f")
    nd=$(sed 's/.*"ndcg@10": \([0-9.]*\).*/\1/' "$f")
    printf '%s %s %s\n' "$l" "$hr" "$nd" >> "$dat"
  done
  printf '\n\n' >> "$dat"
done
if ! command -v gnuplot > /dev/null; then
  echo "blin_fig5.sh: gnuplot not found: $dat written, no PNG" >&2
  exit 0
fi
i=0 plots=
for d in $datasets; do
  plots="$plots${plots:+, }'$dat' index $i using 1:2 with linespoints title '$d HR@10',"
  plots="$plots '$dat' index $i using 1:3 with linespoints title '$d NDCG@10'"
  i=$((i + 1))
done
gnuplot <<GP
call '$(dirname "$0")/png.gp' '800' '500'
set output '$dir/fig5.png'
set title 'Blin Figure 5: test HR@10 and NDCG@10 (uni:99) against lambda'
set xlabel 'lambda (--bkl-lambda)'
set ylabel 'metric'
set key outside right
set grid
plot $plots
GP
