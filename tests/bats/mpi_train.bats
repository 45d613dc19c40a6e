#!/usr/bin/env bats
# seqrec-train under a launcher (issue 36): `mpirun -np P seqrec-train
# --threads T` writes the same model bytes as one process with --threads
# P*T, only rank 0 writes, --resume keeps the cut, mismatched ranks are
# refused naming both, and a killed rank ends the job. Skipped where
# mpirun or a build with MPI is missing.

load helper

setup() {
  common_setup
  need_mpi
  seqrec-synth --users 300 --items 80 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--dim 8 --ffn 16 --max-len 12 --batch 64 --seed 3)
}

# mpi N ARGS...: seqrec-train in N processes (more than the cores: CI has 2)
mpi() {
  local n=$1; shift
  mpirun --oversubscribe -np "$n" "$@" < /dev/null
}

# the log without its wall times (tools cut the line at "seconds")
untimed() { sed 's/,"seconds".*//' "$1"; }

@test "mpi_train: 2 processes of 1 thread write the bytes of --threads 2, twice" {
  seqrec-train "${TINY[@]}" --threads 2 --epochs 2 --log "$T/one.log" -o "$T/one.sqm" "$T/s.sqr"
  local run_no # (bats' run sets i)
  for run_no in 1 2; do
    run -0 mpi 2 seqrec-train "${TINY[@]}" --threads 1 --epochs 2 --log "$T/m$run_no.log" \
      -o "$T/m$run_no.sqm" "$T/s.sqr"
    cmp "$T/one.sqm" "$T/m$run_no.sqm"
    diff <(untimed "$T/one.log") <(untimed "$T/m$run_no.log")
  done
  [ "$(wc -l < "$T/m1.log")" -eq 2 ]  # rank 0 alone logs
}

@test "mpi_train: 2 processes of 2 threads write the bytes of --threads 4; bert4rec too" {
  seqrec-train "${TINY[@]}" --threads 4 --epochs 1 --clip 1 --log /dev/null -o "$T/t4.sqm" "$T/s.sqr"
  run -0 mpi 2 seqrec-train "${TINY[@]}" --threads 2 --epochs 1 --clip 1 --log /dev/null \
    -o "$T/m4.sqm" "$T/s.sqr"
  cmp "$T/t4.sqm" "$T/m4.sqm"
  seqrec-train --model bert4rec "${TINY[@]}" --threads 3 --epochs 1 --log /dev/null \
    -o "$T/b3.sqm" "$T/s.sqr"
  run -0 mpi 3 seqrec-train --model bert4rec "${TINY[@]}" --threads 1 --epochs 1 \
    --log /dev/null -o "$T/mb3.sqm" "$T/s.sqr"
  cmp "$T/b3.sqm" "$T/mb3.sqm"
}

@test "mpi_train: a gradient of several slices along 3 ranks, and a rank with no part, keep the bits" {
  # The ranks' ring moves 1 M elements a slice (micro.h SQ_MICRO_SLICE).
  # 9000 items x 128, full CE: 1.3 M elements, all summed, 2 slices, each
  # one run of the gradient. 40000 items x 128, sampled softmax with 64
  # negatives: the item table's gradient is row-sparse and only the
  # step's rows travel, about 26000 of its 40000 in runs between the
  # others, packed into 4 slices (3 ranks start 3 slices in a block, then
  # the next: micro.c ring_slice). The middle rank receives a slice while
  # it sends the one before on. --batch 3 in 3 x 2 parts leaves rank 2 without a
  # part (at most 3 parts, on ranks 0 and 1).
  local net=(--dim 128 --ffn 64 --max-len 12 --batch 64 --seed 3 --epochs 1 --log /dev/null)
  seqrec-synth --users 100 --items 9000 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/d.sqr"
  seqrec-train "${net[@]}" --threads 3 -o "$T/d1.sqm" "$T/d.sqr"
  [ "$(stat -c %s "$T/d1.sqm")" -gt $((4 << 20)) ] # more than a slice of floats
  run -0 mpi 3 seqrec-train "${net[@]}" --threads 1 -o "$T/d3.sqm" "$T/d.sqr"
  cmp "$T/d1.sqm" "$T/d3.sqm"
  seqrec-synth --users 200 --items 40000 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/big.sqr"
  net+=(--loss sampled-softmax --neg 64 --clip 1) # the norm over the summed rows and zeros
  seqrec-train "${net[@]}" --threads 3 -o "$T/one.sqm" "$T/big.sqr"
  run -0 mpi 3 seqrec-train "${net[@]}" --threads 1 -o "$T/m.sqm" "$T/big.sqr"
  cmp "$T/one.sqm" "$T/m.sqm"
  seqrec-train "${TINY[@]}" --batch 3 --epochs 1 --clip 1 --threads 6 --log /dev/null \
    -o "$T/t6.sqm" "$T/s.sqr"
  run -0 mpi 3 seqrec-train "${TINY[@]}" --batch 3 --epochs 1 --clip 1 --threads 2 \
    --log /dev/null -o "$T/m6.sqm" "$T/s.sqr"
  cmp "$T/t6.sqm" "$T/m6.sqm"
}

@test "mpi_train: --neg-share and --lazy-adam across 2 processes write the bytes of --threads 2 and 4" {
  for s in sequence batch; do
    local o=(--loss sampled-softmax --neg 8 --neg-sampler mixed --neg-share $s --lazy-adam --epochs 1)
    seqrec-train "${TINY[@]}" "${o[@]}" --threads 2 --log /dev/null -o "$T/one.sqm" "$T/s.sqr"
    run -0 mpi 2 seqrec-train "${TINY[@]}" "${o[@]}" --threads 1 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
    cmp "$T/one.sqm" "$T/m.sqm"
    # two threads a rank: each adds its workers' rows too
    seqrec-train "${TINY[@]}" "${o[@]}" --threads 4 --log /dev/null -o "$T/four.sqm" "$T/s.sqr"
    run -0 mpi 2 seqrec-train "${TINY[@]}" "${o[@]}" --threads 2 --log /dev/null -o "$T/m4.sqm" "$T/s.sqr"
    cmp "$T/four.sqm" "$T/m4.sqm"
  done
}

@test "mpi_train: only rank 0 writes; the run resumes with the same cut, refuses another" {
  mkdir "$T/out"
  run -0 mpi 2 seqrec-train "${TINY[@]}" --threads 1 --epochs 1 --log "$T/out/m.log" \
    -o "$T/out/m.sqm" "$T/s.sqr"
  no_leftovers "$T/out" m.sqm m.sqm.ckpt m.log
  run -0 mpi 2 seqrec-train --threads 1 --epochs 2 --resume "$T/out/m.sqm.ckpt" \
    --log /dev/null -o "$T/out/m.sqm" "$T/s.sqr"
  seqrec-train "${TINY[@]}" --threads 2 --epochs 2 --log /dev/null -o "$T/t2.sqm" "$T/s.sqr"
  cmp "$T/t2.sqm" "$T/out/m.sqm"
  cp "$T/out/m.sqm" "$T/before.sqm"
  run -64 mpi 2 seqrec-train --threads 2 --epochs 3 --resume "$T/out/m.sqm.ckpt" \
    --log /dev/null -o "$T/out/m.sqm" "$T/s.sqr"
  [[ "$output" == *"cut into 2 parts (processes x threads), this run's into 4 (2 x 2)"* ]]
  cmp "$T/before.sqm" "$T/out/m.sqm"
}

@test "mpi_train: ranks with other options or other data are refused, naming both" {
  run -64 mpirun --oversubscribe -np 1 seqrec-train "${TINY[@]}" --threads 1 --epochs 1 \
    -o "$T/x.sqm" "$T/s.sqr" : -np 1 seqrec-train "${TINY[@]}" --threads 1 --epochs 1 --seed 4 \
    -o "$T/x.sqm" "$T/s.sqr"
  [[ "$output" == *"rank 1 has train.seed=4, rank 0 train.seed=3"* ]]
  [ ! -e "$T/x.sqm" ]
  seqrec-synth --users 300 --items 80 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/o.sqr"
  run -64 mpirun --oversubscribe -np 1 seqrec-train "${TINY[@]}" --threads 1 --epochs 1 \
    -o "$T/x.sqm" "$T/s.sqr" : -np 1 seqrec-train "${TINY[@]}" --threads 1 --epochs 1 \
    -o "$T/x.sqm" "$T/o.sqr"
  [[ "$output" == *"rank 1 has data."* ]]
  [ ! -e "$T/x.sqm" ]
}

@test "mpi_train: a killed rank ends the job, non-zero, without a model" {
  mpi 2 seqrec-train "${TINY[@]}" --threads 1 --epochs 500 --log /dev/null -o "$T/k.sqm" \
    "$T/s.sqr" > "$T/k.out" 2>&1 &
  local job=$! pid="" try
  for try in $(seq 100); do
    pid=$(pgrep -f -- "-o $T/k.sqm" | tail -n 1) || true
    [ -n "$pid" ] && [ -e "$T/k.sqm.ckpt" ] && break
    sleep 0.2
  done
  [ -n "$pid" ]
  kill -9 "$pid"
  local t0=$SECONDS rc=0
  wait "$job" || rc=$?
  [ "$rc" -ne 0 ]
  [ $((SECONDS - t0)) -lt 30 ]
  [ ! -e "$T/k.sqm" ]
}

@test "mpi_train: standard input, one-pass and unsplittable models are refused" {
  run -64 mpi 2 seqrec-train "${TINY[@]}" --epochs 1 -o "$T/x.sqm" < "$T/s.sqr"
  [[ "$output" == *"every process reads the split itself: give it as a FILE"* ]]
  run -64 mpi 2 seqrec-train --model pop -o "$T/x.sqm" "$T/s.sqr"
  [[ "$output" == *"fits in one pass: run it in one process"* ]]
  run -64 mpi 2 seqrec-train --model gru4rec --epochs 1 -o "$T/x.sqm" "$T/s.sqr"
  [[ "$output" == *"cannot train across 2 processes"* ]]
  [ ! -e "$T/x.sqm" ]
}

@test "mpi_train: RANK/WORLD_SIZE without a launcher is refused on the CPU" {
  run -64 env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 seqrec-train "${TINY[@]}" --epochs 1 \
    -o "$T/x.sqm" "$T/s.sqr"
  [[ "$output" == *"RANK/WORLD_SIZE needs MPI: start them with mpirun or srun"* ]]
  [ ! -e "$T/x.sqm" ]
}
