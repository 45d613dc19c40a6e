#!/bin/bash
# repro.sh - a reproduction's runs on a borrowed GPU, within its minutes,
# resumed at the next borrowed GPU from their checkpoints (issue 37: a GPU
# is often lent for minutes, not hours).
#
# On the GPU machine, from the repository root (the device tool's working
# tree), with the pack unpacked (make gpu-pack) and the reproduction's
# folder carried, its split made here first (make gpu-repro-splits):
#
#   tests/gpu/repro.sh PACK MINUTES TARGET [VAR=VALUE]...
#
#   e.g. tests/gpu/repro.sh /tmp/g/pack 4 elastic-runs ELASTIC_RUNS=elastic \
#          EPOCHS=500 ELASTIC_BATCH=2048 ELASTIC_TARGET=last
#
# runs `make TARGET BUILD=PACK DEVICE=cuda GPU_MINUTES=MINUTES VAR=VALUE...`:
# the pack's programs (PACK/bin), every run on the GPU with --cuda-graphs
# until the budget; a run the budget cuts keeps its checkpoint, and a run
# with one resumes it (pipelines/repro_run.sh). Then it writes
# $OUT/repro.txt (the card, the command, and each run's state: done, or
# its epochs so far) and packs repro/ for the way back (the device tool
# brings back 8 files of up to 16 MiB, 64 MiB in all):
#   repro.tar.gz         every run's log, record and metrics, and the
#                        checkpoints of the runs not done (the next GPU
#                        resumes them); over 15 MiB, cut into repro.tar.gz.00,
#                        .01, ... (at most 6: `cat repro.tar.gz* | tar -xz`);
#                        more than that is said in repro.txt, not sent
#   repro-models.tar.gz  the models of the runs done, when under 15 MiB
#                        (their metrics are in repro.tar.gz either way)
#   not the splits, nor the done runs' checkpoints.
#
# Back here: `cat FILES_AT/repro.tar.gz* | tar -xz` in the checkout, then the
# target's tables (e.g. `make elastic-tables`) and its report
# (`sh pipelines/repro_docs.sh doc/repro/elastic.md`); the next borrowed GPU
# carries repro/NAME again and the same command goes on where this one
# stopped. GPU_CHECK_DRY=1 (the bats test): on the simulated device;
# REPRO_ROOT: the folder summarised and packed (default repro, the
# pipelines' default outputs' folder); REPRO_PART_BYTES: the 15 MiB above.
# Exit: make's status; 64 on a usage error.
set -u
[ $# -ge 3 ] || { echo "usage: tests/gpu/repro.sh PACK MINUTES TARGET [VAR=VALUE]..." >&2; exit 64; }
here=$(cd "$1" && pwd) || exit 64
minutes=$2 target=$3
shift 3
case $minutes in '' | *[!0-9]*) echo "repro.sh: MINUTES must be a whole number, not '$minutes'" >&2; exit 64 ;; esac
[ -x "$here/bin/seqrec-train" ] || { echo "repro.sh: no pack at $here (bin/seqrec-train)" >&2; exit 64; }
if [ ! -f Makefile ] || [ ! -d pipelines ]; then echo "repro.sh: run it from the repository root" >&2; exit 64; fi
# shellcheck source=tests/gpu/cudalibs.sh
. "$here/cudalibs.sh"
[ "${GPU_CHECK_DRY:-}" = 1 ] || unset SEQREC_SIMULATED_DEVICE
out=${OUT:-$here/out}
root=${REPRO_ROOT:-repro}
mkdir -p "$out" "$root"
sum=$out/repro.txt
{
  echo "# seqrec gpu repro $(date -u +%FT%TZ)"
  if [ "${GPU_CHECK_DRY:-}" = 1 ]; then echo "# DRY RUN on the simulated device: no GPU's numbers"
  else nvidia-smi -L 2>/dev/null | sed 's/^/# /'; fi
  echo "# make $target BUILD=$here DEVICE=cuda GPU_MINUTES=$minutes $*"
} > "$sum"
t0=$SECONDS
make --no-print-directory "$target" BUILD="$here" DEVICE=cuda GPU_MINUTES="$minutes" "$@"
rc=$?
echo "# make exit $rc after $((SECONDS - t0)) s" >> "$sum"
# each run with a record: done (its model written; how it ended, from the
# record: patience, epochs or diverged), to resume, or not started, with the
# epochs it has logged; the done runs' models and checkpoints listed to go
# apart (the results and what a resume needs first)
done_list=$out/repro-done.lst
: > "$done_list"
find "$root" -name '*.run' | sort | while read -r r; do
  m=${r%.run}.sqm
  epochs=$(grep -c '"epoch"' "${r%.run}.log" 2>/dev/null)
  if [ -s "$m" ]; then
    state="done$(sed -n 's/^stop: \([a-z]*\).*/ (\1)/p' "$r")" # patience, epochs or diverged
    printf '%s\n%s\n' "$m" "$m.ckpt" >> "$done_list"
  elif [ -s "$m.ckpt" ]; then state="to resume"; else state="not started"; fi
  printf '%s\t%s\t%s epochs logged\t%s\n' "${r%.run}" "$state" "${epochs:-0}" "$(sed -n 's/^device: //p' "$r")"
done >> "$sum"
rm -f "$out"/repro.tar.gz* "$out/repro-models.tar.gz"
tar -czf "$out/repro.tar.gz" --exclude='*.split' --exclude='*.seq' --exclude-from="$done_list" "$root"
lim=${REPRO_PART_BYTES:-$((15 << 20))} # a part's bytes (the bats test's: small)
size=$(wc -c < "$out/repro.tar.gz")
if [ "$size" -gt "$lim" ]; then
  split -b "$lim" -d -a 2 "$out/repro.tar.gz" "$out/repro.tar.gz." && rm "$out/repro.tar.gz"
  parts=$(find "$out" -name 'repro.tar.gz.*' | wc -l)
  if [ "$parts" -gt 6 ]; then
    echo "# repro.tar.gz is $size bytes in $parts parts: over what comes back (6 parts of $lim bytes); carry less" >> "$sum"
  else
    echo "# repro.tar.gz is $size bytes: in $parts parts (cat repro.tar.gz.* | tar -xz)" >> "$sum"
  fi
fi
if [ -s "$done_list" ]; then
  grep '\.sqm$' "$done_list" | tar -czf "$out/repro-models.tar.gz" -T - 2>/dev/null
  msize=$(wc -c < "$out/repro-models.tar.gz")
  if [ "$msize" -gt "$lim" ]; then
    rm "$out/repro-models.tar.gz"
    echo "# the done runs' models ($msize bytes packed) stay on the GPU machine: over a part's $lim bytes" >> "$sum"
  fi
fi
rm -f "$done_list"
cat "$sum"
exit $rc
