#!/usr/bin/env bats
# attn_bench --device and --precision (bench/attn_bench.c): the sublayer on
# the simulated GPU of tests/sim (when built) against the CPU, the device
# memory it reports, the refusals; and bench/attn_torch.py, its PyTorch
# twin, on the CPU when python3 has torch. The real GPU runs both in
# gpu-check's attn part (tests/gpu/check.sh). Tiny shapes: the timings are
# printed, never judged.

load helper

setup() {
  common_setup
  BENCH=${SEQREC_BIN%/bin}/bench/attn_bench
  [ -x "$BENCH" ] || skip "no $BENCH"
  SIM="$SEQREC_BIN/../lib/libseqrec-cuda-sim.so"
  QUICK=(-w 0 -r 1 -m 0)
}

# field LINE I: the I-th comma-separated field of LINE.
field() { echo "$1" | cut -d, -f"$2"; }

# close A B SCALE: |A - B| <= 1e-4 SCALE (a sum against its sum of magnitudes).
close() {
  awk -v a="$1" -v b="$2" -v s="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * s) }' ||
    { echo "$1 vs $2 (scale $3)"; false; }
}

@test "attn_bench: the CSV header and a CPU line end with device cpu, no device_mib, fp32" {
  run --separate-stderr "$BENCH" --header "${QUICK[@]}" softmax 16 8
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "kind,d,N,B,threads,sec_per_step,peak_rss_mib,buffers_mib,status,heads,reps,kernel_sec,device,device_mib,precision" ]
  [[ "${lines[1]}" =~ ^softmax,8,16,1,2,[0-9.e-]+,-?[0-9.]+,[0-9.]+,ok,2,1,[0-9.e-]+,cpu,,fp32$ ]]
  # --precision sets the GPU's GEMMs: the CPU computes in fp32 whatever it says
  run -0 "$BENCH" --precision bf16 --device cpu "${QUICK[@]}" linrec 16 8
  [[ "$output" == *",cpu,,fp32" ]]
}

@test "attn_bench: a malformed --device or --precision is a usage error (64), naming it; no GPU is 69" {
  for d in gpu cuda: cuda:x CPU; do
    run -64 --separate-stderr "$BENCH" --device "$d" softmax 16 8
    [[ "$stderr" == *"--device '$d': expected cpu, cuda or cuda:N"* ]]
    [ -z "$output" ]
  done
  run -64 --separate-stderr "$BENCH" --precision fp16 softmax 16 8
  [[ "$stderr" == *"--precision 'fp16': expected fp32, tf32 or bf16"* ]]
  SEQREC_CUDA_LIB=/nonexistent/libseqrec-cuda.so run -69 --separate-stderr "$BENCH" --device cuda \
    softmax 16 8
  [[ "$stderr" == *"no CUDA backend"* ]]
  [ -z "$output" ]
}

@test "attn_bench --dry --device cuda: the GPU's workspace (softmax keeps a log-sum-exp, not the N x N probabilities)" {
  cpu=$("$BENCH" --dry softmax 1024 64)
  gpu=$("$BENCH" --dry --device cuda --precision bf16 softmax 1024 64)
  [[ "$cpu" == softmax,64,1024,1,2,,,*,dry,2,0,,cpu,,fp32 ]]
  [[ "$gpu" == softmax,64,1024,1,2,,,*,dry,2,0,,cuda,,bf16 ]]
  # the probabilities are 2 heads x 1024^2 floats = 8 MiB, the GPU's log-sum-exp 8 KiB
  awk -v c="$(field "$cpu" 8)" -v g="$(field "$gpu" 8)" 'BEGIN { exit !(c - g >= 7.9) }'
}

@test "attn_bench --device cuda on the simulated device: softmax and linrec, device memory, the CPU's y and dx" {
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  for kind in softmax linrec; do
    # fp32: the GPU's GEMMs as the CPU's (tf32 would round their inputs)
    run --separate-stderr "$BENCH" --checksum --device cuda --precision fp32 -B 2 "${QUICK[@]}" \
      "$kind" 8 8
    [ "$status" -eq 0 ] || { echo "$stderr"; false; }
    l=${lines[0]} g=${lines[1]}
    [ "$(field "$l" 1)" = "$kind" ] && [ "$(field "$l" 4)" = 2 ]
    [ "$(field "$l" 9)" = ok ] && [ "$(field "$l" 13)" = cuda ] && [ "$(field "$l" 15)" = fp32 ]
    # the layer's buffers (and the staging mirror) on the device: over
    # buffers_mib less the host-only offsets, positions and lengths
    awk -v d="$(field "$l" 14)" -v b="$(field "$l" 8)" 'BEGIN { exit !(d > 0 && d >= 0.9 * b) }' ||
      { echo "device_mib $(field "$l" 14), buffers_mib $(field "$l" 8)"; false; }
    # the CPU's step from the same parameters, x and dy
    c=$("$BENCH" --checksum "${QUICK[@]}" -B 2 "$kind" 8 8 | sed -n 2p)
    [[ "$c" == checksum,* ]] && [[ "$g" == checksum,* ]]
    for i in 2 4; do # sum(y) and sum(dx) within 1e-4 of their magnitudes
      close "$(field "$g" $i)" "$(field "$c" $i)" "$(field "$c" $((i + 1)))"
      close "$(field "$g" $((i + 1)))" "$(field "$c" $((i + 1)))" "$(field "$c" $((i + 1)))"
    done
  done
}

@test "attn_bench --device cuda: a simulated device that is not enabled is 69" {
  [ -f "$SIM" ] || skip "no simulated device built"
  SEQREC_CUDA_LIB="$SIM" run -69 --separate-stderr "$BENCH" --device cuda softmax 16 8
  [[ "$stderr" == *"no CUDA device"* ]]
}

# the python3 with torch, or skip
torch_py() {
  PY=""
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import torch' 2>/dev/null; then PY=$p; break; fi
  done
  [ -n "$PY" ] || skip "no python3 with torch"
}

@test "attn_torch.py on a CPU torch: attn_bench's columns, the fused (or math) kernel, bf16 autocast" {
  torch_py
  run --separate-stderr "$PY" "$SEQREC_ROOT/bench/attn_torch.py" --header -t 1 "${QUICK[@]}" 16 8
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [ "${lines[0]}" = "$("$BENCH" --header --dry softmax 16 8 | head -n 1)" ]
  [[ "${lines[1]}" =~ ^torch-(sdpa|math),8,16,1,1,[0-9.e-]+,-?[0-9.]+,[0-9.]+,ok,2,1,[0-9.e-]+,cpu,,fp32$ ]]
  # buffers: 4 (d x d + d) parameters and their gradients, x, dx, y, dy
  [ "$(field "${lines[1]}" 8)" = "$(awk 'BEGIN { printf "%.3f", (2 * 4 * 72 + 4 * 128) * 4 / 1048576 }')" ]
  run --separate-stderr "$PY" "$SEQREC_ROOT/bench/attn_torch.py" --precision bf16 -B 2 -H 4 -t 1 \
    "${QUICK[@]}" 8 8
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [[ "$output" =~ ^torch-(sdpa|math),8,8,2,1,.*,ok,4,1,[0-9.e-]+,cpu,,bf16$ ]]
}

@test "attn_torch.py: bad options are usage errors (64), no GPU is 69" {
  torch_py
  t="$SEQREC_ROOT/bench/attn_torch.py"
  run -64 --separate-stderr "$PY" "$t" --device gpu 16 8
  [[ "$stderr" == *"--device 'gpu': expected cpu, cuda or cuda:N"* ]]
  run -64 --separate-stderr "$PY" "$t" --precision fp16 16 8
  [[ "$stderr" == *"fp16"* ]]
  run -64 --separate-stderr "$PY" "$t" -H 3 16 8
  [[ "$stderr" == *"heads 3 do not divide D = 8"* ]]
  run -64 --separate-stderr "$PY" "$t" 16
  run -64 --separate-stderr "$PY" "$t" 0 8
  [ -z "$output" ]
  if ! "$PY" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    run -69 --separate-stderr "$PY" "$t" --device cuda 16 8
    [[ "$stderr" == *"no CUDA device"* ]]
  fi
}
