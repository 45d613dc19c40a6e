#!/usr/bin/env bats
# --model hstu on the GPU (its SiLU attention in cuda/k_silu.cu, SiLU and the
# gate in cuda/k_hstu.cu, flat.c's step and its device scoring), on the
# simulated device of tests/sim when built: one epoch gives the CPU's loss
# (1e-3 relative, --threads 1), two GPU runs write the same bytes, and the
# GPU's model scores on the CPU and on the GPU alike; heads wider than the
# GPU's 128 dimensions are refused (64). The real GPU is `make gpu-check`'s.

load helper

setup() {
  common_setup
  SIM="$SEQREC_BIN/../lib/libseqrec-cuda-sim.so"
}

@test "device_hstu: hstu trains one epoch on the simulated GPU: the CPU's loss (1e-3), the same bytes twice, scores on both" {
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  # small: on the simulated device every warp shuffle is a fiber switch
  seqrec-synth --users 40 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  # --threads 1: the GPU trains each batch whole, as the CPU does on one thread
  local o=(--model hstu --dim 16 --max-len 10 --batch 16 --threads 1 --epochs 1
           --dropout 0.2 --precision fp32)
  local twice=1
  for m in "--heads 1 --loss ce" "--heads 2 --layers 1 --loss bce --neg 2 --target random"; do
    # the CPU's loss, the same bytes twice (the first), the GPU's model
    # scores on both
    DEVICE_TWICE=$twice device_like_cpu "$T/t.sqr" "${o[@]}" $m
    twice=0
    # and the GPU scores twice alike (--batch 7: more, smaller forwards)
    seqrec-score --device cuda --batch 7 -m "$T/g.sqm" --target test "$T/t.sqr" > "$T/s1"
    seqrec-score --device cuda --batch 7 -m "$T/g.sqm" --target test "$T/t.sqr" > "$T/s2"
    cmp "$T/s1" "$T/s2"
  done
}

@test "device_hstu: heads over 128 dimensions are refused (64) on the GPU, for training and scoring" {
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  seqrec-synth --users 40 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  run -64 seqrec-train --model hstu --dim 130 --max-len 10 --epochs 1 --device cuda \
    -o "$T/m.sqm" "$T/t.sqr"
  [[ "$output" == *"heads have 130 dimensions"* ]]
  [ ! -e "$T/m.sqm" ]
  seqrec-train --model hstu --dim 130 --max-len 10 --epochs 1 --threads 1 --log /dev/null \
    -o "$T/h.sqm" "$T/t.sqr"
  run -64 seqrec-score --device cuda -m "$T/h.sqm" "$T/t.sqr"
  [[ "$output" == *"heads have 130 dimensions"* ]]
}
