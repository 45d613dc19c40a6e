#!/usr/bin/env bats
# The CUDA backend is a shared object loaded on demand (lib/ops/gpu_load.c):
# no program links cuBLAS, so a CPU-only start-up does not pay to load it.

load helper

setup() {
  common_setup
  SO="$SEQREC_BIN/../lib/libseqrec-cuda.so"
}

@test "no program links a CUDA library" {
  for p in "$SEQREC_BIN"/seqrec*; do
    # seqrec-nightly is a shell script: no libraries of its own
    [ "$(head -c 4 "$p" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    run -0 ldd "$p"
    if [[ "$output" == *libcublas* || "$output" == *libcudart* ]]; then
      echo "${p##*/} links CUDA: $output"; false
    fi
  done
}

@test "seqrec-score --version loads no CUDA library, even beside the backend" {
  run -0 env LD_DEBUG=libs seqrec-score --version
  [[ "$output" != *libcublas* && "$output" != *libcudart* && "$output" != *libseqrec-cuda* ]]
}

@test "libseqrec-cuda.so exports its table and nothing named sq_gpu_*" {
  [ -f "$SO" ] || skip "built with CUDA=0: no libseqrec-cuda.so"
  run -0 nm -D --defined-only --format=posix "$SO"
  [[ "$output" != *sq_gpu_* ]]
  # One function: sq_cuda_backend (gpu_ops.h's SQ_GPU_OPS_SYMBOL).
  [ "$(awk '$2 == "T" || $2 == "W" || $2 == "i" { print $1 }' <<<"$output")" = sq_cuda_backend ]
}

@test "libseqrec-cuda.so needs nothing from the program that loads it" {
  [ -f "$SO" ] || skip "built with CUDA=0: no libseqrec-cuda.so"
  run -0 nm -D --undefined-only "$SO"
  [[ "$output" != *" sq_"* ]]
}
