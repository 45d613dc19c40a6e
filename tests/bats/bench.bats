#!/usr/bin/env bats
# bench/: the attention sweep's plots (bench/attn.gnuplot) of a narrowed
# sweep (ATTN_KINDS, ATTN_DIMS, ATTN_NMIN, ATTN_NMAX): only what was run,
# and not a single gnuplot warning.

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
