#!/usr/bin/env bats
# SEQREC_GPU_PROFILE=FILE (cuda/prof.cu): where a GPU run's device time
# goes, op by op, as CSV. Run on the simulated device of tests/sim, whose
# events carry the host's clock (the times are the simulation's; what is
# checked is what is counted and what is written).

load helper

setup() {
  common_setup
  SIM="$SEQREC_BIN/../lib/libseqrec-cuda-sim.so"
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  # 64 training sequences: 4 steps of 16 an epoch
  seqrec-synth --users 64 --items 30 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  O=(--dim 16 --ffn 32 --max-len 10 --batch 16 --threads 1 --loss ce --device cuda)
}

# column COL of the row whose op is OP
col() { awk -F, -v op="$2" -v c="$3" '$1 == op { print $c }' "$1"; }

@test "gpu_profile: a training run's ops, counted, with the same model as without" {
  seqrec-train "${O[@]}" --epochs 2 -o "$T/a.sqm" "$T/s.sqr" 2>/dev/null
  SEQREC_GPU_PROFILE="$T/p.csv" seqrec-train "${O[@]}" --epochs 2 -o "$T/b.sqm" "$T/s.sqr" 2>/dev/null
  cmp "$T/a.sqm" "$T/b.sqm" # profiling changes no bit
  cat "$T/p.csv"
  [[ "$(head -1 "$T/p.csv")" == "# seqrec GPU profile: "*" ops timed; wall "*" ms, device busy "* ]]
  [ "$(sed -n 2p "$T/p.csv")" = "op,calls,gpu_ms,gpu_us_per_call,gpu_share,host_ms,host_us_per_call" ]
  # 2 epochs of 4 steps, 2 layers: 16 attention backwards (written: _to), 8 losses, 8
  # Adam updates (one call a step for both runs of the parameters, with
  # and without weight decay: adam_runs); the forward also runs for
  # validation
  [ "$(col "$T/p.csv" attention_backward_to 2)" = 16 ]
  [ "$(col "$T/p.csv" ce_full 2)" = 8 ]
  [ "$(col "$T/p.csv" adam_runs 2)" = 8 ]
  [ "$(grep -c '^adam_update,' "$T/p.csv")" = 0 ]
  [ "$(col "$T/p.csv" attention_forward 2)" -gt 16 ]
  # the header's count is the rows' calls; the shares sum to 1; busiest first
  local n; n=$(head -1 "$T/p.csv" | awk '{ print $5 }')
  tail -n +3 "$T/p.csv" | awk -F, -v n="$n" '
    { calls += $2; share += $5; if (NR > 1 && $3 > last + 1e-9) bad = 1; last = $3
      if ($2 <= 0 || $3 < 0 || $6 < 0) bad = 1 }
    END { exit !(calls == n && share > 0.99 && share < 1.01 && !bad) }'
}

@test "gpu_profile: a GEMM called alone is labelled with its shape; scoring is profiled too" {
  seqrec-train "${O[@]}" --epochs 1 -o "$T/m.sqm" "$T/s.sqr" 2>/dev/null
  SEQREC_GPU_PROFILE="$T/s.csv" seqrec-score --device cuda -m "$T/m.sqm" --target test "$T/s.sqr" \
    > "$T/scores"
  cmp "$T/scores" <(seqrec-score --device cuda -m "$T/m.sqm" --target test "$T/s.sqr")
  cat "$T/s.csv"
  # the scoring GEMM: users x (items + 1) x dim, against the item table, by
  # the batch-invariant kernel (k_gemm.cu)
  grep -Eq '^gemm [0-9]+x31x16 nt invariant,[1-9]' "$T/s.csv"
  grep -q '^attention_forward,' "$T/s.csv"
}

@test "gpu_profile: with --cuda-graphs a replay is timed whole, and the model is unchanged" {
  seqrec-train "${O[@]}" --epochs 3 --cuda-graphs -o "$T/a.sqm" "$T/s.sqr" 2>/dev/null
  SEQREC_GPU_PROFILE="$T/g.csv" seqrec-train "${O[@]}" --epochs 3 --cuda-graphs -o "$T/b.sqm" \
    "$T/s.sqr" 2>/dev/null
  cmp "$T/a.sqm" "$T/b.sqm"
  cat "$T/g.csv"
  [ "$(col "$T/g.csv" 'graph replay (a whole step)' 2)" -gt 0 ]
}

@test "gpu_profile: %r in the path is the process's rank (0 alone), %% a %" {
  SEQREC_GPU_PROFILE="$T/p-%r-%%.csv" seqrec-train "${O[@]}" --epochs 1 -o "$T/m.sqm" "$T/s.sqr" \
    2>/dev/null
  [ -s "$T/p-0-%.csv" ]
}

@test "gpu_profile: a file that cannot be created is 73 before any work, and no model" {
  SEQREC_GPU_PROFILE="$T/no/such/dir/p.csv" run -73 seqrec-train "${O[@]}" --epochs 1 \
    -o "$T/m.sqm" "$T/s.sqr"
  [[ "$output" == *"SEQREC_GPU_PROFILE: cannot create $T/no/such/dir/p.csv"* ]]
  [ ! -e "$T/m.sqm" ]
  SEQREC_GPU_PROFILE="$T/no/such/dir/p.csv" run -73 seqrec-score --device cuda -m "$T/m.sqm" \
    "$T/s.sqr"
}

@test "gpu_profile: a profile that cannot be written is said on stderr; the run's own result stands" {
  [ -w /dev/full ] || skip "no /dev/full"
  SEQREC_GPU_PROFILE=/dev/full run -0 seqrec-train "${O[@]}" --epochs 1 -o "$T/m.sqm" "$T/s.sqr"
  [[ "$output" == *"seqrec-train: SEQREC_GPU_PROFILE: cannot write /dev/full"* ]]
  [ -s "$T/m.sqm" ]
  # and on the CPU the variable is not looked at
  SEQREC_GPU_PROFILE="$T/cpu.csv" seqrec-train --dim 16 --max-len 10 --epochs 1 -o "$T/c.sqm" \
    "$T/s.sqr" 2>/dev/null
  [ ! -e "$T/cpu.csv" ]
}
