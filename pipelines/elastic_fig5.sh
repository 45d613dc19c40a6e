#!/bin/sh
# elastic_fig5.sh DIR "POOLS" "TOPKS" ["RUN:NDCG10/USAGE% ..."]: ELASTIC
# Figure 5 (elastic.txt, hyperparameter sensitivity on ML-1M), test NDCG@10
# and the key usage rate (a) against the interest pool size K = AxB at top-k
# 8 and (b) against top-k at pool 16x16: the Markdown tables DIR/fig5.md,
# the points DIR/fig5-pool.dat and DIR/fig5-topk.dat (X NDCG@10 USAGE%
# LABEL lines) and their plot DIR/fig5.png (gnuplot; skipped with a
# message when it is absent).
#
# Runs: DIR/poolAxB.json and DIR/topkK.json (seqrec-metrics --json), the
# defaults (16x16, 8) being DIR/elastic.json; each with RUN.experts.tsv
# (seqrec-score --expert-stats on the test scoring: expert<TAB>count
# lines). Key usage = experts retrieved at least once / A*B. The optional
# paper cells are keyed by run name, "-" where the paper prints none.
set -eu
dir=$1 pools=$2 topks=$3 paper=${4:-}
base_pool=16x16 base_topk=8
md=$dir/fig5.md

# json_get FILE KEY: the number after "KEY": in FILE
json_get() { sed -n "s/.*\"$2\": *\([0-9.eE+-]*\).*/\1/p" "$1" | head -n 1; }
# usage FILE EXPERTS: percent of the EXPERTS with a count > 0 in FILE
usage() {
  awk -v total="$2" -v f="$1" '
    $2 ~ /^[0-9]+$/ { n++; if ($2 + 0 > 0) used++ }
    END {
      if (n != total)
        printf "elastic_fig5.sh: %s: %d expert lines, pool has %d\n", f, n, total > "/dev/stderr"
      printf "%.2f\n", total ? 100 * used / total : 0
    }' "$1"
}
# paper_cell RUN I: field I (1 NDCG@10, 2 usage) of RUN's paper cells
paper_cell() {
  cell=-
  for c in $paper; do
    [ "${c%%:*}" = "$1" ] && cell=$(printf '%s\n' "${c#*:}" | cut -d/ -f"$2")
  done
  printf '%s' "${cell:--}"
}
# row X EXPERTS RUN DATX: one table row, and (when RUN ran) the line
# "DATX NDCG@10 USAGE X" of $dat
row() {
  f=$dir/$3.json
  pn=$(paper_cell "$3" 1) pu=$(paper_cell "$3" 2)
  [ "$pu" = - ] || pu="$pu%"
  if [ ! -s "$f" ]; then
    printf '| %s | %s | %s | (not run) | - | %s | %s |\n' "$1" "$2" "$3" "$pn" "$pu" >> "$md"
    return 0
  fi
  nd=$(json_get "$f" ndcg@10) u=- us=-
  if [ -s "$dir/$3.experts.tsv" ]; then
    u=$(usage "$dir/$3.experts.tsv" "$2") us="$u%"
  fi
  printf '| %s | %s | %s | %.4f | %s | %s | %s |\n' "$1" "$2" "$3" "$nd" "$us" "$pn" "$pu" >> "$md"
  printf '%s %s %s %s\n' "$4" "$nd" "$u" "$1" >> "$dat"
}

: > "$md"
dat=$dir/fig5-pool.dat
: > "$dat"
{
  printf '### ELASTIC Figure 5 (a): interest pool size K, top-k %s\n\n' "$base_topk"
  printf '| pool | experts K | run | NDCG@10 | key usage | paper NDCG@10 | paper usage |\n'
  printf '|---|---|---|---|---|---|---|\n'
} >> "$md"
for p in $pools; do
  a=${p%%x*} b=${p#*x}
  run=pool$p
  [ "$p" = "$base_pool" ] && run=elastic
  row "$p" $((a * b)) "$run" $((a * b))
done
dat=$dir/fig5-topk.dat
: > "$dat"
{
  printf '\n### ELASTIC Figure 5 (b): top-k experts k, pool %s\n\n' "$base_pool"
  printf '| k | experts K | run | NDCG@10 | key usage | paper NDCG@10 | paper usage |\n'
  printf '|---|---|---|---|---|---|---|\n'
} >> "$md"
a=${base_pool%%x*} b=${base_pool#*x}
for k in $topks; do
  run=topk$k
  [ "$k" = "$base_topk" ] && run=elastic
  row "$k" $((a * b)) "$run" "$k"
done
printf '\nKey usage: experts retrieved at least once while scoring the test targets / all experts.\n\n' >> "$md"

if ! command -v gnuplot > /dev/null; then
  echo "elastic_fig5.sh: gnuplot not found: $md written, no PNG" >&2
  exit 0
fi
if [ ! -s "$dir/fig5-pool.dat" ] && [ ! -s "$dir/fig5-topk.dat" ]; then
  echo "elastic_fig5.sh: no run to plot: $md written, no PNG" >&2
  exit 0
fi
# panel DAT XLABEL TITLE: one panel's plot, or an empty note without data
panel() {
  printf "set xlabel '%s'\nset title '%s'\n" "$2" "$3"
  if [ -s "$1" ]; then
    printf "plot '%s' using 1:2:xtic(4) with linespoints lw 2 title 'NDCG@10', " "$1"
    printf "'' using 1:3 axes x1y2 with linespoints dt 2 title 'key usage'\n"
  else
    printf "set label 1 'not run' at graph 0.45, graph 0.5\nplot [0:1] NaN notitle\nunset label 1\n"
  fi
}
{
  cat <<GP
call '$(dirname "$0")/png.gp' '1000' '450'
set output '$dir/fig5.png'
set multiplot layout 1,2 title 'ELASTIC Figure 5: test NDCG@10 (solid) and key usage rate (dashed)'
set grid
set offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05
set datafile missing '-'
set ylabel 'NDCG@10'
set y2label 'key usage (%)'
set y2range [0:105]
set ytics nomirror
set y2tics
set key bottom left
set logscale x 2
GP
  panel "$dir/fig5-pool.dat" 'interest pool size K (experts)' "(a) pool size, top-k $base_topk"
  echo 'unset logscale x'
  panel "$dir/fig5-topk.dat" 'top-k experts k' "(b) top-k, pool $base_pool"
  echo 'unset multiplot'
} | gnuplot
