#!/bin/sh
# elastic_fig4.sh DIR RUN: ELASTIC Figure 4 (elastic.txt, the expert
# activation pattern on ML-1M): the load of every expert of RUN's interest
# pool while scoring the test targets, from DIR/RUN.experts.tsv
# (seqrec-score --expert-stats: a header, then expert<TAB>count lines).
# Writes DIR/fig4.md (the pool, the share of experts used, the load of the
# mean and of the busiest experts, the five hottest experts with their
# shares) and DIR/fig4.png (gnuplot, skipped with a message when absent):
# the load per expert id (left) and the experts sorted by load (right).
set -eu
dir=$1 run=$2
tsv=$dir/$run.experts.tsv md=$dir/fig4.md
if [ ! -s "$tsv" ]; then
  printf '### ELASTIC Figure 4: expert load (%s not run)\n\n' "$run" > "$md"
  exit 0
fi
awk -F'\t' -v run="$run" '
  NR > 1 && $2 ~ /^[0-9]+$/ { n++; c[$1] = $2; total += $2; if ($2 > 0) used++ }
  END {
    printf "### ELASTIC Figure 4: expert load, %s (%d experts, %d retrievals)\n\n", run, n, total
    printf "| experts used | mean load | busiest load | busiest / mean |\n|---|---|---|---|\n"
    max = 0
    for (e in c) if (c[e] > max) max = c[e]
    mean = n ? total / n : 0
    printf "| %d of %d (%.2f%%) | %.2f | %d | %.2f |\n\n", used, n, n ? 100 * used / n : 0, \
      mean, max, mean ? max / mean : 0
    printf "| hottest experts | load | share |\n|---|---|---|\n"
    for (k = 1; k <= 5 && k <= n; k++) {
      best = -1
      for (e in c) if (!(e in done) && (best < 0 || c[e] > c[best] || (c[e] == c[best] && e + 0 < best + 0))) best = e
      done[best] = 1
      printf "| %s | %d | %.2f%% |\n", best, c[best], total ? 100 * c[best] / total : 0
    }
    printf "\n"
  }' "$tsv" > "$md"
awk -F'\t' 'NR > 1 { print $1, $2 }' "$tsv" > "$dir/fig4-load.dat"
awk -F'\t' 'NR > 1 { print $2 }' "$tsv" | sort -rn | awk '{ print NR - 1, $1 }' > "$dir/fig4-sorted.dat"
if ! command -v gnuplot > /dev/null; then
  echo "elastic_fig4.sh: gnuplot not found: $md written, no PNG" >&2
  exit 0
fi
gnuplot <<GP
call '$(dirname "$0")/png.gp' '1000' '400'
set output '$dir/fig4.png'
set multiplot layout 1,2 title 'ELASTIC Figure 4: load per expert ($run, test targets)'
set grid
set xlabel 'expert id'
set ylabel 'retrievals'
plot '$dir/fig4-load.dat' using 1:2 with impulses lw 2 notitle
set xlabel 'experts by load'
plot '$dir/fig4-sorted.dat' using 1:2 with lines lw 2 notitle
unset multiplot
GP
