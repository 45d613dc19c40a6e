#!/bin/sh
# bench/bench-sasrec.sh BIN OUT.csv SPLIT [SGEMM_PEAK] - SASRec training speed
# of the C engine and of the same model in PyTorch (bench/sasrec_torch.py),
# in one run, same data and threads (FPARec/issue settings: N=50, d=64, ffn
# 64, 2 layers, 1 head, batch 128, dropout 0.5), for both losses: ce (full
# softmax cross-entropy over every item) and bce (one sampled negative).
# For each loss it reports the C and PyTorch epoch seconds and sequences per
# second (medians over EPOCHS epochs, training steps only; the C BCE runs
# over C_BCE_EPOCHS, as their epochs are short enough for the host's
# hiccups to move a median of two), the speedup C
# over PyTorch, the share of the C run spent in OpenBLAS (perf's CPU-clock
# samples by DSO, in a run of its own: the timed runs go without perf),
# the GEMM FLOPs of an epoch counted from the model shape and the GFLOP/s
# they achieve, OpenBLAS's sgemm peak on the CE logits shape
# (SGEMM_PEAK, bench/sgemm_peak.c), the C epoch at 1 thread against
# THREADS, and two 1-thread runs side by side (c_pair_scaling: the scaling
# the machine allows a perfectly parallel run). CSV lines "bench,metric,value" (metrics per loss end in _ce or
# _bce). Knobs: EPOCHS (default 2), C_BCE_EPOCHS (default 10), C_BCE_REPS
# (default 3), THREADS (default 2), TORCH_PYTHON (the
# interpreter with torch; default: the first python3 that imports it; none:
# the PyTorch half is skipped with a line saying so).
# Timings on a shared machine are noisy; nothing asserts them.
set -eu
BIN=$1 CSV=$2 SPLIT=$3 PEAK=${4:-}
EPOCHS=${EPOCHS:-2} THREADS=${THREADS:-2} C_BCE_EPOCHS=${C_BCE_EPOCHS:-10}
C_BCE_REPS=${C_BCE_REPS:-3}
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
N=50 C=64 F=64 LAYERS=2
ARGS="--model sasrec --max-len $N --dim $C --ffn $F --layers $LAYERS --heads 1"
ARGS="$ARGS --dropout 0.5 --batch 128 --seed 1"

out() { echo "sasrec,$1,$2" | tee -a "$CSV"; }
. "$here/timing.sh"
machine_lines "$CSV" sasrec "$PEAK"

# The shape of an epoch. --target all trains every position of the newest N
# inputs of each user with at least 2 training items: a user with n training
# items gives l = min(n - 1, N) tokens, each one loss entry.
# users, tokens T = sum l, attention pairs P = sum l (l + 1) / 2 (causal).
# shellcheck disable=SC2046
set -- $("$BIN/seqrec-cat" "$SPLIT" | awk -F '\t' -v N="$N" '
  { n = split($2, a, " "); if (n < 2) next; l = n - 1; if (l > N) l = N
    u++; t += l; p += l * (l + 1) / 2 }
  END { printf "%d %d %d\n", u, t, p }')
USERS=$1 TOKENS=$2 PAIRS=$3
items=$("$BIN/seqrec-cat" -H "$SPLIT" | awk '$1 == "n_items" {print $2}')
V1=$((items + 1))
# Rows of CE logits per GEMM call: the engine's rule (sq_ce_chunk, asked
# through sgemm_peak; a batch part has more entries than it here).
CE_CHUNK=${CE_CHUNK:-n/a}
if [ -n "$PEAK" ] && [ -x "$PEAK" ] && [ "$CE_CHUNK" = n/a ]; then
  CE_CHUNK=$("$PEAK" --ce-rows "$V1")
fi
# The C runs train on a copy of the split without its validation and test
# items: the same training samples, no validation (the timed seconds
# exclude it anyway; this keeps its scoring out of the perf samples).
"$BIN/seqrec-cat" "$SPLIT" | awk -F '\t' 'BEGIN {OFS = "\t"} {$3 = ""; $4 = ""; print}' |
  "$BIN/seqrec-cat" --from-text split --n-items "$items" -o "$tmp/train.split"
out epochs "$EPOCHS"
out c_bce_epochs "$C_BCE_EPOCHS"
out c_bce_reps "$C_BCE_REPS"
out threads "$THREADS"
out users "$USERS"
out train_tokens "$TOKENS"
out items "$items"
out ce_chunk_rows "$CE_CHUNK"

# GEMM FLOPs of one training epoch, 2 M N K per GEMM, over T tokens, width
# C, FFN width F, L layers, V1 = items + 1 logit columns. A linear layer of
# T rows, In -> Out, is one GEMM forward (2 T In Out) and two backward (dX
# and dW, 2 T In Out each): 6 T In Out. Per layer Q, K, V and O (C -> C)
# and the FFN (C -> F, F -> C):
#   layers = L (4 * 6 T C C + 2 * 6 T C F) = L (24 T C^2 + 12 T C F)
# CE (every token is a loss entry): logits = h E^T [T, V1] forward, then
# dh = dlogits E and dE += dlogits^T h, each 2 T V1 C:
#   ce = 6 T V1 C;  bce (dot products of sampled rows, no GEMM) = 0.
# The attention products (scores q k^T and weighted sums p v forward; dp,
# dv, dq, dk backward: 6 products of 2 C flops per causal pair) are
#   attn = L * 12 P C
# but lib/ops/ops.c runs them in its own loops, outside OpenBLAS, so they
# are reported alone and left out of the GEMM FLOPs that the OpenBLAS time
# divides: GFLOP/s = (layers + loss) / (epoch seconds * OpenBLAS share).
gflop_layers=$(awk -v L="$LAYERS" -v T="$TOKENS" -v C="$C" -v F="$F" \
  'BEGIN {printf "%.3f", L * (24 * T * C * C + 12 * T * C * F) / 1e9}')
gflop_ce=$(awk -v T="$TOKENS" -v V="$V1" -v C="$C" 'BEGIN {printf "%.3f", 6 * T * V * C / 1e9}')
out c_attn_gflop_per_epoch "$(awk -v L="$LAYERS" -v P="$PAIRS" -v C="$C" \
  'BEGIN {printf "%.3f", L * 12 * P * C / 1e9}')"

have_perf=0
if command -v perf >/dev/null 2>&1 && perf record -q -e cpu-clock -o "$tmp/probe.data" true >/dev/null 2>&1; then
  have_perf=1
fi

# c_train LOSS THREADS TAG: EPOCHS (bce: C_BCE_EPOCHS) epochs into $tmp/c_TAG.log (one JSON line
# per epoch; train_seconds and seq_per_s count the training steps only);
# under perf (CPU-clock samples at 499 Hz) when PERF=1, into $tmp/TAG.data:
# only for shares, as perf's own process slows a run that uses every core.
c_train() {
  if [ "$1" = ce ]; then
    la="--loss ce" RUN="--epochs $EPOCHS"
  else
    la="--loss bce --neg 1" RUN="--epochs $C_BCE_EPOCHS"
  fi
  # shellcheck disable=SC2086
  if [ "${PERF:-0}" = 1 ]; then
    perf record -q -e cpu-clock -F 499 -o "$tmp/$3.data" \
      "$BIN/seqrec-train" $ARGS $la --threads "$2" $RUN \
      --log "$tmp/c_$3.log" -o "$tmp/m_$3.sqm" "$tmp/train.split" 2>/dev/null
  else
    "$BIN/seqrec-train" $ARGS $la --threads "$2" $RUN \
      --log "$tmp/c_$3.log" -o "$tmp/m_$3.sqm" "$tmp/train.split"
  fi
  [ -s "$tmp/c_$3.log" ] || { echo "bench-sasrec: seqrec-train --loss $1 failed" >&2; exit 1; }
}

for loss in ce bce; do
  # Timed without perf: on two cores perf's own process takes CPU time from
  # a THREADS = 2 run (a BCE epoch 0.86 s under perf, 0.59-0.65 s without),
  # which the 1-thread run beside it would not pay. The perf run below only
  # gives the GEMM share and the profile.
  # The THREADS runs alternate with the 1-thread runs (REPS of each: bce
  # C_BCE_REPS, ce 1), so that a drift of the host's load between them
  # moves both; the medians are over every epoch of each side's runs.
  reps=1
  [ "$loss" = bce ] && reps=$C_BCE_REPS
  : > "$tmp/c_$loss.log"
  : > "$tmp/c_${loss}_t1.log"
  r=0
  while [ "$r" -lt "$reps" ]; do
    r=$((r + 1))
    c_train "$loss" "$THREADS" "${loss}_r$r"
    cat "$tmp/c_${loss}_r$r.log" >> "$tmp/c_$loss.log"
    if [ "$THREADS" -gt 1 ]; then
      c_train "$loss" 1 "${loss}_t1_r$r"
      cat "$tmp/c_${loss}_t1_r$r.log" >> "$tmp/c_${loss}_t1.log"
    fi
  done
  c_sps=$(field seq_per_s "$tmp/c_$loss.log" | median)
  c_sec=$(field train_seconds "$tmp/c_$loss.log" | median)
  eval "c_sps_$loss=\$c_sps"
  out "c_seq_per_s_median_$loss" "$c_sps"
  out "c_epoch_seconds_median_$loss" "$c_sec"
  out "c_loss_last_$loss" "$(field loss "$tmp/c_$loss.log" | tail -n 1)"

  if [ "$loss" = ce ]; then
    gflop=$(awk -v a="$gflop_layers" -v b="$gflop_ce" 'BEGIN {printf "%.3f", a + b}')
  else
    gflop=$gflop_layers
  fi
  out "c_gemm_gflop_per_epoch_$loss" "$gflop"
  if [ "$have_perf" = 1 ]; then
    PERF=1 c_train "$loss" "$THREADS" "${loss}_perf"
    # GEMM share: CPU-clock samples in libopenblas over all samples of the run.
    perf report -i "$tmp/${loss}_perf.data" --stdio --sort dso 2>/dev/null > "$tmp/dso.txt" || true
    share=$(awk '/%/ && /openblas/ {gsub("%", "", $1); s += $1} END {printf "%.1f", s}' "$tmp/dso.txt")
    perf report -i "$tmp/${loss}_perf.data" --stdio --sort sym 2>/dev/null | grep '%' | head -n 12 \
      > "$here/out/sasrec_profile_$loss.txt" || true
    out "c_openblas_share_percent_$loss" "$share"
    achieved=$(awk -v g="$gflop" -v s="$c_sec" -v p="$share" \
      'BEGIN {if (s > 0 && p > 0) printf "%.2f", g / (s * p / 100); else print "n/a"}')
  else
    out "c_openblas_share_percent_$loss" "perf unavailable"
    achieved="perf unavailable"
  fi
  out "c_gemm_gflops_$loss" "$achieved"

  if [ "$loss" = ce ]; then
    # OpenBLAS's peak on the forward logits GEMM, [CE_CHUNK, C] x [V1, C]^T.
    if [ -n "$PEAK" ] && [ -x "$PEAK" ]; then
      peak=$("$PEAK" "$CE_CHUNK" "$V1" "$C" N T "$THREADS" 3 | cut -d ' ' -f 1)
      out sgemm_peak_gflops_ce_logits "$peak"
      case $achieved in
        *[!0-9.]*) out gemm_efficiency_ce "$achieved" ;;
        *) out gemm_efficiency_ce "$(ratio "$achieved" "$peak")" ;;
      esac
    else
      out sgemm_peak_gflops_ce_logits "skipped: no sgemm_peak program"
    fi
  fi

  # 1 thread against THREADS, same epochs (the runs above).
  if [ "$THREADS" -gt 1 ]; then
    c1=$(field train_seconds "$tmp/c_${loss}_t1.log" | median)
    out "c_epoch_seconds_median_${loss}_threads1" "$c1"
    out "c_thread_scaling_$loss" "$(ratio "$c1" "$c_sec")"
    # What the machine allows: two 1-thread runs side by side, each at what
    # speed against running alone. With nothing shared between them (no
    # reduction, no copy), pair_scaling = 2 * alone / side-by-side is the
    # scaling two threads could reach if the run were perfectly parallel;
    # below 2 when the cores slow each other down (shared cache and memory
    # bandwidth, or neighbours on a shared host).
    c_train "$loss" 1 "${loss}_pa" & pa=$!
    c_train "$loss" 1 "${loss}_pb"
    wait "$pa"
    cp=$(cat "$tmp/c_${loss}_pa.log" "$tmp/c_${loss}_pb.log" | grep -o '"train_seconds":[0-9.]*' |
      cut -d: -f2 | median)
    out "c_epoch_seconds_median_${loss}_pair" "$cp"
    out "c_pair_scaling_$loss" "$(echo "$c1 $cp" | awk '{if ($2 > 0) printf "%.2f", 2 * $1 / $2; else print "n/a"}')"
  fi
done

# PyTorch: the same model (tests/reference/sasrec_ref.py + dropout).
PY=$(torch_python)
if [ -z "$PY" ]; then
  out torch "skipped: no python3 with torch (apt-get install python3-torch)"
  exit 0
fi
out torch_version "$("$PY" -c 'import torch; print(torch.__version__)')"
"$BIN/seqrec-cat" "$SPLIT" > "$tmp/split.tsv"
for loss in ce bce; do
  "$PY" "$here/sasrec_torch.py" --loss "$loss" --n-items "$items" --epochs "$EPOCHS" \
    --threads "$THREADS" < "$tmp/split.tsv" > "$tmp/t.csv"
  t_sps=$(grep seq_per_s "$tmp/t.csv" | cut -d, -f3 | median)
  t_sec=$(grep epoch_seconds "$tmp/t.csv" | cut -d, -f3 | median)
  out "torch_seq_per_s_median_$loss" "$t_sps"
  out "torch_epoch_seconds_median_$loss" "$t_sec"
  out "torch_loss_last_$loss" "$(grep ',loss,' "$tmp/t.csv" | tail -n 1 | cut -d, -f3)"
  eval "c_sps=\$c_sps_$loss"
  out "speedup_$loss" "$(ratio "$c_sps" "$t_sps")"
done
