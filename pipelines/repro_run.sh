#!/bin/sh
# repro_run.sh - one training run of a reproduction under the target's
# device and time budget (the Makefile's DEVICE= and GPU_MINUTES=):
#
#   sh pipelines/repro_run.sh BIN/seqrec-train OPTION... -o MODEL ... INPUT
#   sh pipelines/repro_run.sh --score BIN/seqrec-score OPTION...
#
# REPRO_DEVICE (DEVICE=): added as --device to both programs.
# REPRO_GRAPHS (CUDA_GRAPHS=, default 1): on a CUDA device a fresh training
#   run adds --cuda-graphs (a resumed one keeps its checkpoint's choice);
#   0 trains eagerly.
# REPRO_DEADLINE (GPU_MINUTES=: the second, since the epoch, the budget of
# this make invocation ends): a training run
#   - that has a checkpoint MODEL.ckpt resumes it (--resume, with the -o,
#     --log, --epochs, --threads and --device given; the log appended), so a
#     run stopped by the budget goes on where it stopped, bit for bit;
#   - otherwise starts afresh (a stale MODEL removed first, so that only a
#     run that ended writes one);
#   - runs under `timeout` until the deadline: SIGTERM leaves the last
#     epoch's checkpoint (seqrec-train(1)) and this script exits 0 with no
#     MODEL, which the pipeline's next line reads as "not done yet" (its
#     scoring is skipped and its table cell says "not run"; the next make
#     resumes it);
#   - with under REPRO_MIN_LEFT (60) seconds left does not start.
# Without REPRO_DEADLINE the command runs as given (plus the device).
# Every training run with -o MODEL records how it was made in MODEL's
# sidecar (MODEL without .sqm, plus .run): `device: DEV` and `args: ARG...`,
# the command's options as given; a resume sets the args' --epochs to its own
# and adds its device (`cpu+cuda`) when it differs. A run that ends well adds
# `stop: WHY EPOCHS`, the model's train.stop and train.epochs_done (read with
# the seqrec-cat beside PROGRAM; seqrec-train(1)): `stop: patience 74` says
# that --epochs did not bind. pipelines/paper_table.sh --budget reads the
# record for the tables' device and budget columns.
# Exit: the program's status, or 0 when the budget stopped it.
set -u
score=0
if [ "${1:-}" = --score ]; then
  score=1
  shift
fi
[ $# -ge 1 ] || { echo "usage: repro_run.sh [--score] PROGRAM ARG..." >&2; exit 64; }
prog=$1
shift
dev=
[ -n "${REPRO_DEVICE:-}" ] && dev="--device $REPRO_DEVICE"
graphs=
case ${REPRO_DEVICE:-} in
  cuda*) [ $score = 1 ] || [ "${REPRO_GRAPHS:-1}" = 0 ] || graphs=--cuda-graphs ;;
esac
if [ $score = 1 ]; then
  # shellcheck disable=SC2086 # dev is one option and its value, or nothing
  exec "$prog" "$@" $dev
fi

# the options a resume keeps, and the input (the last argument)
model='' log='' epochs='' threads='' input=''
prev=
for a in "$@"; do
  case $prev in
    -o|--output) model=$a ;;
    --log) log=$a ;;
    --epochs) epochs=$a ;;
    --threads) threads=$a ;;
  esac
  prev=$a
  input=$a
done
devname=${REPRO_DEVICE:-cpu}
side=${model%.sqm}.run

# sidecar_fresh ARG...: a fresh run's record; sidecar_resume: a resume's
# --epochs and device added to the record it continues (none: nothing)
sidecar_fresh() {
  [ -n "$model" ] || return 0
  printf 'device: %s\nargs: %s\n' "$devname" "$*" > "$side.tmp" && mv "$side.tmp" "$side" ||
    echo "repro_run.sh: cannot write $side" >&2
}
sidecar_resume() {
  [ -s "$side" ] || return 0
  awk -v e="$epochs" -v d="$devname" '
    /^device: / {
      n = split(substr($0, 9), a, "+"); seen = 0
      for (i = 1; i <= n; i++) if (a[i] == d) seen = 1
      print seen ? $0 : $0 "+" d; next
    }
    /^args: / && e != "" {
      n = split($0, w, " "); line = w[1]
      for (i = 2; i <= n; i++) { if (w[i - 1] == "--epochs") w[i] = e; line = line " " w[i] }
      print line; next
    }
    { print }' "$side" > "$side.tmp" && mv "$side.tmp" "$side" ||
    echo "repro_run.sh: cannot update $side" >&2
}

# sidecar_end: how a run that ended well ended (train.stop and
# train.epochs_done of its model), replacing what an earlier end said
sidecar_end() {
  [ -s "$side" ] && [ -s "$model" ] || return 0
  seqrec_cat=$(dirname "$prog")/seqrec-cat
  [ -x "$seqrec_cat" ] || return 0
  "$seqrec_cat" --header "$model" > "$side.hdr" &&
    awk -v side="$side" '
      FILENAME != side { sub(/^config\t/, ""); if (sub(/^train\.stop=/, "")) why = $0
                         else if (sub(/^train\.epochs_done=/, "")) done = $0; next }
      !/^stop: / { print }
      END { if (why != "") print "stop: " why " " done }' "$side.hdr" "$side" > "$side.tmp" &&
    mv "$side.tmp" "$side" || echo "repro_run.sh: cannot update $side" >&2
  rm -f "$side.hdr" "$side.tmp"
}

if [ -z "${REPRO_DEADLINE:-}" ]; then
  sidecar_fresh "$@"
  # shellcheck disable=SC2086 # dev is one option and its value, or nothing
  "$prog" "$@" $dev $graphs
  rc=$?
  [ $rc != 0 ] || sidecar_end
  exit $rc
fi
[ -n "$model" ] || { echo "repro_run.sh: no -o MODEL in the command" >&2; exit 64; }

now=$(date +%s)
left=$((REPRO_DEADLINE - now))
if [ "$left" -lt "${REPRO_MIN_LEFT:-60}" ]; then
  echo "repro_run.sh: the GPU budget is spent: $model waits for the next make" >&2
  exit 0
fi
if [ -s "$model.ckpt" ]; then
  echo "repro_run.sh: $model resumes from its checkpoint (${left}s of budget left)" >&2
  set -- --resume "$model.ckpt" -o "$model" ${log:+--log "$log"} ${epochs:+--epochs "$epochs"} \
    ${threads:+--threads "$threads"} "$input"
  graphs= # the checkpoint's own
  sidecar_resume
else
  rm -f "$model"
  sidecar_fresh "$@"
fi
# shellcheck disable=SC2086
timeout -s TERM -k 60 "$left" "$prog" "$@" $dev $graphs
rc=$?
if [ $rc = 124 ]; then
  echo "repro_run.sh: the GPU budget ran out during $model: its checkpoint is kept for the next make" >&2
  exit 0
fi
[ $rc != 0 ] || sidecar_end
exit $rc
