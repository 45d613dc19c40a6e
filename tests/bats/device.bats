#!/usr/bin/env bats
# --device and --precision of seqrec-train and seqrec-score: bad values,
# no GPU, models and attention kinds that run on the CPU only, and (on the
# simulated device of tests/sim, when built) one epoch on "the GPU" against
# the CPU. The real GPU is `make gpu-check`'s (tests/gpu/check.sh).

load helper

setup() {
  common_setup
  seqrec-synth --users 200 --items 80 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--dim 16 --ffn 32 --max-len 20 --batch 32 --threads 2 --epochs 1 --loss ce)
  SIM="$SEQREC_BIN/../lib/libseqrec-cuda-sim.so"
}

@test "device: a malformed --device or --precision is a usage error (64), naming it" {
  for d in gpu cuda: cuda:x cuda:-1 'cuda 0' CPU; do
    run -64 seqrec-train "${TINY[@]}" --device "$d" -o "$T/m.sqm" "$T/s.sqr"
    [[ "$output" == *"--device '$d': expected cpu, cuda or cuda:N"* ]]
    run -64 seqrec-score --device "$d" -m "$T/m.sqm" "$T/s.sqr"
    [[ "$output" == *"--device '$d'"* ]]
  done
  run -64 seqrec-train "${TINY[@]}" --precision fp16 -o "$T/m.sqm" "$T/s.sqr"
  [[ "$output" == *"--precision 'fp16': expected fp32, tf32 or bf16"* ]]
  run -64 seqrec-score --precision fp16 -m "$T/m.sqm" "$T/s.sqr"
  [[ "$output" == *"--precision 'fp16'"* ]]
  [ ! -e "$T/m.sqm" ]
}

@test "device: --device cpu is the default: the same model bit for bit" {
  seqrec-train "${TINY[@]}" -o "$T/a.sqm" "$T/s.sqr" 2>/dev/null
  seqrec-train "${TINY[@]}" --device cpu --precision fp32 -o "$T/b.sqm" "$T/s.sqr" 2>/dev/null
  cmp "$T/a.sqm" "$T/b.sqm"
  run -0 seqrec-score --device cpu -m "$T/a.sqm" --target test "$T/s.sqr"
}

@test "device: no GPU (or no such device) is 69, and no model file" {
  # without the backend object, or with one but no device
  SEQREC_CUDA_LIB=/nonexistent/libseqrec-cuda.so run -69 seqrec-train "${TINY[@]}" \
    --device cuda -o "$T/m.sqm" "$T/s.sqr"
  [[ "$output" == *"no CUDA backend"* ]]
  [ ! -e "$T/m.sqm" ] && [ ! -e "$T/m.sqm.ckpt" ]
  seqrec-train "${TINY[@]}" -o "$T/c.sqm" "$T/s.sqr" 2>/dev/null
  SEQREC_CUDA_LIB=/nonexistent/libseqrec-cuda.so run -69 seqrec-score --device cuda:1 \
    -m "$T/c.sqm" "$T/s.sqr"
  [[ "$output" == *"no CUDA backend"* ]]
  if [ -f "$SIM" ]; then
    # the simulated device has one device: 0
    SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1 run -69 seqrec-train "${TINY[@]}" \
      --device cuda:1 -o "$T/m.sqm" "$T/s.sqr"
    [[ "$output" == *"no CUDA device 1"* ]]
    # outside the tests (no SEQREC_SIMULATED_DEVICE) it is refused
    SEQREC_CUDA_LIB="$SIM" run -69 seqrec-train "${TINY[@]}" --device cuda -o "$T/m.sqm" "$T/s.sqr"
    [[ "$output" == *"simulated"* ]]
  fi
}

@test "device: pop runs on either device (the same model and scores); a GPU-trained sampled Blin scores on both" {
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  # pop has nothing for a device: the same model and scores on either
  seqrec-train --model pop -o "$T/pc.sqm" "$T/s.sqr" 2>/dev/null
  seqrec-train --model pop --device cuda -o "$T/pg.sqm" "$T/s.sqr" 2>/dev/null
  cmp "$T/pc.sqm" "$T/pg.sqm"
  cmp <(seqrec-score -m "$T/pg.sqm" "$T/s.sqr") <(seqrec-score --device cuda -m "$T/pg.sqm" "$T/s.sqr")
  # every model and option has its kernels now (the last: blin --softmax
  # sampled), and they give the CPU's loss (1e-3; a stale device pointer
  # to ids moved by an upload once gave 1.31 for 1.53)
  local b=(--model blin --softmax sampled --neg 2 --dim 16 --max-len 10 --epochs 1 --threads 1)
  seqrec-train "${b[@]}" --device cuda --log "$T/g.log" -o "$T/g.sqm" "$T/s.sqr" 2>/dev/null
  seqrec-train "${b[@]}" --log "$T/c.log" -o "$T/c.sqm" "$T/s.sqr" 2>/dev/null
  echo "loss gpu $(log_loss "$T/g.log") cpu $(log_loss "$T/c.log")"
  awk -v a="$(log_loss "$T/g.log")" -v b="$(log_loss "$T/c.log")" \
    'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-3 * b) }'
  seqrec-score -m "$T/g.sqm" "$T/s.sqr" | seqrec-metrics -k 10 > "$T/on-cpu"
  seqrec-score --device cuda -m "$T/g.sqm" "$T/s.sqr" | seqrec-metrics -k 10 > "$T/on-gpu"
  paste "$T/on-cpu" "$T/on-gpu" | awk '{ for (i = 1; i <= NF / 2; i++) { a = $i; b = $(i + NF / 2);
    if (a ~ /^[0-9.]+$/ && (a - b > 0.02 || b - a > 0.02)) { print; exit 1 } } }'
}

@test "device: one epoch on the simulated GPU gives the CPU's loss (1e-3) and scores on both" {
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  # small: on the simulated device every warp shuffle is a fiber switch
  seqrec-synth --users 40 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  # --threads 1: the GPU trains each batch whole, as the CPU does on one
  # thread (on more, the CPU cuts it into micro-batches with their own
  # dropout draws)
  local o=(--dim 16 --ffn 32 --max-len 10 --batch 16 --threads 1 --epochs 1 --loss ce
           --dropout 0.2 --precision fp32)
  for m in "--model sasrec --attn softmax" "--model bert4rec --attn linrec --mask-prob 0.3"; do
    # the CPU's loss, the same bytes twice, the GPU's model scores on both
    device_like_cpu "$T/t.sqr" "${o[@]}" $m
  done
}

@test "device: a GPU run's log lines add device_mib, the most device memory its allocations held (simulated)" {
  [ -f "$SIM" ] || skip "no simulated device built"
  seqrec-synth --users 40 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  local o=(--max-len 10 --batch 16 --threads 1 --epochs 2 --loss ce --precision fp32)
  seqrec-train "${o[@]}" --dim 16 --ffn 32 --log "$T/cpu.log" -o "$T/c.sqm" "$T/t.sqr" 2>/dev/null
  ! grep -q device_mib "$T/cpu.log"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  peak() { grep -o '"device_mib":[0-9.]*}$' "$1" | tail -1 | tr -dc '0-9.'; }
  for d in 16 64; do
    seqrec-train "${o[@]}" --dim $d --ffn $d --device cuda --log "$T/g$d.log" -o "$T/g$d.sqm" "$T/t.sqr" 2>/dev/null
    [ "$(grep -c '"max_rss_mib":[0-9.]*,"device_mib":[0-9]*\.[0-9]}$' "$T/g$d.log")" -eq 2 ]
  done
  # it measures: a wider model holds more; without the cache's size
  # classes (exact sizes) no more than with them
  awk -v a="$(peak "$T/g16.log")" -v b="$(peak "$T/g64.log")" 'BEGIN { exit !(a > 0 && b > a) }'
  SEQREC_GPU_PLAIN=cache seqrec-train "${o[@]}" --dim 16 --ffn 16 --device cuda --log "$T/p.log" \
    -o "$T/p.sqm" "$T/t.sqr" 2>/dev/null
  cmp "$T/p.sqm" "$T/g16.sqm"
  awk -v a="$(peak "$T/p.log")" -v b="$(peak "$T/g16.log")" 'BEGIN { exit !(a > 0 && a <= b) }'
}

@test "device: --precision bf16 on the simulated GPU: its own bytes, the same twice, near fp32's loss" {
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  seqrec-synth --users 40 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  local o=(--dim 16 --ffn 32 --max-len 10 --batch 16 --threads 1 --epochs 1 --dropout 0.2
           --device cuda)
  for p in fp32 bf16 bf16; do
    seqrec-train "${o[@]}" --precision $p --log "$T/$p.log" -o "$T/$p.sqm" "$T/t.sqr"
    [ "$p" = fp32 ] || { [ ! -e "$T/b1.sqm" ] || cmp "$T/b1.sqm" "$T/$p.sqm"; cp "$T/$p.sqm" "$T/b1.sqm"; }
  done
  ! cmp -s "$T/fp32.sqm" "$T/bf16.sqm" || { echo "bf16 trained fp32's bytes"; false; }
  l32=$(log_loss "$T/fp32.log")
  l16=$(log_loss "$T/bf16.log")
  echo "loss fp32 $l32 bf16 $l16"
  awk -v a="$l32" -v b="$l16" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 2e-2 * a) }'
  run -0 seqrec-score --device cuda --precision bf16 -m "$T/bf16.sqm" --target test "$T/t.sqr"
}

@test "device: a job of one rank through NCCL writes the plain GPU run's bytes, a row-sparse sum too (simulated)" {
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  seqrec-synth --users 40 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  local o=(--dim 16 --ffn 32 --max-len 10 --batch 16 --threads 1 --epochs 1 --dropout 0.2
           --device cuda --log /dev/null)
  seqrec-train "${o[@]}" -o "$T/plain.sqm" "$T/t.sqr"
  WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 SEQREC_NCCL_ID="$T/id" seqrec-train "${o[@]}" \
    -o "$T/rank.sqm" "$T/t.sqr"
  cmp "$T/plain.sqm" "$T/rank.sqm"
  [ ! -e "$T/id" ] # rank 0 removes the id once every rank joined
  # a sampled loss's gradient is row-sparse: NCCL sums the batch's rows of
  # the item table, packed and put back (micro.c gpu_sum), exact and lazy
  # Adam; 300 items, most of them in no step. One rank's sum is its own
  # values: SEQREC_SIM_NCCL_MIRROR=2 makes it two ranks' of the same (each
  # value doubled), so a row the packed sum loses or misplaces differs
  # from the whole gradient's sum (SEQREC_NCCL_SUM=dense)
  seqrec-synth --users 40 --items 300 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/w.sqr"
  local w=("${o[@]}" --loss bce --neg 2)
  for a in "" --lazy-adam; do
    seqrec-train "${w[@]}" $a -o "$T/plain.sqm" "$T/w.sqr"
    export WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 SEQREC_NCCL_ID="$T/id"
    seqrec-train "${w[@]}" $a -o "$T/rank.sqm" "$T/w.sqr"
    cmp "$T/plain.sqm" "$T/rank.sqm"
    SEQREC_SIM_NCCL_MIRROR=2 seqrec-train "${w[@]}" $a -o "$T/two.sqm" "$T/w.sqr"
    ! cmp -s "$T/two.sqm" "$T/rank.sqm" # the mirror doubled something
    SEQREC_SIM_NCCL_MIRROR=2 SEQREC_NCCL_SUM=dense seqrec-train "${w[@]}" $a -o "$T/dense.sqm" \
      "$T/w.sqr"
    cmp "$T/two.sqm" "$T/dense.sqm"
    unset WORLD_SIZE RANK LOCAL_RANK SEQREC_NCCL_ID
  done
  # a stale id file would join another job's ranks: refused
  echo stale > "$T/id"
  WORLD_SIZE=1 RANK=0 SEQREC_NCCL_ID="$T/id" run -64 seqrec-train "${o[@]}" -o "$T/x.sqm" "$T/t.sqr"
  [[ "$output" == *"SEQREC_NCCL_ID=$T/id exists: remove it"* ]]
  # ranks started with RANK/WORLD_SIZE meet through the id file
  WORLD_SIZE=2 RANK=1 run -64 seqrec-train "${o[@]}" -o "$T/x.sqm" "$T/t.sqr"
  [[ "$output" == *"set SEQREC_NCCL_ID to a path every rank sees"* ]]
  [ ! -e "$T/x.sqm" ]
}

@test "device: a rank whose all-reduce never finishes (a peer died) stops at SEQREC_NCCL_TIMEOUT, 69, no model (simulated)" {
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  seqrec-synth --users 40 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  local o=(--dim 16 --ffn 32 --max-len 10 --batch 16 --threads 1 --epochs 1 --device cuda
           --log /dev/null)
  export WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 SEQREC_NCCL_ID="$T/id"
  # SEQREC_SIM_NCCL_HANG: the all-reduce, and all queued after it, never
  # finish, as when another rank is gone; a wait that is not watched ends
  # the simulated device with "a GPU would hang here"
  local t0=$SECONDS
  SEQREC_SIM_NCCL_HANG=1 SEQREC_NCCL_TIMEOUT=1 run -69 seqrec-train "${o[@]}" -o "$T/m.sqm" \
    "$T/t.sqr"
  [[ "$output" == *"no progress in 1 s (SEQREC_NCCL_TIMEOUT): another rank died or hangs"* ]]
  [[ "$output" != *"would hang"* ]]
  [ ! -e "$T/m.sqm" ]
  [ $((SECONDS - t0)) -lt 20 ]
  for bad in 0 -3 x 1e99; do
    rm -f "$T/id"
    SEQREC_NCCL_TIMEOUT=$bad run -64 seqrec-train "${o[@]}" -o "$T/m.sqm" "$T/t.sqr"
    [[ "$output" == *"SEQREC_NCCL_TIMEOUT '$bad': expected seconds > 0"* ]]
  done
  [ ! -e "$T/m.sqm" ]
}

@test "device: item filters hold on the GPU's scoring path (simulated): no excluded item, the CPU's candidates" {
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  seqrec-synth --users 40 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  seqrec-train --dim 16 --ffn 32 --max-len 10 --batch 16 --threads 1 --epochs 1 --log /dev/null \
    -o "$T/m.sqm" "$T/t.sqr"
  seq 5 12 > "$T/ex.txt"
  seq 1 25 > "$T/al.txt"
  seqrec-score --device cuda -m "$T/m.sqm" -k 30 --exclude-items "$T/ex.txt" --allow-items "$T/al.txt" \
    "$T/t.sqr" > "$T/gpu.tsv"
  # 25 allowed minus 8 excluded, less each user's history: never an excluded or unlisted item
  cut -f2 "$T/gpu.tsv" | tr ',' '\n' | sed 's/:.*//' | sort -un > "$T/listed"
  run -1 grep -x -F -f "$T/ex.txt" "$T/listed"
  [ "$(tail -n 1 "$T/listed")" -le 25 ]
  # ranks: the candidates the CPU counts (the scores may differ in the last bits, the counts not)
  seqrec-score --device cuda -m "$T/m.sqm" --exclude-items "$T/ex.txt" --allow-items "$T/al.txt" \
    "$T/t.sqr" 2>/dev/null | seqrec-cat | cut -f1,3,4 > "$T/gpu.r"
  seqrec-score -m "$T/m.sqm" --exclude-items "$T/ex.txt" --allow-items "$T/al.txt" \
    "$T/t.sqr" 2>/dev/null | seqrec-cat | cut -f1,3,4 > "$T/cpu.r"
  [ -s "$T/cpu.r" ]
  cmp "$T/cpu.r" "$T/gpu.r"
  run -0 awk -F'\t' '$2 != 17' "$T/cpu.r"
  [ -z "$output" ]
}
