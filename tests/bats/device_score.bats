#!/usr/bin/env bats
# Scoring on the GPU keeps the CPU's guarantee: a user's scores do not
# depend on the batch or the shard that scores it (issue 37). On a GPU the
# scoring forward's GEMMs run cuda/k_gemm.cu's batch-invariant kernel
# (sq_ctx_invariant) instead of cuBLAS, whose kernels follow the shape;
# the simulated device's cuBLAS is OpenBLAS, whose kernels follow the shape
# too, so without the switch these tests fail there (they did: sasrec's
# ranks with -b 1, 7 and 256 were three different files). And --topk
# selects on the GPU (cuda/k_topk.cu): the same lists as the host's
# selection from the same scores (SEQREC_GPU_TOPK=host); ranks against
# every item are counted there (cuda/k_rank.cu): the host's ranks from the
# same scores (SEQREC_GPU_RANKS=host).

load helper

setup() {
  sim_setup
  seqrec-synth --users 90 --items 60 --seed 4 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
}

# invariant NAME TRAIN_OPTS...: a model trained on the CPU, scored on the
# GPU with 1, 5 and 256 histories a batch (its top 10 with their scores,
# and its test ranks), and in two shards: the same records every way
invariant() {
  local name=$1
  shift
  seqrec-train "$@" --epochs 1 --threads 2 -o "$T/$name.sqm" "$T/t.sqr" 2>/dev/null
  for b in 1 5 256; do
    seqrec-score --device cuda -b $b -m "$T/$name.sqm" --topk 10 "$T/t.sqr" > "$T/$name-top-$b"
    seqrec-score --device cuda -b $b -m "$T/$name.sqm" --target test "$T/t.sqr" \
      > "$T/$name-ranks-$b"
  done
  for b in 5 256; do
    cmp "$T/$name-top-1" "$T/$name-top-$b"
    cmp "$T/$name-ranks-1" "$T/$name-ranks-$b"
  done
  # the shards' users in other batches: their records are the whole run's
  for s in 0 1; do
    seqrec-score --device cuda --shard $s/2 -m "$T/$name.sqm" --topk 10 "$T/t.sqr"
  done | sort > "$T/$name-shards"
  cmp "$T/$name-shards" <(sort "$T/$name-top-256")
  [ "$(wc -l < "$T/$name-top-1")" -gt 80 ]
}

@test "device_score: --topk selects on the GPU the host's lists (history excluded or not, an item filter, K 1 ... 256 and beyond)" {
  seqrec-train --model sasrec --dim 16 --ffn 16 --max-len 12 --epochs 1 -o "$T/m.sqm" "$T/t.sqr" \
    2>/dev/null
  printf '%s\n' 3 5 8 13 21 34 > "$T/retired"
  for k in 1 10 60 256 300; do # 300 > SQ_TOPK_GPU_MAX: selected on the host either way
    for o in "" --include-history "--exclude-items $T/retired"; do
      # shellcheck disable=SC2086 # an option and its value, or none
      seqrec-score --device cuda --topk $k $o -m "$T/m.sqm" "$T/t.sqr" > "$T/gpu"
      # shellcheck disable=SC2086
      SEQREC_GPU_TOPK=host seqrec-score --device cuda --topk $k $o -m "$T/m.sqm" "$T/t.sqr" \
        > "$T/host"
      cmp "$T/gpu" "$T/host"
    done
  done
  # the selection ran on the device (its op in the profile), or not at all
  SEQREC_GPU_PROFILE="$T/p.csv" seqrec-score --device cuda --topk 10 -m "$T/m.sqm" "$T/t.sqr" \
    > /dev/null
  grep -q '^topk_rows,1,' "$T/p.csv"
  SEQREC_GPU_TOPK=host SEQREC_GPU_PROFILE="$T/p.csv" seqrec-score --device cuda --topk 10 \
    -m "$T/m.sqm" "$T/t.sqr" > /dev/null
  ! grep -q '^topk_rows,' "$T/p.csv"
  # the lists really differ with the options (the test can see a lost filter)
  seqrec-score --device cuda --topk 60 -m "$T/m.sqm" "$T/t.sqr" > "$T/a"
  seqrec-score --device cuda --topk 60 --include-history -m "$T/m.sqm" "$T/t.sqr" > "$T/b"
  seqrec-score --device cuda --topk 60 --exclude-items "$T/retired" -m "$T/m.sqm" "$T/t.sqr" \
    > "$T/c"
  ! cmp -s "$T/a" "$T/b"
  ! cmp -s "$T/a" "$T/c"
  ! grep -Eq '[	,](3|5|8|13|21|34):' "$T/c"
  # the items of the CPU's lists (scores to float rounding)
  seqrec-score --topk 10 -m "$T/m.sqm" "$T/t.sqr" | sed 's/:[^,]*//g' > "$T/cpu-items"
  seqrec-score --device cuda --topk 10 -m "$T/m.sqm" "$T/t.sqr" | sed 's/:[^,]*//g' \
    > "$T/gpu-items"
  cmp "$T/cpu-items" "$T/gpu-items"
}

@test "device_score: ranks against every item or sampled ones are counted on the GPU, the host's ranks (history excluded or not, ties either way, an item filter, valid and test)" {
  seqrec-train --model sasrec --dim 16 --ffn 16 --max-len 12 --epochs 1 -o "$T/m.sqm" "$T/t.sqr" \
    2>/dev/null
  printf '%s\n' 3 5 8 13 21 34 > "$T/retired"
  for o in "" -x "--ties optimistic" "--exclude-items $T/retired" "-x --target valid"; do
    # shellcheck disable=SC2086 # options and their values, or none
    seqrec-score --device cuda $o -m "$T/m.sqm" "$T/t.sqr" | seqrec-cat > "$T/gpu"
    # shellcheck disable=SC2086
    SEQREC_GPU_RANKS=host seqrec-score --device cuda $o -m "$T/m.sqm" "$T/t.sqr" | seqrec-cat \
      > "$T/host"
    cmp "$T/gpu" "$T/host"
    [ "$(wc -l < "$T/gpu")" -gt 80 ]
  done
  # the options change the ranks (the test can see a lost one)
  seqrec-score --device cuda -m "$T/m.sqm" "$T/t.sqr" | seqrec-cat > "$T/a"
  seqrec-score --device cuda -x -m "$T/m.sqm" "$T/t.sqr" | seqrec-cat > "$T/b"
  seqrec-score --device cuda --ties optimistic -m "$T/m.sqm" "$T/t.sqr" | seqrec-cat > "$T/c"
  ! cmp -s "$T/a" "$T/b"
  ! cmp -s "$T/a" "$T/c"
  # counted on the device (its op in the profile), or on the host
  SEQREC_GPU_PROFILE="$T/p.csv" seqrec-score --device cuda -m "$T/m.sqm" "$T/t.sqr" > /dev/null
  grep -q '^rank_rows,1,' "$T/p.csv"
  SEQREC_GPU_RANKS=host SEQREC_GPU_PROFILE="$T/p.csv" seqrec-score --device cuda \
    -m "$T/m.sqm" "$T/t.sqr" > /dev/null
  ! grep -q '^rank_rows,' "$T/p.csv"
  # sampled candidates: drawn on the host first, counted on the GPU; the
  # ranks of drawing and comparing in one pass on the host
  for o in "--candidates uni:20" "--candidates pop:30 -x" "--candidates uni:20 -x --seed 7" \
    "--candidates uni:100"; do # 100 > the 59 candidates: every one
    # shellcheck disable=SC2086
    SEQREC_GPU_PROFILE="$T/p.csv" seqrec-score --device cuda $o -m "$T/m.sqm" "$T/t.sqr" \
      | seqrec-cat > "$T/gpu"
    grep -q '^rank_lists,1,' "$T/p.csv"
    # shellcheck disable=SC2086
    SEQREC_GPU_RANKS=host seqrec-score --device cuda $o -m "$T/m.sqm" "$T/t.sqr" | seqrec-cat \
      > "$T/host"
    cmp "$T/gpu" "$T/host"
  done
  # more candidates than are listed first (4096): drawn and compared on the host
  SEQREC_GPU_PROFILE="$T/p.csv" seqrec-score --device cuda --candidates uni:5000 \
    -m "$T/m.sqm" "$T/t.sqr" > /dev/null
  ! grep -q '^rank_' "$T/p.csv"
  # the flat, CORE and ELASTIC scorers end in the same request
  seqrec-train --model hstu --dim 16 --max-len 12 --heads 2 --epochs 1 -o "$T/h.sqm" \
    "$T/t.sqr" 2>/dev/null
  seqrec-score --device cuda -x -m "$T/h.sqm" "$T/t.sqr" | seqrec-cat > "$T/gpu"
  SEQREC_GPU_RANKS=host seqrec-score --device cuda -x -m "$T/h.sqm" "$T/t.sqr" | seqrec-cat \
    > "$T/host"
  cmp "$T/gpu" "$T/host"
}

@test "device_score: sasrec and bert4rec score a user alike in any batch or shard on the simulated GPU" {
  invariant sasrec --model sasrec --dim 16 --ffn 16 --max-len 12
  invariant bert4rec-linrec --model bert4rec --attn linrec --dim 16 --ffn 16 --max-len 12 \
    --heads 2
  # FPARec's positional tables: their rows a function of the position alone
  invariant fpositional --model sasrec --attn fpositional --dim 16 --ffn 16 --max-len 12
  # histories over k_attn.cu's 32-row tiles (the synthetic log's longest
  # run to 80): tiles from each segment's start, causal and not
  invariant sasrec-long --model sasrec --dim 16 --ffn 16 --max-len 80
  invariant bert4rec-long --model bert4rec --dim 16 --ffn 16 --max-len 80 --heads 2
}

@test "device_score: flat models (gru4rec, hstu), core and elastic score a user alike in any batch on the simulated GPU" {
  invariant gru4rec --model gru4rec --dim 16 --hidden 24 --max-len 12
  invariant hstu --model hstu --dim 16 --max-len 12 --heads 2
  invariant core --model core --dim 16 --max-len 12 --layers 1 --heads 1 --target random
  invariant elastic --model elastic --dim 8 --ffn 16 --max-len 12 --pool 4x4 --topk-experts 2 \
    --heads 1
}
