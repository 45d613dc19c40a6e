#!/usr/bin/env bats
# The simulated device's diagnostics (HACKING.md "Diagnostics"), which no
# other test runs: SEQREC_SIM_TRACE (a line a launch) and
# SEQREC_SIM_HOST_ONLY (kernels checked and skipped: the host's own work),
# and bench/bench-gpu-host.sh, `make bench-gpu-host`, built on them.

load helper

setup() {
  sim_setup
  seqrec-synth --users 64 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  O=(--dim 16 --ffn 32 --max-len 10 --batch 16 --threads 1 --loss ce --device cuda --epochs 1)
}

@test "sim_diag: a host-only run queues the launches of a full run, and writes its model" {
  SEQREC_SIM_TRACE="$T/full.trace" seqrec-train "${O[@]}" -o "$T/full.sqm" "$T/s.sqr" 2>/dev/null
  SEQREC_SIM_HOST_ONLY=1 SEQREC_SIM_TRACE="$T/host.trace" seqrec-train "${O[@]}" \
    -o "$T/host.sqm" "$T/s.sqr" 2>/dev/null
  # name,blocks,threads,dynamic shared bytes: a line a launch; memsets,
  # copies, cuBLAS calls, cudaMalloc and cudaFree too
  [ "$(wc -l < "$T/full.trace")" -gt 100 ]
  ! grep -Ev '^k_[a-z0-9_]+,[0-9]+,[0-9]+,[0-9]+$|^[a-z0-9_]+_kernel,[0-9]+,[0-9]+,[0-9]+$|^(memset|copy|gemm|alloc|free),[0-9]+,0,0$' \
    "$T/full.trace"
  for op in memset copy gemm; do grep -q "^$op," "$T/full.trace"; done
  cmp "$T/full.trace" "$T/host.trace"
  [ -s "$T/host.sqm" ]
  # its numbers are not the model's: nothing ran on the device
  ! cmp -s "$T/full.sqm" "$T/host.sqm"
  # a trace file that cannot be opened is said, not ignored
  run env SEQREC_SIM_TRACE="$T/no/such/dir/t" seqrec-train "${O[@]}" -o "$T/x.sqm" "$T/s.sqr"
  [ "$status" -ne 0 ]
  [[ "$output" =~ SEQREC_SIM_TRACE ]]
}

@test "sim_diag: bench-gpu-host.sh writes its seven training configs and three scoring ones, the machine lines first" {
  mkdir "$T/out"
  EPOCHS=2 run sh "$SEQREC_ROOT/bench/bench-gpu-host.sh" "$SEQREC_BIN" "$SIM" "$T/out" \
    "$T/s.sqr" "$T/s.sqr"
  [ "$status" -eq 0 ]
  csv="$T/out/gpu-host.csv"
  grep -q '^gpu-host,cpu,' "$csv"
  grep -q '^bench,config,epoch_seconds,steps,ms_per_step,launches_per_step,device_ops_per_step$' "$csv"
  for c in a a-graphs b b-graphs b2048 b2048-bce b2048-bert4rec score-full score-full-host score-pop100; do
    grep -Eq "^gpu-host,$c,[0-9.]+,[0-9]+,[0-9.]+,[0-9.]+,[0-9.]+$" "$csv"
  done
  # the device's ops (kernels, GEMMs, memsets, copies) outnumber the kernels
  awk -F, '$2 == "b" && $7 > $6 { ok = 1 } END { exit !ok }' "$csv"
  # eager steps launch kernels; a graph replay launches none of its own
  awk -F, '$2 == "a" && $6 > 0 { ok = 1 } END { exit !ok }' "$csv"
  awk -F, '$2 == "b2048" && $4 == 1 { ok = 1 } END { exit !ok }' "$csv"
  # BERT4Rec's own step (its head and the output bias): not SASRec's launches
  awk -F, '$2 == "b2048" { s = $6 } $2 == "b2048-bert4rec" { b = $6 } END { exit !(b > 0 && b != s) }' "$csv"
  # scoring: 64 test users, one batch; its ranks' op a batch
  awk -F, '$2 == "score-full" && $4 == 1 && $6 >= 1 { ok = 1 } END { exit !ok }' "$csv"
  [ ! -e "$T/out/gpu-host.sqm" ] && [ ! -e "$T/out/gpu-host.sqm.ckpt" ]
}

@test "sim_diag: the linear layers' biases ride in cuBLASLt's epilogue; without an algorithm, the copies are back" {
  SEQREC_SIM_TRACE="$T/lt.trace" seqrec-train "${O[@]}" --log "$T/lt.log" -o "$T/lt.sqm" \
    "$T/s.sqr" 2>/dev/null
  SEQREC_SIM_LT_NONE=1 SEQREC_SIM_TRACE="$T/none.trace" seqrec-train "${O[@]}" \
    --log "$T/none.log" -o "$T/none.sqm" "$T/s.sqr" 2>/dev/null
  lt=$(grep -c '^k_copy2d,' "$T/lt.trace") none=$(grep -c '^k_copy2d,' "$T/none.trace")
  # SASRec's six biased projections a layer, two layers, a copy each a step
  # (and each scoring forward): the rest of the launches are the same
  [ "$none" -gt "$lt" ]
  [ $(( $(wc -l < "$T/none.trace") - $(wc -l < "$T/lt.trace") )) -eq $((none - lt)) ]
  a=$(grep -o '"loss":[0-9.]*' "$T/lt.log" | cut -d: -f2)
  b=$(grep -o '"loss":[0-9.]*' "$T/none.log" | cut -d: -f2)
  awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(a > 0 && d < 1e-5 && d > -1e-5) }'
}

@test "sim_diag: SEQREC_GPU_PLAIN turns the newest fast paths off: lt is the path without cuBLASLt, bf16-logits the CE's fp32 logits" {
  seqrec-train "${O[@]}" -o "$T/lt.sqm" "$T/s.sqr" 2>/dev/null
  SEQREC_SIM_LT_NONE=1 seqrec-train "${O[@]}" -o "$T/none.sqm" "$T/s.sqr" 2>/dev/null
  SEQREC_GPU_PLAIN=lt seqrec-train "${O[@]}" -o "$T/plain.sqm" "$T/s.sqr" 2>/dev/null
  cmp "$T/none.sqm" "$T/plain.sqm"
  ! cmp -s "$T/lt.sqm" "$T/plain.sqm"
  SEQREC_SIM_TRACE="$T/b.trace" seqrec-train "${O[@]}" --precision bf16 -o "$T/b.sqm" \
    "$T/s.sqr" 2>/dev/null
  SEQREC_GPU_PLAIN=bf16-logits SEQREC_SIM_TRACE="$T/p.trace" seqrec-train "${O[@]}" \
    --precision bf16 -o "$T/p.sqm" "$T/s.sqr" 2>/dev/null
  grep -q '^ce_row_bf16_kernel,' "$T/b.trace"
  ! grep -q '^ce_row_bf16_kernel,' "$T/p.trace"
  grep -q '^ce_row_kernel,' "$T/p.trace"
  ! cmp -s "$T/b.sqm" "$T/p.sqm"
  SEQREC_GPU_PLAIN=bf16-logits,lt seqrec-train "${O[@]}" --precision bf16 -o "$T/q.sqm" \
    "$T/s.sqr" 2>/dev/null
  SEQREC_GPU_PLAIN=all seqrec-train "${O[@]}" --precision bf16 -o "$T/r.sqm" "$T/s.sqr" 2>/dev/null
  cmp "$T/q.sqm" "$T/r.sqm"
  run env SEQREC_GPU_PLAIN=lt,fast seqrec-train "${O[@]}" -o "$T/x.sqm" "$T/s.sqr"
  [ "$status" -eq 64 ]
  [[ "$output" =~ "SEQREC_GPU_PLAIN: unknown path 'fast'" ]]
  [ ! -e "$T/x.sqm" ]
  # scoring reads it too (and takes neither path): the same scores with it
  seqrec-score --device cuda -m "$T/lt.sqm" --target test "$T/s.sqr" > "$T/s1"
  SEQREC_GPU_PLAIN=all seqrec-score --device cuda -m "$T/lt.sqm" --target test "$T/s.sqr" \
    > "$T/s2"
  cmp "$T/s1" "$T/s2"
  run env SEQREC_GPU_PLAIN=bf16 seqrec-score --device cuda -m "$T/lt.sqm" --target test \
    "$T/s.sqr"
  [ "$status" -eq 64 ]
  [[ "$output" =~ "unknown path 'bf16'" ]]
}

@test "sim_diag: scoring keeps its freed device blocks for the next batch; SEQREC_GPU_PLAIN=cache allocates and frees them every batch" {
  seqrec-train "${O[@]}" -o "$T/m.sqm" "$T/s.sqr" 2>/dev/null
  allocs() { # PLAIN BATCH OPTS...: cudaMalloc calls of a scoring run, its output in $T/out-PLAIN-BATCH
    local pl=$1 b=$2; shift 2
    rm -f "$T/a.trace"
    SEQREC_GPU_PLAIN=$pl SEQREC_SIM_TRACE="$T/a.trace" seqrec-score --device cuda --batch "$b" \
      -m "$T/m.sqm" "$@" "$T/s.sqr" > "$T/out-$pl-$b"
    grep -c '^alloc,' "$T/a.trace"
  }
  # 64 users: one batch, or 8 of 8 users, each allocating its work and
  # freeing it (the context's own blocks are in both counts)
  c1=$(allocs "" 64) p1=$(allocs cache 64) p8=$(allocs cache 8) c8=$(allocs "" 8)
  # every block is given back by the end, the cache's at the context's close
  [ "$(grep -c '^free,' "$T/a.trace")" -eq "$c8" ]
  cmp "$T/out--8" "$T/out-cache-8"
  cmp "$T/out--8" "$T/out--64"
  # plain: 7 more batches, each of at least 3 blocks
  [ $((p8 - p1)) -ge 21 ]
  # cached: the first batch's blocks serve the others (a batch's larger
  # work aside)
  [ $((c8 - c1)) -le 3 ]
  # top-K lists too
  c1=$(allocs "" 64 --topk 5) c8=$(allocs "" 8 --topk 5) p8=$(allocs cache 8 --topk 5)
  cmp "$T/out--8" "$T/out-cache-8"
  [ $((c8 - c1)) -le 3 ] && [ $((p8 - c1)) -ge 21 ]
}
