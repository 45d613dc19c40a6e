#!/usr/bin/env bats
# seqrec-train --loss sampled-softmax (--neg-sampler) and --loss gbce
# (--gbce-t): every sampler and loss seeded (same bytes for a seed), resumed,
# every model whose loss is next-item CE trains with them, they learn, and
# each refusal (64, message, no model file). Tiny data and models only.

load helper

setup() {
  common_setup
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--dim 16 --ffn 32 --max-len 20 --batch 32 --threads 2)
  SIM="$SEQREC_BIN/../lib/libseqrec-cuda-sim.so"
}

key() { seqrec-cat --header "$2" | sed -n "s/^config\t$1=//p"; }

# refuse MESSAGE ARGS...: seqrec-train ARGS is a usage error (64) saying
# MESSAGE, and writes no model file
refuse() {
  local msg=$1
  shift
  run -64 seqrec-train "${TINY[@]}" --epochs 1 "$@" -o "$T/m.sqm" "$T/s.sqr"
  [[ "$output" == *"$msg"* ]] || { echo "$*: $output"; false; }
  [ ! -e "$T/m.sqm" ]
}

@test "loss: each sampler of sampled-softmax gives the same model for a seed, another for another seed" {
  for s in uniform pop pop:0.5 in-batch mixed; do
    same_seed_same_model "${TINY[@]}" --loss sampled-softmax --neg 16 --neg-sampler "$s" \
      || { echo "sampler $s"; false; }
  done
}

@test "loss: gbce gives the same model for a seed; --gbce-t changes it" {
  same_seed_same_model "${TINY[@]}" --loss gbce --neg 16 --gbce-t 0.75
  seqrec-train "${TINY[@]}" --loss gbce --neg 16 --gbce-t 0 --epochs 2 --log /dev/null \
    -o "$T/t0.sqm" "$T/s.sqr"
  ! cmp -s "$T/m1.sqm" "$T/t0.sqm" || false
}

@test "loss: a sampled run resumes to the uninterrupted run's bytes, its options recorded" {
  resume_same_model "${TINY[@]}" --loss sampled-softmax --neg 8 --neg-sampler pop:0.5
  [ "$(key train.neg_sampler "$T/full.sqm")" = pop:0.5 ]
  [ "$(key train.loss "$T/full.sqm")" = sampled-softmax ]
  resume_same_model "${TINY[@]}" --loss gbce --neg 8 --gbce-t 0.5
  [ "$(key train.gbce_t "$T/full.sqm")" = 0.5 ]
}

@test "loss: sampled softmax and gbce learn what popularity cannot" {
  run --separate-stderr seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr"
  pop=$(sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' <<< "$stderr")
  # (gbce, as SASRec's bce, learns slower at 8 epochs; t = 0 is its bce)
  for l in "sampled-softmax --neg-sampler uniform 1.5" "sampled-softmax --neg-sampler in-batch 1.5" \
           "gbce --gbce-t 0 1.2"; do
    f=${l##* }
    l=${l% *}
    seqrec-train --dim 32 --ffn 64 --max-len 20 --batch 32 --threads 2 --dropout 0.1 \
      --lr 3e-3 --epochs 8 --loss $l --neg 16 --log "$T/log" -o "$T/m.sqm" "$T/s.sqr"
    got=$(tail -n 1 "$T/log" | sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p')
    echo "pop $pop $l $got"
    awk -v p="$pop" -v s="$got" -v f="$f" 'BEGIN { exit !(s > f * p) }'
  done
}

@test "loss: every model whose loss is next-item CE trains and scores with both losses" {
  # (negatives for each position, each sequence, the batch: ops.h 10c/10d and 10e)
  for m in sasrec bert4rec cl4srec core elastic gru4rec caser fpmc hstu; do
    for l in "sampled-softmax --neg-sampler mixed" "gbce --neg-share sequence" \
             "sampled-softmax --neg-share batch"; do
      extra=()
      case $m in core|elastic) extra=(--target last) ;; esac
      seqrec-train --model "$m" --dim 16 --max-len 10 --batch 32 --threads 2 --epochs 1 \
        --loss $l --neg 8 "${extra[@]}" --log /dev/null -o "$T/$m.sqm" "$T/s.sqr" \
        || { echo "$m $l"; false; }
      n=$(seqrec-score -m "$T/$m.sqm" "$T/s.sqr" | seqrec-metrics --json -k 10 \
          | sed -n 's/.*"ndcg@10": *\([0-9.]*\).*/\1/p')
      awk -v n="$n" 'BEGIN { exit !(n > 0 && n <= 1) }' || { echo "$m $l ndcg $n"; false; }
    done
  done
}

@test "loss: --neg-share and --lazy-adam: seeded, resumed, recorded, each changing the model" {
  same_seed_same_model "${TINY[@]}" --loss sampled-softmax --neg 16 --neg-share batch --lazy-adam
  same_seed_same_model "${TINY[@]}" --loss sampled-softmax --neg 16 --neg-share sequence \
    --neg-sampler mixed
  seqrec-train "${TINY[@]}" --loss sampled-softmax --neg 16 --epochs 2 --log /dev/null \
    -o "$T/plain.sqm" "$T/s.sqr"
  seqrec-train "${TINY[@]}" --loss sampled-softmax --neg 16 --neg-share position --epochs 2 \
    --log /dev/null -o "$T/pos.sqm" "$T/s.sqr"
  cmp "$T/plain.sqm" "$T/pos.sqm" # position is the default
  for f in "--neg-share batch" "--neg-share sequence" --lazy-adam; do
    seqrec-train "${TINY[@]}" --loss sampled-softmax --neg 16 $f --epochs 2 --log /dev/null \
      -o "$T/one.sqm" "$T/s.sqr"
    ! cmp -s "$T/one.sqm" "$T/plain.sqm" || { echo "$f changed nothing"; false; }
  done
  resume_same_model "${TINY[@]}" --loss gbce --neg 8 --neg-share sequence --lazy-adam
  [ "$(key train.neg_share "$T/full.sqm")" = sequence ]
  [ "$(key train.lazy_adam "$T/full.sqm")" = 1 ]
  # the threads' micro-batches and one thread: each gives its own bytes, every time
  for th in 1 2; do
    for i in 1 2; do
      seqrec-train "${TINY[@]}" --threads $th --loss sampled-softmax --neg 8 --neg-sampler mixed \
        --neg-share batch --lazy-adam --clip 1 --epochs 1 --log /dev/null -o "$T/c$i.sqm" "$T/s.sqr"
    done
    cmp "$T/c1.sqm" "$T/c2.sqm"
  done
}

@test "loss: --neg-share sequence with --lazy-adam learns what popularity cannot" {
  run --separate-stderr seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr"
  pop=$(sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' <<< "$stderr")
  seqrec-train --dim 32 --ffn 64 --max-len 20 --batch 32 --threads 2 --dropout 0.1 \
    --lr 3e-3 --epochs 8 --loss sampled-softmax --neg 16 --neg-share sequence --lazy-adam \
    --log "$T/log" -o "$T/m.sqm" "$T/s.sqr"
  got=$(tail -n 1 "$T/log" | sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p')
  echo "pop $pop sequence+lazy $got"
  awk -v p="$pop" -v s="$got" 'BEGIN { exit !(s > 1.5 * p) }'
}

@test "loss: --neg-share and --lazy-adam refusals (64), no model file" {
  refuse "--neg-share is for --loss sampled-softmax and gbce" --neg-share batch
  refuse "--neg-share is for --loss sampled-softmax and gbce" --loss bce --neg-share sequence
  refuse "bad value 'user' for --neg-share" --loss gbce --neg-share user
  refuse "--lazy-adam is for the sampled losses" --lazy-adam
  run -64 seqrec-train --model gru4rec --dim 16 --epochs 1 --loss sampled-softmax --neg 4 \
    --lazy-adam -o "$T/m.sqm" "$T/s.sqr"
  [[ "$output" == *"--lazy-adam: --model gru4rec's steps have no row-sparse gradient"* ]]
  no_leftovers "$T" s.sqr
}

@test "loss: blin refuses the sampled losses (64), naming its own sampled softmax" {
  for l in sampled-softmax gbce; do
    run -64 seqrec-train --model blin --loss "$l" --neg 4 --epochs 1 -o "$T/m.sqm" "$T/s.sqr"
    [[ "$output" == *"--model blin cannot train --loss $l"*"--softmax sampled"* ]]
  done
  no_leftovers "$T" s.sqr
}

@test "loss: bad K, alpha, t and sampler combinations are usage errors (64), no model file" {
  refuse "--neg 100: a sampled loss takes 1 to n_items - 1 = 99" --loss sampled-softmax --neg 100
  refuse "--neg 500" --loss gbce --neg 500
  refuse "bad value '0' for --neg" --loss sampled-softmax --neg 0
  for a in pop:1.5 pop:-0.5 pop:0.1234 pop:x pop: popular; do
    refuse "bad value '$a' for --neg-sampler" --loss sampled-softmax --neg-sampler "$a"
  done
  refuse "bad value '1.5' for --gbce-t" --loss gbce --gbce-t 1.5
  refuse "bad value '-0.1' for --gbce-t" --loss gbce --gbce-t -0.1
  refuse "--neg-sampler pop:1 is for --loss sampled-softmax" --loss gbce --neg-sampler pop
  refuse "--neg-sampler in-batch is for --loss sampled-softmax" --neg-sampler in-batch
  refuse "needs --batch above 32" --loss sampled-softmax --neg 32 --neg-sampler in-batch
  refuse "needs --batch above 20" --loss sampled-softmax --neg 41 --neg-sampler mixed --batch 20
  refuse "--neg-sampler mixed needs --neg 2" --loss sampled-softmax --neg 1 --neg-sampler mixed
  refuse "BERT4Rec's cloze task uses ce, sampled-softmax or gbce" --model bert4rec --loss bce
  no_leftovers "$T" s.sqr
}

@test "loss: the sampled losses (and --lazy-adam) train on the simulated GPU: the CPU's loss (1e-3), the same bytes twice" {
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  # small: on the simulated device every warp shuffle is a fiber switch;
  # --threads 1: the GPU trains each batch whole, as the CPU on one thread
  seqrec-synth --users 40 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  local o=(--dim 16 --ffn 32 --max-len 10 --batch 16 --threads 1 --epochs 1 --dropout 0.2
           --precision fp32 --neg 8)
  for l in "--loss sampled-softmax" "--loss gbce --gbce-t 0.5" \
           "--loss sampled-softmax --neg-sampler mixed --neg-share batch" \
           "--loss gbce --neg-share sequence" \
           "--loss sampled-softmax --neg-share batch --weight-decay 0.1 --lazy-adam"; do
    # shellcheck disable=SC2086
    DEVICE_TWICE=1 device_like_cpu "$T/t.sqr" "${o[@]}" $l || { echo "$l"; false; }
  done
  # the last, lazy, is not exact Adam on the GPU either: another model
  seqrec-train "${o[@]}" --loss sampled-softmax --neg-share batch --weight-decay 0.1 \
    --device cuda --log /dev/null -o "$T/x.sqm" "$T/t.sqr"
  ! cmp -s "$T/x.sqm" "$T/g.sqm"
}

@test "loss: every other model with a next-item loss trains the sampled losses on the simulated GPU at the CPU's loss (1e-3)" {
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  seqrec-synth --users 40 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  local o=(--threads 1 --epochs 1 --precision fp32 --neg 8 --batch 16)
  local l=("--loss sampled-softmax" "--loss gbce --neg-share batch") i=0 m
  # bert4rec: an output bias (its gradient through the kernels' dbias)
  for m in "bert4rec --dim 16 --ffn 32 --max-len 10" "gru4rec --dim 16 --hidden 24 --max-len 10" \
           "caser --dim 16 --nh 4 --nv 2" "fpmc --dim 16" "hstu --dim 16 --heads 2 --max-len 10" \
           "core --dim 16 --ffn 32 --max-len 10 --target random" \
           "cl4srec --dim 16 --ffn 32 --max-len 10" \
           "elastic --dim 16 --ffn 32 --max-len 10 --pool 4x4 --topk-experts 2"; do
    # shellcheck disable=SC2086
    DEVICE_TWICE=0 device_like_cpu "$T/t.sqr" "${o[@]}" --model $m ${l[i % 2]} \
      || { echo "--model $m ${l[i % 2]}"; false; }
    i=$((i + 1))
  done
}
