#!/bin/sh
# bench/bench-score.sh BIN OUT.csv SPLIT PEAK - scoring speed of
# seqrec-score on every user of a split (issue 33): a SASRec model (d 64,
# N 50, 2 layers, 1 head, CE; one epoch: the weights do not change the
# work) scores all users with full ranking, in the two forms the nightly
# job and the evaluation use:
#   ranks   the test target of every user ranked among all items (the
#           ranks stream of `seqrec-score`)
#   topk    the 10 best items of every user given all its history
#           (`seqrec-score --topk 10`, the nightly job's lists)
# at 1 and THREADS threads: seconds (best of REPS runs, the training and
# the model load included) and users a minute; and the scoring GEMM alone
# (256 users x every item x 64, the batch seqrec-score runs) through the
# engine's batch-invariant kernel against OpenBLAS's sgemm on the same
# shape (PEAK = bench/sgemm_peak): GFLOP/s, best of calls, and the ratio.
# CSV lines "score,metric,value", after the machine lines (timing.sh).
# Knobs: THREADS (default 2), REPS (default 3), GEMM_SECONDS (default 2:
# each GEMM timing's budget). Nothing asserts a timing.
set -eu
BIN=$1 CSV=$2 SPLIT=$3 PEAK=$4
THREADS=${THREADS:-2} REPS=${REPS:-3} GEMM_SECONDS=${GEMM_SECONDS:-2}
here=$(dirname "$0")
. "$here/timing.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out() { echo "score,$1,$2" | tee -a "$CSV"; }

machine_lines "$CSV" score "$PEAK"
users=$("$BIN/seqrec-cat" "$SPLIT" | wc -l | tr -d ' ')
items=$("$BIN/seqrec-cat" -H "$SPLIT" | awk '$1 == "n_items" {print $2}')
V1=$((items + 1)) C=64
out users "$users"
out items "$items"
"$BIN/seqrec-train" --model sasrec --loss ce --dim $C --ffn $C --layers 2 --heads 1 \
  --max-len 50 --epochs 1 --seed 1 --threads "$THREADS" -o "$tmp/m.sqm" "$SPLIT" 2>/dev/null

best_of() { # best wall seconds of REPS runs of "$@" (stdout discarded)
  b=""
  i=0
  while [ "$i" -lt "$REPS" ]; do
    t0=$(now); "$@" > /dev/null; t1=$(now)
    b=$(echo "$t0 $t1 $b" | awk '{d = $2 - $1; if ($3 == "" || d < $3) print d; else print $3}')
    i=$((i + 1))
  done
  echo "$b"
}
per_min() { echo "$1 $2" | awk '{printf "%.0f", $1 / $2 * 60}'; }

for t in 1 "$THREADS"; do
  s=$(best_of "$BIN/seqrec-score" -m "$tmp/m.sqm" --threads "$t" "$SPLIT")
  out "ranks_seconds_t$t" "$(printf '%.3f' "$s")"
  out "ranks_users_per_min_t$t" "$(per_min "$users" "$s")"
  s=$(best_of "$BIN/seqrec-score" -m "$tmp/m.sqm" --threads "$t" --topk 10 "$SPLIT")
  out "topk_seconds_t$t" "$(printf '%.3f' "$s")"
  out "topk_users_per_min_t$t" "$(per_min "$users" "$s")"
  # shellcheck disable=SC2046
  set -- $("$PEAK" --rowwise 256 "$V1" $C "$t" "$GEMM_SECONDS")
  engine=$1
  # shellcheck disable=SC2046
  set -- $("$PEAK" 256 "$V1" $C N T "$t" "$GEMM_SECONDS")
  out "gemm_engine_gflops_t$t" "$engine"
  out "gemm_openblas_gflops_t$t" "$1"
  out "gemm_ratio_t$t" "$(echo "$engine $1" | awk '{printf "%.2f", $1 / $2}')"
  [ "$THREADS" != 1 ] || break
done
