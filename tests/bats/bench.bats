#!/usr/bin/env bats
# bench/: the attention sweep's plots (bench/attn.gnuplot) of a narrowed
# sweep (ATTN_KINDS, ATTN_DIMS, ATTN_NMIN, ATTN_NMAX): only what was run,
# and not a single gnuplot warning; the machine named in the CSVs; the
# helpers sgemm_peak and isa_ops and the scoring bench (bench-score.sh),
# on small shapes (their timings are printed, never judged).

load helper

setup() {
  common_setup
  command -v gnuplot >/dev/null || skip "no gnuplot"
  mkdir -p "$T/out"
  HEAD="kind,d,N,B,threads,sec_per_step,peak_rss_mib,buffers_mib,status,heads,reps,kernel_sec"
}

# plot CSV_LINES...: $T/out/attn.csv of these rows, plotted; fails on any
# gnuplot output.
plot() {
  printf '%s\n' "$HEAD" "$@" > "$T/out/attn.csv"
  gnuplot -e "csv='$T/out/attn.csv'; outdir='$T/out'" "$SEQREC_ROOT/bench/attn.gnuplot" > "$T/gp.out" 2>&1
  [ ! -s "$T/gp.out" ] || { cat "$T/gp.out"; false; }
  [ -s "$T/out/attn_time.png" ] && [ -s "$T/out/attn_mem.png" ]
}

@test "attn.gnuplot: one kind at one width (ATTN_KINDS=softmax ATTN_DIMS=64) plots without a warning" {
  plot "softmax,64,64,1,2,0.0004,0.8,0.35,ok,2,1230,0.0004" \
       "softmax,64,128,1,2,0.0007,1.2,0.63,ok,2,659,0.0007"
}

@test "attn.gnuplot: a skipped size, a width with only skips, efficient-dwc and an unknown kind: no warning" {
  plot "efficient-dwc,64,64,1,2,0.0004,0.8,0.35,ok,2,1230,0.0004" \
       "efficient-dwc,64,128,1,2,0.0007,1.2,0.63,ok,2,659,0.0007" \
       "newkind,64,64,1,2,0.0005,0.9,0.35,ok,2,1230,0.0005" \
       "newkind,64,128,1,2,,,0.7,skipped-time,2,," \
       "softmax,128,64,1,2,,,0.7,skipped-mem,2,,"
}

@test "bench-attn.sh narrowed to two kinds, one width, N = 64..128: no gnuplot warning, efficient-dwc is linear" {
  bench=${SEQREC_BIN%/bin}/bench/attn_bench
  [ -x "$bench" ] || skip "no $bench (make ${bench#$SEQREC_ROOT/})"
  run --separate-stderr env ATTN_KINDS="softmax efficient-dwc" ATTN_DIMS=64 ATTN_NMIN=64 ATTN_NMAX=128 \
    sh "$SEQREC_ROOT/bench/bench-attn.sh" "$bench" "$T/out"
  [ "$status" -eq 0 ]
  [ -z "$stderr" ] || { echo "stderr: $stderr"; false; }
  grep -q '^efficient-dwc,64,2,64,128,[-0-9.]*,1,' "$T/out/attn_slopes.csv"
  grep -q '^softmax,64,2,64,128,[-0-9.]*,2,' "$T/out/attn_slopes.csv"
}

@test "bench-attn.sh: every row of attn.csv names the processor and the vector set" {
  bench=${SEQREC_BIN%/bin}/bench/attn_bench
  [ -x "$bench" ] || skip "no $bench"
  env ATTN_KINDS=softmax ATTN_DIMS=64 ATTN_NMIN=64 ATTN_NMAX=64 \
    sh "$SEQREC_ROOT/bench/bench-attn.sh" "$bench" "$T/out" "${SEQREC_BIN%/bin}/bench/sgemm_peak" > /dev/null
  head -n 1 "$T/out/attn.csv" | grep -q ',kernel_sec,device,device_mib,precision,cpu,vector_isa$'
  tail -n 1 "$T/out/attn.csv" | grep -q '^softmax,64,64,1,2,[0-9.e-]*,[0-9.]*,[0-9.]*,ok,2,[0-9]*,[0-9.e-]*,cpu,,fp32,'
  [ "$(wc -l < "$T/out/attn.csv")" -eq 2 ]
  tail -n 1 "$T/out/attn.csv" | grep -Eq ',(avx512f|avx2|x86-64|aarch64|[a-z0-9_]+)$'
}

# the bench helpers built beside the programs (make bats builds them)
peak() { "${SEQREC_BIN%/bin}/bench/sgemm_peak" "$@"; }

@test "sgemm_peak: --isa names a vector set; --rowwise times the engine's kernel with the set it ran; bad sets and shapes are usage errors" {
  [ -x "${SEQREC_BIN%/bin}/bench/sgemm_peak" ] || skip "no sgemm_peak"
  run peak --isa
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^(avx512f|avx2|x86-64|arm64|generic)$ ]]
  run peak --rowwise 16 100 8 1 0.01
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^[0-9.]+\ [0-9.]+\ [a-z0-9-]+$ ]]
  if [ "$(uname -m)" = x86_64 ]; then
    run peak --rowwise=x86-64 16 100 8 1 0.01
    [ "$status" -eq 0 ]
    [[ "$output" =~ \ x86-64$ ]]
  fi
  run peak --rowwise=avx9 16 100 8
  [ "$status" -eq 64 ]
  run peak --rowwise 0 100 8
  [ "$status" -eq 64 ]
  run peak --rowwise= 16 100 8
  [ "$status" -eq 64 ]
}

@test "isa_ops: one CSV line per vectorised kernel, on this build's set; a bad budget is a usage error" {
  ops=${SEQREC_BIN%/bin}/bench/isa_ops
  [ -x "$ops" ] || skip "no isa_ops"
  run --separate-stderr "$ops" 0.001
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 19 ]
  set=$(peak --isa)
  for l in "${lines[@]}"; do
    [[ "$l" =~ ^[a-z_]+,$set,[^,]+,[0-9.]+,[0-9.]+,(GB/s|GFLOP/s)$ ]] || { echo "bad: $l"; false; }
  done
  run "$ops" 0
  [ "$status" -eq 64 ]
  run "$ops" 1 2
  [ "$status" -eq 64 ]
}

@test "bench-score.sh on a small split: the machine lines, users a minute and the GEMM against OpenBLAS" {
  [ -x "${SEQREC_BIN%/bin}/bench/sgemm_peak" ] || skip "no sgemm_peak"
  "$SEQREC_BIN/seqrec-synth" --users 300 --items 200 --seed 2 --format stream |
    "$SEQREC_BIN/seqrec-split" -o "$T/s.split"
  run env THREADS=1 REPS=1 GEMM_SECONDS=0.05 \
    sh "$SEQREC_ROOT/bench/bench-score.sh" "$SEQREC_BIN" "$T/score.csv" "$T/s.split" \
    "${SEQREC_BIN%/bin}/bench/sgemm_peak"
  [ "$status" -eq 0 ]
  for m in cpu host_isa vector_isa vector_bits users items ranks_seconds_t1 ranks_users_per_min_t1 \
           topk_seconds_t1 topk_users_per_min_t1 gemm_engine_gflops_t1 gemm_openblas_gflops_t1 \
           gemm_ratio_t1; do
    grep -q "^score,$m,." "$T/score.csv" || { echo "no $m"; cat "$T/score.csv"; false; }
  done
  grep -q '^score,users,300$' "$T/score.csv"
  grep -q "^score,vector_isa,$(peak --isa)$" "$T/score.csv"
  ! grep -q '_t2,' "$T/score.csv" || false
}

@test "sasrec_torch.py (bench-sasrec's PyTorch twin) trains an epoch on a CPU-only torch, both losses" {
  py=$(. "$SEQREC_ROOT/bench/timing.sh" && TORCH_PYTHON= torch_python)
  [ -n "$py" ] || skip "no python3 with torch"
  "$SEQREC_BIN/seqrec-synth" --users 100 --items 50 --seed 2 --format stream |
    "$SEQREC_BIN/seqrec-split" -o "$T/s.split"
  for loss in ce bce; do
    run --separate-stderr sh -c "'$SEQREC_BIN/seqrec-cat' '$T/s.split' | '$py' '$SEQREC_ROOT/bench/sasrec_torch.py' \
      --epochs 1 --threads 1 --loss $loss --n-items 50 --max-len 10 --dim 8 --ffn 8 --layers 1 --heads 1 --batch 32"
    [ "$status" -eq 0 ] || { echo "$stderr"; false; }
    [[ "$output" == *"torch,loss,"* ]]
  done
}

@test "bert4rec_torch.py (bench-gpu's BERT4Rec twin) trains two epochs on a CPU-only torch; a bad --mask-prob is refused" {
  py=$(. "$SEQREC_ROOT/bench/timing.sh" && TORCH_PYTHON= torch_python)
  [ -n "$py" ] || skip "no python3 with torch"
  "$SEQREC_BIN/seqrec-synth" --users 100 --items 50 --seed 2 --format stream |
    "$SEQREC_BIN/seqrec-split" -o "$T/s.split"
  run --separate-stderr sh -c "'$SEQREC_BIN/seqrec-cat' '$T/s.split' | '$py' '$SEQREC_ROOT/bench/bert4rec_torch.py' \
    --epochs 2 --threads 1 --n-items 50 --max-len 10 --dim 8 --ffn 8 --layers 1 --heads 2 --batch 32 --mask-prob 0.3"
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [ "$(grep -c '^torch,loss,[0-9.]*$' <<< "$output")" = 2 ]
  [ "$(grep -c '^torch,epoch_seconds,' <<< "$output")" = 2 ]
  run --separate-stderr sh -c "'$SEQREC_BIN/seqrec-cat' '$T/s.split' | '$py' '$SEQREC_ROOT/bench/bert4rec_torch.py' --mask-prob 0"
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"--mask-prob must be in (0, 1]"* ]]
}

@test "bench-bert4rec.sh on a small split: the machine lines, C's epoch; PyTorch's and the speedup, or a line saying why not" {
  "$SEQREC_BIN/seqrec-synth" --users 120 --items 60 --seed 3 --format stream |
    "$SEQREC_BIN/seqrec-split" -o "$T/s.split"
  run env EPOCHS=1 THREADS=1 TORCH_PYTHON=/no/such/python \
    sh "$SEQREC_ROOT/bench/bench-bert4rec.sh" "$SEQREC_BIN" "$T/a.csv" "$T/s.split"
  [ "$status" -eq 0 ]
  for m in cpu host_isa users items c_seq_per_s_median c_epoch_seconds_median c_loss_last; do
    grep -q "^bert4rec,$m,." "$T/a.csv" || { echo "no $m"; cat "$T/a.csv"; false; }
  done
  grep -q '^bert4rec,items,60$' "$T/a.csv"
  grep -q '^bert4rec,torch,skipped: no python3 with torch' "$T/a.csv"
  ! grep -q '^bert4rec,speedup,' "$T/a.csv" || false
  py=$(. "$SEQREC_ROOT/bench/timing.sh" && TORCH_PYTHON= torch_python)
  [ -n "$py" ] || skip "no python3 with torch"
  run env EPOCHS=1 THREADS=1 TORCH_PYTHON="$py" \
    sh "$SEQREC_ROOT/bench/bench-bert4rec.sh" "$SEQREC_BIN" "$T/b.csv" "$T/s.split"
  [ "$status" -eq 0 ]
  for m in torch_version torch_seq_per_s_median torch_epoch_seconds_median torch_loss_last; do
    grep -q "^bert4rec,$m,." "$T/b.csv" || { echo "no $m"; cat "$T/b.csv"; false; }
  done
  grep -Eq '^bert4rec,speedup,[0-9]+\.[0-9]{2}$' "$T/b.csv"
}
