#!/bin/sh
# bench/isa-speed.sh NATIVE AVX2 BASE OUT.csv - the second half of
# `make isa-test`: the builds of one instruction set each (make ISA=avx2,
# ISA=base: build-avx2/, build-base/) beside the native build with its
# clones (NATIVE, e.g. build/), run natively on this host, each one the
# host can run:
#   bits    a seeded SASRec epoch per attention kind of ISA_ATTNS (make
#           passes ISA_ATTNS and ISA_TRAIN) writes the same model file from
#           every build (OpenBLAS held to one kernel, Prescott, as the qemu
#           half does); exit 1 when one differs
#   speed   bench/isa_ops (every vectorised kernel on one thread) per
#           build, with OpenBLAS given that machine's kernels (Haswell for
#           AVX2, Prescott for baseline), printed as a table with each
#           set's rate over the native one, and written to OUT.csv
#           ("isa,OP,SET,us,rate,unit" after the machine lines).
# A kernel far below the others on one set, beyond what its width
# explains, is the sign of accumulators spilling or a loop left scalar.
set -eu
NATIVE=$1 AVX2=$2 BASE=$3 CSV=$4
here=$(dirname "$0")
. "$here/timing.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -f "$CSV"
machine_lines "$CSV" isa "$NATIVE/bench/sgemm_peak" > /dev/null

# the builds this host runs: NAME DIR OPENBLAS_CORETYPE
{
  echo "native $NATIVE -"
  grep -qw avx2 /proc/cpuinfo && echo "avx2 $AVX2 Haswell"
  echo "base $BASE Prescott"
} > "$tmp/builds"

b=$NATIVE/bin
"$b/seqrec-synth" --users 400 --seed 3 | "$b/seqrec-preprocess" --format tsv --core 5 - |
  "$b/seqrec-split" --leave-one-out -o "$tmp/split.sqr"
for a in ${ISA_ATTNS:-softmax}; do
  n=${a%%:*}
  # shellcheck disable=SC2046,SC2086
  while read -r name dir _; do
    OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=Prescott \
      "$dir/bin/seqrec-train" ${ISA_TRAIN:-} --attn $(echo "$a" | tr : ' ') \
      -o "$tmp/$name-$n.sqm" "$tmp/split.sqr" 2>/dev/null
    cmp "$tmp/native-$n.sqm" "$tmp/$name-$n.sqm" || {
      echo "isa-test: the $name build's $n model differs from the native one's" >&2; exit 1; }
  done < "$tmp/builds"
done
echo "isa-test: each model (${ISA_ATTNS:-softmax}) is the same bytes from the native build and the $(awk 'NR > 1 {printf "%s%s", s, $1; s = ", "}' "$tmp/builds") builds, run natively"

while read -r name dir core; do
  if [ "$core" = - ]; then
    env -u OPENBLAS_CORETYPE "$dir/bench/isa_ops" "${ISA_SECONDS:-0.1}"
  else
    OPENBLAS_CORETYPE=$core "$dir/bench/isa_ops" "${ISA_SECONDS:-0.1}"
  fi > "$tmp/$name.csv"
  sed 's/^/isa,/' "$tmp/$name.csv" >> "$CSV"
done < "$tmp/builds"
echo "isa-test: kernel throughput on one thread, $(sed -n 's/^isa,cpu,//p' "$CSV") (ratio: to the native build)"
files=$(awk -v t="$tmp" '{printf "%s/%s.csv ", t, $1}' "$tmp/builds")
# shellcheck disable=SC2086
awk -F, '
  FNR == 1 { f++ }
  { op[FNR] = $1; unit[FNR] = $6; set[f] = $2; rate[f, FNR] = $5; n = FNR }
  END {
    printf "%-18s %-8s", "kernel", "unit"
    for (j = 1; j <= f; j++) printf " %9s", set[j]
    for (j = 2; j <= f; j++) printf " %9s", set[j] "/" set[1]
    printf "\n"
    for (i = 1; i <= n; i++) {
      printf "%-18s %-8s", op[i], unit[i]
      for (j = 1; j <= f; j++) printf " %9.2f", rate[j, i]
      for (j = 2; j <= f; j++) printf " %9.2f", rate[j, i] / rate[1, i]
      printf "\n"
    }
  }' $files
