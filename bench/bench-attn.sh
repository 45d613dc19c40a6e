#!/bin/sh
# bench/bench-attn.sh ATTN_BENCH OUTDIR [PEAK] - the attention sweep of `make bench`
# (issue 4, evidence: LinRec Fig. 3 / ELASTIC Fig. 3 style).
#
# For every kind (the registered token mixers, `ATTN_BENCH --list`), d in
# {64, 128} and N = 64, 128, ..., 16384 it runs ATTN_BENCH
# (bench/attn_bench.c) once, in a fresh process: one causal token-mixer
# sublayer, the kind's own (lib/model/mix_*.c: its projections and kernel,
# forward and full backward) on B = 1 sequence of length N, 2 threads, 2
# heads (hydra: d heads, hs = 1; the fixed patterns and mixing ignore
# heads), the kind's options at their defaults, and appends its line to
# OUTDIR/attn.csv:
#   kind,d,N,B,threads,sec_per_step,peak_rss_mib,buffers_mib,status,heads,
#   reps,kernel_sec,device,device_mib,precision,cpu,vector_isa
# (on the CPU: device cpu, no device_mib, precision fp32; the GPU's sweep is
# gpu-check's attn part, tests/gpu/check.sh)
# (sec_per_step: median seconds of the whole step; kernel_sec: of the
# mixer's forward + backward alone (projections and kernel; the kernel is
# not timed apart), over the same steps, i.e. the step without the zeroing
# of the gradients; peak_rss_mib: the step's peak resident memory over the
# process baseline; buffers_mib: the bytes of everything the layer
# allocated, counted by the program).
# B = 1 at every N: a step's time grows with N as the kernel's cost does
# (linear kinds ~N, quadratic ~N^2), which is what the slopes test. Kernels
# that parallelise over segments only (average, linear-anneal, exp-anneal,
# mixing forward) then run on one thread.
#
# Budget: the step of the next size is predicted as 4x the last measured
# one (quadratic growth, the worst case here). A (kind, d) stops growing N
# (status skipped-time for the rest) once that prediction exceeds
# ATTN_STEP_LIMIT seconds (default 60: a quadratic kind whose N = 8192 step
# takes up to 15 s still gets its N = 16384 point); a size is skipped
# (skipped-budget) when the sweep's elapsed time plus the prediction would
# pass ATTN_BUDGET seconds (default 900; the whole sweep took ~10-14 min on
# the shared 2-core machine), and (skipped-mem) when the layer's
# buffers would exceed ATTN_MEM_LIMIT_MIB (default half of MemAvailable).
# Each skip holds for the larger N of that (kind, d) too. Skipped sizes
# still get their line, with empty times and the analytic
# buffers_mib (attn_bench --dry). Timing: the median of at least 3 steps
# after a warm-up step (more for small N, 0.5 s in all); a step over 2 s is
# timed once after the warm-up (reps = 1 in the CSV), and a size predicted
# over 2 s gets no warm-up step at all (every buffer is touched when it is
# allocated, so a first step costs the same as a later one: measured at
# softmax N = 4096, 1.53 s either way).
#
# Then OUTDIR/attn_slopes.csv: per (kind, d) the least-squares slope of
# log(time) on log(N) over the upper half of the measured N (the largest
# ceil(n/2) sizes, n >= 2), ~1 for linear kinds and ~2 for quadratic ones
# ("expected"), for the step and (kernel_slope) for the mixer's forward +
# backward alone,
# and the plots OUTDIR/attn_time.png and attn_mem.png (bench/attn.gnuplot).
#
# Narrowing for development: ATTN_KINDS, ATTN_DIMS, ATTN_NMIN, ATTN_NMAX,
# ATTN_THREADS, ATTN_BATCH (then B is that at every N); the plots then
# show only what ran. The narrowest: ATTN_KINDS=softmax ATTN_DIMS=64
# ATTN_NMIN=64 ATTN_NMAX=128 make bench-attn (a second).
set -eu
BIN=$1 OUT=$2
. "$(dirname "$0")/timing.sh" # machine_lines; PEAK (sgemm_peak) names the vector set
KINDS=${ATTN_KINDS:-$("$BIN" --list)}
DIMS=${ATTN_DIMS:-"64 128"}
NMIN=${ATTN_NMIN:-64}
NMAX=${ATTN_NMAX:-16384}
THREADS=${ATTN_THREADS:-2}
BATCH=${ATTN_BATCH:-1}
LIMIT=${ATTN_STEP_LIMIT:-60}
BUDGET=${ATTN_BUDGET:-900}
if [ -z "${ATTN_MEM_LIMIT_MIB:-}" ]; then
  ATTN_MEM_LIMIT_MIB=$(awk '/^MemAvailable:/ {printf "%d", $2 / 1024 / 2}' /proc/meminfo)
fi
# The benchmark re-executes itself with this set otherwise (lib/util/threads.h).
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY

CSV=$OUT/attn.csv
SLOPES=$OUT/attn_slopes.csv
start=$(date +%s)
"$BIN" --header --dry softmax 64 64 | head -n 1 > "$CSV.tmp"
for d in $DIMS; do
  for kind in $KINDS; do
    last="" skip=""
    N=$NMIN
    while [ "$N" -le "$NMAX" ]; do
      dry=$("$BIN" --dry -B "$BATCH" -t "$THREADS" "$kind" "$N" "$d")
      mib=$(echo "$dry" | cut -d, -f8)
      pred=0
      [ -n "$last" ] && pred=$(awk -v t="$last" 'BEGIN { print 4 * t }')
      if [ -z "$skip" ] && awk -v p="$pred" -v l="$LIMIT" 'BEGIN { exit !(p > l) }'; then
        skip=skipped-time
      fi
      budget=""
      if [ -z "$skip" ] && awk -v p="$pred" -v e="$(( $(date +%s) - start ))" -v b="$BUDGET" \
           'BEGIN { exit !(e + p > b) }'; then
        budget=skipped-budget
      fi
      mem=""
      if [ -z "$skip" ] &&
         awk -v m="$mib" -v l="$ATTN_MEM_LIMIT_MIB" 'BEGIN { exit !(m > l) }'; then
        mem=skipped-mem
      fi
      status=${skip:-${mem:-$budget}}
      skip=$status  # larger N only cost more
      if [ -n "$status" ]; then
        line=$(echo "$dry" | awk -F, -v OFS=, -v s="$status" '{ $9 = s; print }')
      else
        warm=1
        awk -v p="$pred" 'BEGIN { exit !(p > 2) }' && warm=0
        line=$("$BIN" -B "$BATCH" -t "$THREADS" -s 2 -w "$warm" "$kind" "$N" "$d") || {
          echo "bench-attn: $kind N=$N d=$d failed" >&2; exit 1; }
        last=$(echo "$line" | cut -d, -f6)
      fi
      echo "$line" | tee -a "$CSV.tmp"
      N=$((N * 2))
    done
  done
done
# the machine, on every row: the processor and the vector set (timing.sh)
machine_lines /dev/null attn "${3:-}" > "$OUT/attn_machine.tmp"
cpu=$(sed -n 's/^attn,cpu,//p' "$OUT/attn_machine.tmp")
isa=$(sed -n 's/^attn,vector_isa,//p' "$OUT/attn_machine.tmp")
rm -f "$OUT/attn_machine.tmp"
awk -v c="$cpu" -v i="$isa" 'NR == 1 {print $0 ",cpu,vector_isa"; next} {print $0 "," c "," i}' \
  "$CSV.tmp" > "$CSV"
rm -f "$CSV.tmp"

# Slopes over the upper half of the measured sizes: of the step time (the
# evidence) and of the mixer's forward + backward alone.
awk -F, -v OFS=, '
  NR > 1 && $9 == "ok" { key = $1 "," $2; m = ++n[key]
                         x[key, m] = log($3); y[key, m] = log($6); z[key, m] = log($12)
                         if (!(key in seen)) { seen[key] = 1; order[++nk] = key } }
  function slope(v, key, lo, hi,   j, h, sx, sy, sxx, sxy) {
    h = hi - lo + 1
    for (j = lo; j <= hi; j++) { sx += x[key, j]; sy += v[key, j]; sxx += x[key, j]^2; sxy += x[key, j] * v[key, j] }
    return (h * sxy - sx * sy) / (h * sxx - sx * sx)
  }
  END {
    print "kind,d,points,N_from,N_to,slope,expected,kernel_slope"
    for (i = 1; i <= nk; i++) {
      key = order[i]; m = n[key]; split(key, kd, ",")
      e = kd[1] ~ /^(linrec|linear|efficient|efficient-dwc|hydra)$/ ? 1 : 2
      if (m < 2) { print key, m, "", "", "", e, ""; continue }
      h = int((m + 1) / 2); if (h < 2) h = 2; lo = m - h + 1
      printf "%s,%d,%d,%d,%.3f,%d,%.3f\n", key, h, exp(x[key, lo]) + 0.5, exp(x[key, m]) + 0.5,
             slope(y, key, lo, m), e, slope(z, key, lo, m)
    }
  }' "$CSV" > "$SLOPES"
echo "bench-attn: slopes of log time vs log N (upper half of the measured N):"
cat "$SLOPES"

if command -v gnuplot >/dev/null 2>&1; then
  gnuplot -e "csv='$CSV'; outdir='$OUT'" "$(dirname "$0")/attn.gnuplot"
  echo "bench-attn: plots in $OUT/attn_time.png and $OUT/attn_mem.png"
else
  echo "bench-attn: gnuplot not found: no plots" >&2
fi
echo "bench-attn: results in $CSV, $SLOPES ($(( $(date +%s) - start )) s)"
