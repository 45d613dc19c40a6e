#!/usr/bin/env bats
# The position-only attention kinds (positional, fpositional, average,
# linear-anneal, exp-anneal, mixing: cuda/k_pos.cu) on the simulated device
# of tests/sim, when built: one epoch of sasrec (causal) or bert4rec
# (bidirectional; both for positional and mixing) with --device cuda gives the CPU's loss (1e-3 relative,
# the CPU on one thread) and parameters (1e-4), two GPU runs write the same
# bytes, and the GPU's model scores alike on both devices. The real GPU is `make gpu-check`'s.

load helper

setup() {
  sim_setup
  # small: on the simulated device every thread is a fiber
  seqrec-synth --users 40 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  # --threads 1: the GPU trains each batch whole, as the CPU does on one
  # thread (on more, the CPU cuts it into micro-batches with their own
  # dropout draws)
  O=(--dim 16 --ffn 32 --max-len 10 --batch 16 --threads 1 --epochs 1 --dropout 0.2
     --precision fp32)
}

# gpu_like_cpu KIND MODEL-OPTIONS...: helper.bash's device_like_cpu (the
# CPU's and the GPU's losses within 1e-3 relative; two GPU runs the same
# bytes; the GPU's model scores on the CPU and on the GPU alike, metrics
# within 0.02) for --attn KIND, and every tensor within 1e-4
gpu_like_cpu() {
  local kind=$1; shift
  device_like_cpu "$T/t.sqr" "${O[@]}" "$@" --attn "$kind"
  # the loss of one tiny epoch hardly tells the kinds apart (their weights
  # start near uniform): every tensor of the two models too, within 1e-4
  # (an Adam step is 1e-3; the simulated device differs by about 1e-8)
  local tn
  for tn in $(seqrec-export -m "$T/c.sqm" -l | cut -f1); do
    seqrec-export -m "$T/c.sqm" -t "$tn" > "$T/c.tsv"
    seqrec-export -m "$T/g.sqm" -t "$tn" > "$T/g.tsv"
    paste "$T/c.tsv" "$T/g.tsv" | awk -v t="$tn" '{ n = NF / 2; for (i = 2; i <= n; i++) {
      d = $i - $(i + n); if (d < 0) d = -d; if (d > 1e-4) { print t ": " $i " vs " $(i + n); exit 1 } } }'
  done
}

@test "device_pos: positional (PARec) trains on the simulated GPU as on the CPU" {
  gpu_like_cpu positional --model sasrec --loss ce
  DEVICE_TWICE=0 gpu_like_cpu positional --model bert4rec --mask-prob 0.3
}

@test "device_pos: fpositional (FPARec) trains on the simulated GPU as on the CPU" {
  DEVICE_TWICE=0 gpu_like_cpu fpositional --model bert4rec --mask-prob 0.3 --rank 4
}

@test "device_pos: average trains on the simulated GPU as on the CPU" {
  DEVICE_TWICE=0 gpu_like_cpu average --model sasrec --loss ce
}

@test "device_pos: linear-anneal trains on the simulated GPU as on the CPU" {
  DEVICE_TWICE=0 gpu_like_cpu linear-anneal --model bert4rec --mask-prob 0.3
}

@test "device_pos: exp-anneal trains on the simulated GPU as on the CPU" {
  DEVICE_TWICE=0 gpu_like_cpu exp-anneal --model sasrec --loss ce --decay 0.7
}

@test "device_pos: mixing trains on the simulated GPU as on the CPU" {
  gpu_like_cpu mixing --model sasrec --loss ce
  DEVICE_TWICE=0 gpu_like_cpu mixing --model bert4rec --mask-prob 0.3
}
