#!/bin/sh
# bench/bench-parallel.sh BIN OUTDIR PEAK NAME:MAXLEN:SPLIT... - `make
# bench-parallel` (issue 36): SASRec's epoch on one process and on several
# processes of one launcher, per dataset (NAME, the SPLIT file, the model's
# --max-len MAXLEN), four runs each:
#   threads1  one process, --threads 1
#   threads2  one process, --threads 2
#   mpi-np1   MPIRUN -np 1 --threads 1 (P = 1: the launcher's baseline; one
#             process of one is a plain run, comm.h)
#   mpi-np2   MPIRUN -np 2 --threads 1 (P = 2: the batch cut into 2 parts,
#             one a process, the gradients summed along the ranks; micro.h)
# Each run trains EPOCHS epochs (default 2) of the same seeded SASRec
# (bench-sasrec's: d 64, ffn 64, 2 layers, 1 head, dropout 0.5, batch 128,
# full CE; MODEL_ARGS replaces all but the loss, the length and the seed) on
# a copy of SPLIT without its validation and test items (the same training
# samples; no validation to wait for). epoch_seconds is the least
# train_seconds of the run's epochs (the log's JSON lines: the batches
# only, the first epoch's warm-up left out when there are two),
# speedup_vs_p1 the mpi-np1 run's over the row's, and same_bytes whether
# the run's model file is the same bytes (cmp) as the one-process run with
# as many parts (same_bytes_as: --threads P x T), which a launcher run
# promises. Into OUTDIR/parallel.csv, after the machine lines (timing.sh)
# and the launcher, epochs and model lines ("parallel,metric,value"):
#   bench,dataset,run,processes,threads,parts,epoch_seconds,speedup_vs_p1,same_bytes_as,same_bytes
# one row a run ("parallel,..."; the one-process rows have "-" in the last
# two); and the plot OUTDIR/parallel.png (bench/parallel.gnuplot) when
# gnuplot is there. Without MPIRUN on PATH or a seqrec built with MPI the
# mpi rows say why in same_bytes, with empty times.
# Knobs: EPOCHS, MODEL_ARGS, MPIRUN (default mpirun), MPIRUN_FLAGS (default
# --oversubscribe --bind-to none: no process pinned to one core, as the
# one-process runs are not). Timings on a shared machine are noisy; nothing
# asserts them, but a launcher run whose model differs exits 1.
set -eu
BIN=$1 OUT=$2 PEAK=$3
shift 3
EPOCHS=${EPOCHS:-2}
MODEL_ARGS=${MODEL_ARGS:---dim 64 --ffn 64 --layers 2 --heads 1 --dropout 0.5 --batch 128}
MPIRUN=${MPIRUN:-mpirun}
MPIRUN_FLAGS=${MPIRUN_FLAGS:---oversubscribe --bind-to none}
here=$(dirname "$0")
. "$here/timing.sh"
CSV=$OUT/parallel.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$OUT"
rm -f "$CSV"
machine_lines "$CSV" parallel "$PEAK"

mpi=""
if ! command -v "$MPIRUN" >/dev/null 2>&1; then
  mpi="skipped (no $MPIRUN)"
elif ! ldd "$BIN/seqrec-train" 2>/dev/null | grep -q libmpi; then
  mpi="skipped (seqrec built without MPI: make MPI=1)"
fi
# Open MPI refuses to run as root without its two documented opt-ins.
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
{
  if [ -z "$mpi" ]; then
    echo "parallel,launcher,$("$MPIRUN" --version 2>/dev/null | head -n 1 | tr ',' ' ') $MPIRUN_FLAGS"
  else
    echo "parallel,launcher,$mpi"
  fi
  echo "parallel,epochs,$EPOCHS"
  echo "parallel,model,sasrec --loss ce $MODEL_ARGS --seed 1"
  echo "bench,dataset,run,processes,threads,parts,epoch_seconds,speedup_vs_p1,same_bytes_as,same_bytes"
} | tee -a "$CSV"

# train TAG PROCS THREADS MAXLEN SPLIT: one run into $tmp/TAG.log and .sqm
# (PROCS 0: no launcher).
train() {
  # shellcheck disable=SC2086
  set -- "$1" "$2" "$3" "$BIN/seqrec-train" --model sasrec --loss ce $MODEL_ARGS --max-len "$4" \
    --seed 1 --epochs "$EPOCHS" --threads "$3" --log "$tmp/$1.log" -o "$tmp/$1.sqm" "$5"
  tag=$1 procs=$2
  shift 3
  if [ "$procs" = 0 ]; then
    "$@"
  else
    # shellcheck disable=SC2086
    "$MPIRUN" $MPIRUN_FLAGS -np "$procs" "$@" < /dev/null
  fi || { echo "bench-parallel: $tag failed" >&2; exit 1; }
  [ -s "$tmp/$tag.sqm" ] || { echo "bench-parallel: $tag wrote no model" >&2; exit 1; }
}
least() { sed -n 's/.*"train_seconds":\([0-9.]*\).*/\1/p' "$1" | sort -g | head -n 1; }

bad=0
for spec in "$@"; do
  name=${spec%%:*} rest=${spec#*:}
  maxlen=${rest%%:*} split=${rest#*:}
  [ -r "$split" ] || { echo "bench-parallel: $name: no split $split" >&2; exit 66; }
  items=$("$BIN/seqrec-cat" -H "$split" | awk '$1 == "n_items" {print $2}')
  "$BIN/seqrec-cat" --no-ts "$split" | awk -F '\t' 'BEGIN {OFS = "\t"} {$3 = ""; $4 = ""; print}' |
    "$BIN/seqrec-cat" --from-text split --n-items "$items" -o "$tmp/$name.split"
  # run processes threads, in this order: each launcher run right after
  # the one-process run it is compared with
  for r in "threads1 0 1" "mpi-np1 1 1" "threads2 0 2" "mpi-np2 2 1"; do
    # shellcheck disable=SC2086
    set -- $r
    case $1 in mpi-*) [ -z "$mpi" ] || continue ;; esac
    echo "bench-parallel: $name, $1 ($(date +%T))" >&2
    train "$name-$1" "$2" "$3" "$maxlen" "$tmp/$name.split"
  done
  p1=""
  [ -n "$mpi" ] || p1=$(least "$tmp/$name-mpi-np1.log")
  for r in "threads1 1 1" "threads2 1 2" "mpi-np1 1 1" "mpi-np2 2 1"; do
    # shellcheck disable=SC2086
    set -- $r
    run=$1 procs=$2 threads=$3 parts=$(($2 * $3))
    sec="" speed="" as=- same=-
    case $run in mpi-*)
      as=threads$parts same=$mpi
      if [ -z "$mpi" ]; then
        same=yes
        cmp -s "$tmp/$name-threads$parts.sqm" "$tmp/$name-$run.sqm" || { same=no bad=1; }
      fi ;;
    esac
    if [ -s "$tmp/$name-$run.log" ]; then
      sec=$(least "$tmp/$name-$run.log")
      [ -z "$p1" ] || speed=$(awk -v a="$p1" -v b="$sec" 'BEGIN {if (b > 0) printf "%.2f", a / b}')
    fi
    echo "parallel,$name,$run,$procs,$threads,$parts,$sec,$speed,$as,$same"
  done > "$tmp/rows"
  tee -a "$CSV" < "$tmp/rows"
done

if command -v gnuplot >/dev/null 2>&1; then
  gnuplot -e "csv='$CSV'; out='$OUT/parallel.png'; pngcall='$here/../pipelines/png.gp'" \
    "$here/parallel.gnuplot"
else
  echo "bench-parallel: gnuplot not found: $CSV written, no PNG" >&2
fi
[ "$bad" = 0 ] || { echo "bench-parallel: a launcher run's model differs from the one-process run's" >&2; exit 1; }
