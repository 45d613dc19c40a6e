#!/usr/bin/env bats
# The models beyond SASRec, BERT4Rec and HSTU on the GPU: gru4rec (its GRU
# layer in cuda/k_gru.cu), caser (its convolutions in cuda/k_conv.cu) and
# fpmc (ops that had twins already), their host-planned ids staged with
# sq_ctx_stage_add, core (its pooling and normalisation in cuda/k_core.cu,
# its device scoring), cl4srec (InfoNCE's pieces in cuda/k_nce.cu) and blin
# (its KL over every item or a sampled support in cuda/k_bkl.cu) and
# elastic (cuda/k_elastic.cu, its plan staged, its device scoring and
# expert counts); on the simulated device of tests/sim when built. One
# epoch gives the CPU's loss (1e-3 relative, --threads 1), two GPU runs
# write the same bytes (one case), and the GPU's model scores on the CPU
# and on the GPU alike. The real GPU is `make gpu-check`'s.

load helper

setup() {
  sim_setup
  # small: the simulated device runs every thread of every block in turn
  seqrec-synth --users 40 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  # --threads 1: the GPU trains each batch whole, as the CPU does on one thread
  O=(--batch 16 --threads 1 --epochs 1 --precision fp32)
}

@test "device_models: gru4rec (two layers, dropout; BCE) trains on the simulated GPU as on the CPU" {
  device_like_cpu "$T/t.sqr" "${O[@]}" --model gru4rec --dim 8 --hidden 12 --layers 2 \
    --max-len 10 --dropout 0.2
  DEVICE_TWICE=0 device_like_cpu "$T/t.sqr" "${O[@]}" --model gru4rec --dim 8 --hidden 6 \
    --max-len 10 --loss bce --neg 2 --target random
}

@test "device_models: caser (both filter kinds, dropout) and fpmc train on the simulated GPU as on the CPU" {
  DEVICE_TWICE=0 device_like_cpu "$T/t.sqr" "${O[@]}" --model caser --dim 8 --max-len 4 \
    --nh 3 --nv 2 --dropout 0.3
  DEVICE_TWICE=0 device_like_cpu "$T/t.sqr" "${O[@]}" --model fpmc --dim 8
  # and the GPU scores twice alike (--batch 7: more, smaller forwards)
  seqrec-score --device cuda --batch 7 -m "$T/g.sqm" --target test "$T/t.sqr" > "$T/s1"
  seqrec-score --device cuda --batch 7 -m "$T/g.sqm" --target test "$T/t.sqr" > "$T/s2"
  cmp "$T/s1" "$T/s2"
}

@test "device_models: core (trm and ave encoders) trains and scores on the simulated GPU as on the CPU" {
  # --target random: one prefix a user an epoch (core's default, last, trains
  # every prefix: 20 times the steps on the simulated device)
  DEVICE_TWICE=0 device_like_cpu "$T/t.sqr" "${O[@]}" --model core --dim 8 --max-len 10 \
    --layers 1 --heads 1 --target random
  DEVICE_TWICE=0 device_like_cpu "$T/t.sqr" "${O[@]}" --model core --dim 8 --max-len 10 \
    --encoder ave --target random
}

@test "device_models: cl4srec (cosine with distinct negatives; dot) trains on the simulated GPU as on the CPU" {
  DEVICE_TWICE=0 device_like_cpu "$T/t.sqr" "${O[@]}" --model cl4srec --dim 8 --max-len 10 \
    --layers 1 --heads 1 --cl-negatives distinct --target random
  DEVICE_TWICE=0 device_like_cpu "$T/t.sqr" "${O[@]}" --model cl4srec --dim 8 --max-len 10 \
    --layers 1 --heads 1 --cl-sim dot --cl-weight 0.5 --target random
}

@test "device_models: blin (full and sampled softmax) trains on the simulated GPU as on the CPU" {
  DEVICE_TWICE=0 device_like_cpu "$T/t.sqr" "${O[@]}" --model blin --dim 8 --ffn 16 \
    --max-len 10 --layers 1 --heads 1
  # its KL over the first view's positive and negatives (k_bkl.cu's sampled mode)
  DEVICE_TWICE=1 device_like_cpu "$T/t.sqr" "${O[@]}" --model blin --softmax sampled --neg 3 \
    --dim 8 --ffn 16 --max-len 10 --layers 1 --heads 1
}

@test "device_models: elastic (query network or mean, weighted or not) trains and scores on the simulated GPU as on the CPU, experts alike" {
  DEVICE_TWICE=0 device_like_cpu "$T/t.sqr" "${O[@]}" --model elastic --dim 8 --ffn 16 \
    --max-len 10 --pool 4x4 --topk-experts 2 --heads 1
  seqrec-score -m "$T/g.sqm" --target test --expert-stats "$T/e-cpu.tsv" "$T/t.sqr" > /dev/null
  seqrec-score --device cuda -m "$T/g.sqm" --target test --expert-stats "$T/e-gpu.tsv" \
    "$T/t.sqr" > /dev/null
  cmp "$T/e-cpu.tsv" "$T/e-gpu.tsv"
  # the mean query (segment means) and Algorithm 1's unweighted gather
  DEVICE_TWICE=0 device_like_cpu "$T/t.sqr" "${O[@]}" --model elastic --dim 8 --ffn 16 \
    --max-len 10 --pool 4x4 --topk-experts 2 --heads 1 --query mean --expert-weights none
}
