#!/bin/sh
# run.sh NAME SECONDS [BUILD] - runs the libFuzzer harness BUILD/fuzz_NAME
# (make fuzz builds it) for SECONDS from a scratch copy of the seed corpus
# tests/fuzz/corpus/NAME/, so the tree is never modified. The grown corpus
# stays in BUILD/corpus/NAME, the log in BUILD/NAME.log; a crash, leak,
# timeout or out-of-memory input is saved in BUILD/crashes/NAME/ and makes
# the exit status 1.
set -u
name=$1 secs=$2 build=${3:-build-fuzz}
cd "$(dirname "$0")/../.."
bin=$build/fuzz_$name
seeds=tests/fuzz/corpus/$name
[ -x "$bin" ] || { echo "fuzz: $bin is not built (make fuzz-build)" >&2; exit 2; }
[ -d "$seeds" ] || { echo "fuzz: no seed corpus $seeds" >&2; exit 2; }
work=$build/corpus/$name crashes=$build/crashes/$name log=$build/$name.log
rm -rf "$work"
mkdir -p "$work" "$crashes"
cp "$seeds"/* "$work"/
echo "fuzz: $name for ${secs}s from $(ls "$seeds" | wc -l) seeds (log: $log)"
# One thread for OpenMP and OpenBLAS: the model harness scores through them.
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$crashes/" "$work" >"$log" 2>&1
rc=$?
grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" | sed "s/^/fuzz: $name: /"
echo "fuzz: $name: corpus $(ls "$work" | wc -l) files (from $(ls "$seeds" | wc -l) seeds)"
if [ $rc -ne 0 ]; then
  echo "fuzz: $name FAILED (exit $rc); the input is in $crashes/:" >&2
  ls -l "$crashes" >&2
  grep -E -A30 '^==[0-9]+==ERROR|runtime error|^SUMMARY|deadly signal|Test unit written' "$log" | head -60 >&2
  exit 1
fi
echo "fuzz: $name: no crash"
