#!/bin/sh
# bench/bench-gpu-host.sh BIN SIM_SO OUTDIR BEAUTY ML1M - `make
# bench-gpu-host`: the host's own work an epoch of seqrec-train --device
# cuda, measured without a GPU. The simulated device (tests/sim) runs with
# SEQREC_SIM_HOST_ONLY=1: every kernel, GEMM, device memset and copy within
# the device is checked and skipped, so train_seconds is what the host
# spends (building and staging batches, bucketing scatter-adds, queuing
# launches, recording and replaying graphs). A GPU overlaps it with its
# kernels, but cannot go faster than it: an epoch on a real GPU takes at
# least this long on this host. A real launch costs the host a few
# microseconds more than the simulated one, so it is a lower bound.
# The configs are gpu-check's bench (tests/gpu/check.sh): (a) Beauty N 50,
# d 64, batch 128; (b) ml-1m-part N 200, d 128, ffn 256, 2 heads, batch 128
# and batch 2048; (a) and (b) with --cuda-graphs; and (b) at batch 2048
# with --loss bce (a negative a position: the batcher's draws and the
# sampled loss's host plan, b2048-bce), and BERT4Rec at batch 2048
# (b2048-bert4rec: the cloze masks, the head's rows). epoch_seconds is the least
# train_seconds of epochs 2..EPOCHS (default 4); launches_per_step the
# kernels a training step queues (SEQREC_SIM_TRACE over one more epoch,
# less the same run's count without training: the final evaluation's),
# cuBLAS calls and memsets not counted; device_ops_per_step every op the
# host queues a step (kernels, cuBLAS and cuBLASLt calls, memsets, copies
# to, from and within the device: what a launch-bound step pays for; a
# --cuda-graphs replay counts its copies alone, which the simulated device
# runs). Then scoring, (a)'s model over Beauty's test users (the best of
# three seqrec-score runs in epoch_seconds; a step a batch of 256 users):
# score-full, ranks against every item counted on the device (k_rank.cu);
# score-full-host, the same ranked on the host from the downloaded scores
# (SEQREC_GPU_RANKS=host); score-pop100, pop:100 -x drawn on the host and
# counted on the device. Into OUTDIR/gpu-host.csv, after the machine lines
# (timing.sh):
#   bench,config,epoch_seconds,steps,ms_per_step,launches_per_step,device_ops_per_step
set -eu
BIN=$1 SIM=$2 OUT=$3 BEAUTY=$4 ML1M=$5
EPOCHS=${EPOCHS:-4}
here=$(dirname "$0")
. "$here/timing.sh"
csv=$OUT/gpu-host.csv
rm -f "$csv"
machine_lines "$csv" gpu-host >/dev/null
echo "bench,config,epoch_seconds,steps,ms_per_step,launches_per_step,device_ops_per_step" >> "$csv"
train() { # EPOCHS TRACE LOG SPLIT BATCH OPTS...: one host-only run of $model
  ep=$1 tr=$2 lg=$3 sp=$4 bt=$5
  shift 5
  rm -f "$lg"; [ ! -f "$tr" ] || rm -f "$tr" # a regular file alone
  SEQREC_SIM_HOST_ONLY=1 SEQREC_SIM_ARENA_GIB=64 SEQREC_SIM_SMS=132 SEQREC_CUDA_LIB=$SIM \
    SEQREC_SIMULATED_DEVICE=1 SEQREC_SIM_TRACE=$tr "$BIN/seqrec-train" --model "$model" \
    --attn softmax --loss ce --epochs "$ep" --eval-every 1000 --seed 1 --device cuda \
    --batch "$bt" "$@" -o "$OUT/gpu-host.sqm" --log "$lg" "$sp" > "$OUT/gpu-host.out" 2>&1 ||
    { echo "bench-gpu-host: $name failed:" >&2; tail -n 3 "$OUT/gpu-host.out" >&2; exit 1; }
}
run() { # NAME SPLIT BATCH [--model M] OPTS...
  name=$1 split=$2 batch=$3 model=sasrec
  shift 3
  if [ "${1:-}" = --model ]; then model=$2; shift 2; fi
  log=$OUT/gpu-host-$name.log
  train "$EPOCHS" "" "$log" "$split" "$batch" "$@" # untraced: a trace line costs a write
  # launches: epochs 1 and 2 less epoch 1 (the evaluation's in both)
  train 1 "$OUT/gpu-host-1.trace" "$OUT/gpu-host-x.log" "$split" "$batch" "$@"
  train 2 "$OUT/gpu-host-2.trace" "$OUT/gpu-host-x.log" "$split" "$batch" "$@"
  # kernels: the lines not of the other ops (sim.cpp's trace_line)
  kern() { grep -cEv '^(memset|copy|gemm|alloc|free),' "$1" || true; }
  l1=$(kern "$OUT/gpu-host-1.trace") l2=$(kern "$OUT/gpu-host-2.trace")
  ops() { grep -cEv '^(alloc|free),' "$1" || true; } # cudaMalloc and cudaFree are not queued
  o1=$(ops "$OUT/gpu-host-1.trace") o2=$(ops "$OUT/gpu-host-2.trace")
  rm -f "$OUT/gpu-host-1.trace" "$OUT/gpu-host-2.trace" "$OUT/gpu-host-x.log"
  # epochs 2.. (the first pays the start-up): the least train_seconds
  # (steps: the epoch's sequences, seq_per_s x train_seconds, over the batch)
  awk -v n="$name" -v batch="$batch" -v launches=$((l2 - l1)) -v ops=$((o2 - o1)) -F'[,:{}]' '
    /"train_seconds"/ {
      for (i = 1; i <= NF; i++) {
        if ($i == "\"train_seconds\"") s = $(i + 1)
        if ($i == "\"seq_per_s\"") q = $(i + 1)
        if ($i == "\"epoch\"") e = $(i + 1)
      }
      if (e >= 2 && (best == "" || s < best)) { best = s; seqs = q * s }
    }
    END {
      if (best == "") exit 1
      steps = int((seqs + 0.5 + batch - 1) / batch)
      printf "gpu-host,%s,%.4f,%d,%.3f,%.1f,%.1f\n", n, best, steps, 1e3 * best / steps,
        launches / steps, ops / steps
    }' \
    "$log" | tee -a "$csv"
}
# score NAME SPLIT ENV OPTS...: seqrec-score --device cuda of (a)'s model
# over SPLIT's test targets, host only, the best of three runs; a "step" is
# a batch of 256 users, ops the device ops of one run over its batches
score() {
  name=$1 split=$2 env=$3
  shift 3
  sc() { # TRACE OPTS...: one run
    tr=$1
    shift
    env $env SEQREC_SIM_HOST_ONLY=1 SEQREC_SIM_ARENA_GIB=64 SEQREC_SIM_SMS=132 \
      SEQREC_CUDA_LIB=$SIM SEQREC_SIMULATED_DEVICE=1 SEQREC_SIM_TRACE=$tr "$BIN/seqrec-score" \
      --device cuda -m "$OUT/gpu-host.sqm" "$@" "$split" > "$OUT/gpu-host.ranks" 2> "$OUT/gpu-host.out" ||
      { echo "bench-gpu-host: $name failed:" >&2; tail -n 3 "$OUT/gpu-host.out" >&2; exit 1; }
  }
  s=$(best sc "" "$@")
  rm -f "$OUT/gpu-host-1.trace"
  sc "$OUT/gpu-host-1.trace" "$@"
  users=$("$BIN/seqrec-cat" "$OUT/gpu-host.ranks" | wc -l)
  batches=$(( (users + 255) / 256 ))
  l=$(grep -cEv '^(memset|copy|gemm|alloc|free),' "$OUT/gpu-host-1.trace" || true)
  o=$(grep -cEv '^(alloc|free),' "$OUT/gpu-host-1.trace" || true)
  rm -f "$OUT/gpu-host-1.trace" "$OUT/gpu-host.ranks"
  awk -v n="$name" -v s="$s" -v b="$batches" -v l="$l" -v o="$o" 'BEGIN {
    printf "gpu-host,%s,%.4f,%d,%.3f,%.1f,%.1f\n", n, s, b, 1e3 * s / b, l / b, o / b }' | tee -a "$csv"
}
a="--max-len 50 --dim 64 --ffn 64 --layers 2 --heads 1 --dropout 0.5"
b="--max-len 200 --dim 128 --ffn 256 --layers 2 --heads 2 --dropout 0.2"
run a "$BEAUTY" 128 $a
# (a)'s model scoring its test users: ranks against every item counted on
# the device, or ranked on the host from the downloaded scores; pop:100
# candidates drawn on the host and counted on the device
score score-full "$BEAUTY" ""
score score-full-host "$BEAUTY" SEQREC_GPU_RANKS=host
score score-pop100 "$BEAUTY" "" --candidates pop:100 -x
run a-graphs "$BEAUTY" 128 $a --cuda-graphs
run b "$ML1M" 128 $b
run b-graphs "$ML1M" 128 $b --cuda-graphs
run b2048 "$ML1M" 2048 $b
run b2048-bce "$ML1M" 2048 $b --loss bce
run b2048-bert4rec "$ML1M" 2048 --model bert4rec $b
rm -f "$OUT/gpu-host.sqm" "$OUT/gpu-host.sqm.ckpt" "$OUT/gpu-host.out"
