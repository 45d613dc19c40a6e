# helper.bash - shared setup for the bats suites (load with `load helper`).
#
# SEQREC_BIN (set by `make bats`) holds the programs under test; the suites
# run them by their installed names. Each test gets its own scratch dir.

bats_require_minimum_version 1.5.0

common_setup() {
  : "${SEQREC_BIN:?run the suites through make bats}"
  : "${SEQREC_ROOT:?run the suites through make bats}"
  PATH="$SEQREC_BIN:$PATH"
  T="$BATS_TEST_TMPDIR"
  FIX="$SEQREC_ROOT/tests/fixtures"
  GOLD="$SEQREC_ROOT/tests/golden"
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
}

# sim_setup: common_setup, then the simulated CUDA device (tests/sim) as
# the GPU of every program the test runs; skips the test when it was not
# built.
sim_setup() {
  common_setup
  SIM="$SEQREC_BIN/../lib/libseqrec-cuda-sim.so"
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
}

# log_loss LOG: the epochs' losses of a seqrec-train log, one a line.
log_loss() { sed -n 's/.*"loss":\([0-9.]*\).*/\1/p' "$1"; }

# need_mirror FILE...: sets MIRROR to the data mirror, $DATA_MIRROR (a
# relative one is of the checkout, as for make) or, unset, ../shared/data
# beside the checkout; skips the test, saying where it looked, unless it
# holds every FILE. The only place a suite names a mirror path.
need_mirror() {
  MIRROR=${DATA_MIRROR:-$SEQREC_ROOT/../shared/data}
  case $MIRROR in /*) ;; *) MIRROR=$SEQREC_ROOT/$MIRROR ;; esac
  local f
  for f in "$@"; do
    [ -r "$MIRROR/$f" ] || skip "no $f in the data mirror $MIRROR (set DATA_MIRROR=DIR)"
  done
}

# no_leftovers DIR: fails if DIR holds any file (final or temp) besides
# those named after it.
no_leftovers() {
  local dir=$1; shift
  local f base keep
  for f in "$dir"/* "$dir"/.[!.]*; do
    [ -e "$f" ] || continue
    base=${f##*/}
    keep=0
    for k in "$@"; do [ "$base" = "$k" ] && keep=1; done
    if [ $keep = 0 ]; then echo "left behind: $f"; return 1; fi
  done
}

# flip_byte FILE OFFSET: xor the byte at OFFSET with 0x01, in place.
flip_byte() {
  python3 - "$1" "$2" <<'PY'
import sys
p, off = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, 'rb').read())
b[off] ^= 1
open(p, 'wb').write(bytes(b))
PY
}

# set_u32 FILE OFFSET VALUE: overwrite a little-endian u32 in place.
set_u32() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys, struct
p, off, v = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
b = bytearray(open(p, 'rb').read())
b[off:off+4] = struct.pack('<I', v)
open(p, 'wb').write(bytes(b))
PY
}

# file_size FILE
file_size() { stat -c %s "$1"; }

# The long option that starts each option line of --help, sorted.
help_options() {
  sed -n 's/^  *\(-[A-Za-z], \)\{0,1\}\(--[a-z][a-z-]*\).*/\2/p' | sort
}

# The long option of each .TP entry of a man page's OPTIONS section, sorted.
man_options() {
  sed 's/\\-/-/g' "$1" |
    awk '/^\.SH/ { opts = ($2 == "OPTIONS") } opts && tp { print } { tp = ($0 == ".TP") }' |
    grep -o -- '--[a-z][a-z-]*' | sort
}

# strip_times LOG: a training log without its wall times.
strip_times() { sed 's/,"seconds":.*//' "$1"; }

# same_seed_same_model ARGS...: two runs of `seqrec-train ARGS` (2 epochs
# on $T/s.sqr) give the same model bytes and log; --seed 2 gives another
# model. Leaves $T/m1.sqm.
same_seed_same_model() {
  local i
  for i in 1 2; do
    seqrec-train "$@" --epochs 2 --log "$T/log$i" -o "$T/m$i.sqm" "$T/s.sqr"
  done
  cmp "$T/m1.sqm" "$T/m2.sqm"
  diff <(strip_times "$T/log1") <(strip_times "$T/log2")
  seqrec-train "$@" --epochs 2 --seed 2 --log /dev/null -o "$T/m3.sqm" "$T/s.sqr"
  ! cmp -s "$T/m1.sqm" "$T/m3.sqm"
}

# resume_same_model ARGS...: `seqrec-train ARGS` for 1 epoch on $T/s.sqr,
# resumed to 2, ends with the bytes of the uninterrupted 2-epoch run.
# Leaves $T/full.sqm and $T/r.sqm with its checkpoint.
resume_same_model() {
  seqrec-train "$@" --epochs 2 --log /dev/null -o "$T/full.sqm" "$T/s.sqr"
  seqrec-train "$@" --epochs 1 --log /dev/null -o "$T/r.sqm" "$T/s.sqr"
  seqrec-train --resume "$T/r.sqm.ckpt" --epochs 2 --threads 2 --log /dev/null "$T/s.sqr"
  cmp "$T/full.sqm" "$T/r.sqm"
}

# score_matches_log LOG MODEL: seqrec-score's validation NDCG@10 of MODEL on
# $T/s.sqr is the best of the training log (to 5e-6): validation and
# seqrec-score rank the same way.
score_matches_log() {
  local best got
  best=$(sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' "$1" | sort -g | tail -n 1)
  got=$(seqrec-score -m "$2" --target valid "$T/s.sqr" | seqrec-metrics --json -k 10 \
        | sed -n 's/.*"ndcg@10": *\([0-9.]*\).*/\1/p')
  echo "log $best score $got"
  awk -v a="$best" -v b="$got" 'BEGIN { d = a - b; exit !(d < 5e-6 && d > -5e-6) }'
}

# scores_invariant MODEL: the same ranks of $T/s.sqr on 1 thread in batches
# of 7 as on 2 threads in the default batches.
scores_invariant() {
  seqrec-score -m "$1" -j 1 -b 7 "$T/s.sqr" > "$T/r1"
  seqrec-score -m "$1" -j 2 "$T/s.sqr" > "$T/r2"
  cmp "$T/r1" "$T/r2"
}

# roundtrip_and_init ARGS...: a 2-epoch `seqrec-train ARGS` model file gives
# the same top-5 on 2 threads and on 1, and `--init` from it keeps its model
# options (its header but for the file, training and validation keys).
roundtrip_and_init() {
  seqrec-train "$@" --epochs 2 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  seqrec-score -m "$T/m.sqm" -k 5 "$T/s.sqr" > "$T/a"
  seqrec-score -m "$T/m.sqm" -k 5 --threads 1 "$T/s.sqr" > "$T/b"
  cmp "$T/a" "$T/b"
  [ -s "$T/a" ]
  seqrec-train --init "$T/m.sqm" --epochs 1 --threads 2 --log /dev/null -o "$T/m2.sqm" "$T/s.sqr"
  diff <(seqrec-cat --header "$T/m.sqm" | grep -v -e '^file' -e 'train\.' -e 'valid\.') \
       <(seqrec-cat --header "$T/m2.sqm" | grep -v -e '^file' -e 'train\.' -e 'valid\.')
}

# empty_first_record SRC DST: SRC (a sequences stream whose first record has
# one item) with that record's len set to 0 and its item (and timestamp)
# removed. The checksum is left stale: a reader stops at the record first.
empty_first_record() {
  python3 - "$1" "$2" <<'PY'
import sys, struct
b = bytearray(open(sys.argv[1], 'rb').read())
flags, meta_len = struct.unpack('<I', b[8:12])[0], struct.unpack('<I', b[20:24])[0]
rec = 24 + meta_len                       # tag, user, len, items, [ts]
assert struct.unpack('<I', b[rec + 5:rec + 9])[0] == 1, "first record must have one item"
b[rec + 5:rec + 9] = struct.pack('<I', 0)
del b[rec + 9:rec + 9 + 4 + (8 if flags & 1 else 0)]
open(sys.argv[2], 'wb').write(bytes(b))
PY
}

# device_like_cpu DATA SEQREC-TRAIN-OPTION...: a model on the simulated GPU
# (the device*.bats suites; the caller exports SEQREC_CUDA_LIB and
# SEQREC_SIMULATED_DEVICE): one epoch on the CPU and two on the GPU
# (--log and -o added), the GPU's loss within 1e-3 relative of the CPU's,
# the two GPU model files the same bytes, and the GPU's model ($T/g.sqm)
# scoring on the CPU and on the GPU with every metric within 0.02.
# DEVICE_TWICE=0: one GPU run (the kernels' determinism is the unit-sim
# tests'; a suite keeps one twice-run case, and make check its minutes).
device_like_cpu() {
  local data=$1 lc lg; shift
  seqrec-train "$@" --log "$T/cpu.log" -o "$T/c.sqm" "$data"
  seqrec-train "$@" --device cuda --log "$T/gpu.log" -o "$T/g.sqm" "$data"
  if [ "${DEVICE_TWICE:-1}" = 1 ]; then
    seqrec-train "$@" --device cuda --log "$T/gpu2.log" -o "$T/g2.sqm" "$data"
    cmp "$T/g.sqm" "$T/g2.sqm" # two GPU runs, the same bits
  fi
  lc=$(log_loss "$T/cpu.log")
  lg=$(log_loss "$T/gpu.log")
  [ -n "$lc" ] && [ -n "$lg" ]
  awk -v a="$lc" -v b="$lg" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-3 * a) }' \
    || { echo "$*: cpu loss $lc, gpu $lg"; false; }
  seqrec-score -m "$T/g.sqm" --target test "$data" | seqrec-metrics -k 10 > "$T/on-cpu"
  seqrec-score --device cuda -m "$T/g.sqm" --target test "$data" | seqrec-metrics -k 10 > "$T/on-gpu"
  paste "$T/on-cpu" "$T/on-gpu" | awk '{ for (i = 1; i <= NF / 2; i++) { a = $i; b = $(i + NF / 2);
    if (a ~ /^[0-9.]+$/ && (a - b > 0.02 || b - a > 0.02)) { print; exit 1 } } }'
}

# make in the checkout (the pipelines' suites)
mk() { make --no-print-directory -C "$SEQREC_ROOT" "$@"; }

# need_mpi: skips the test without mpirun or an MPI build; sets what Open MPI
# needs to run in the suites: root allowed (its documented flags, for CI)
# and, for SANITIZE=1 builds, no leak check in its processes (its
# components keep allocations past MPI_Finalize and are unloaded by then, so
# LeakSanitizer cannot even name them; the single-process suites check
# seqrec's own; ASan and UBSan stay on).
need_mpi() {
  command -v mpirun >/dev/null || skip "no mpirun (Open MPI: openmpi-bin)"
  ldd "$SEQREC_BIN/seqrec-train" | grep -q libmpi || skip "seqrec built without MPI (make MPI=1)"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0"
}

# need_scipy: SCIPY_PY becomes the first python3 that imports numpy and
# scipy (a pyenv python3 earlier on PATH may lack Debian's python3-scipy,
# which .ci/deps installs), else the test is skipped.
need_scipy() {
  SCIPY_PY=""
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import numpy, scipy.stats' 2>/dev/null; then SCIPY_PY=$p; return 0; fi
  done
  skip "no python3 with numpy and scipy"
}
