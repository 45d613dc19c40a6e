#!/usr/bin/env bats
# --attn efficient-dwc on the GPU (cuda/k_dwconv.cu beside the efficient
# kernels of k_lattn.cu), on the simulated device of tests/sim when built:
# one epoch of SASRec (causal windows) and BERT4Rec (centred windows) gives
# the CPU's loss (1e-3 relative, --threads 1), two GPU runs write the same
# bytes, and the model scores on the CPU and on the GPU alike. The models
# still without kernels are refused in device.bats. The real GPU is `make
# gpu-check`'s.

load helper

setup() {
  common_setup
  SIM="$SEQREC_BIN/../lib/libseqrec-cuda-sim.so"
}

@test "device_dwc: efficient-dwc trains one epoch on the simulated GPU: the CPU's loss (1e-3), the same bytes twice, scores on both" {
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  # small: on the simulated device every warp shuffle is a fiber switch
  seqrec-synth --users 40 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  # --threads 1: the GPU trains each batch whole, as the CPU does on one thread
  local o=(--dim 16 --ffn 32 --max-len 10 --batch 16 --threads 1 --epochs 1 --loss ce
           --dropout 0.2 --precision fp32 --attn efficient-dwc)
  # the CPU's loss, the same bytes twice, the GPU's model scores on both
  device_like_cpu "$T/t.sqr" "${o[@]}" --model bert4rec --mask-prob 0.3 --dwc-kernel 4
  DEVICE_TWICE=0 device_like_cpu "$T/t.sqr" "${o[@]}" --model sasrec --heads 2 --dwc-kernel 12
}
