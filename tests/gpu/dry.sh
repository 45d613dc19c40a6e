#!/bin/sh
# dry.sh - `make gpu-check-dry`: gpu-check's one command run here, on the
# simulated device (tests/sim), to check the check itself before a
# borrowed GPU's minutes go on it: a part that fails for a reason of its
# own (a wrong option, a message, a shell slip) fails here too. Its numbers
# are no GPU's.
#
# Unpacks .gpu/pack.tar.xz (make gpu-pack) into build/gpu-dry, puts the
# simulated device in the real backend's place and the pack's tiny split
# in every split's (the simulated device runs a Beauty epoch in minutes),
# then runs check.sh PART... with GPU_CHECK_DRY=1 and the parts' sizes cut
# (epochs, timeouts). sanitize, bench and attn need compute-sanitizer and
# PyTorch on a GPU: they fail here, and are not in the default parts.
#
# Usage: tests/gpu/dry.sh SIM_SO [PART...]   (from the repository root)
set -eu
[ $# -ge 1 ] || { echo "usage: tests/gpu/dry.sh SIM_SO [PART...]" >&2; exit 64; }
sim=$1
shift
[ -f .gpu/pack.tar.xz ] || { echo "dry.sh: no .gpu/pack.tar.xz: make gpu-pack first" >&2; exit 66; }
[ -f "$sim" ] || { echo "dry.sh: no simulated device at $sim" >&2; exit 66; }
d=build/gpu-dry
rm -rf "$d" && mkdir -p "$d"
tar -xJf .gpu/pack.tar.xz -C "$d"
cp "$sim" "$d/pack/lib/libseqrec-cuda.so"
for f in beauty ml1m synth; do
  cp "$d/pack/data/tiny.split" "$d/pack/data/$f.split"
done
[ $# -gt 0 ] || set -- parity train nccl score bf16 graphs models profile
GPU_CHECK_DRY=1 BENCH_REPEAT=2 RUN_TIMEOUT=1200 BF16_EPOCHS=2 GRAPH_EPOCHS=3 GRAPH_TIMEOUT=600 MODELS_EPOCHS=1 MODELS_TIMEOUT=600 \
  exec "$d/pack/check.sh" "$@"
