#!/usr/bin/env bats
# seqrec-score under a launcher (issue 36): `mpirun -np P seqrec-score`
# scores shard RANK/P on each rank and rank 0 writes the bytes of one
# process without --shard, for ranks streams, every top-K format, the
# --expert-stats counts and the unknown users' note; refusals; a rank that
# fails or is killed ends the job without output; the nightly job's
# NIGHTLY_LAUNCH publishes what its local shards publish. Skipped where
# mpirun or a build with MPI is missing.

load helper

setup() {
  common_setup
  need_mpi
  seqrec-synth --users 300 --items 80 --seed 1 > "$T/log.tsv"
  seqrec-preprocess --map "$T/map.tsv" -o "$T/seq.sqr" "$T/log.tsv" 2>/dev/null
  seqrec-split -o "$T/s.sqr" "$T/seq.sqr" 2>/dev/null
  seqrec-train --dim 8 --ffn 16 --max-len 12 --batch 64 --seed 3 --epochs 1 --threads 2 \
    --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  mkdir "$T/out"
}

# mpi N ARGS...: ARGS in N processes (more than the cores: CI has 2)
mpi() {
  local n=$1; shift
  mpirun --oversubscribe -np "$n" "$@" < /dev/null
}

# same N ARGS...: `seqrec-score -m m.sqm ARGS -o FILE s.sqr` under mpirun -np
# N writes the bytes of one process (and nothing else in out/)
same() {
  local n=$1; shift
  rm -f "$T"/out/*
  seqrec-score -m "$T/m.sqm" "$@" -o "$T/one" "$T/s.sqr"
  mpi "$n" seqrec-score -m "$T/m.sqm" -j 1 "$@" -o "$T/out/many" "$T/s.sqr"
  cmp "$T/one" "$T/out/many"
  no_leftovers "$T/out" many
}

@test "mpi_score: ranks streams under 2 and 3 processes are the bytes of one process" {
  same 2
  same 3
  same 2 -t valid
  same 2 -c uni:20 -x -s 7
  same 3 -c pop:10 --ties optimistic
  # no score.shard in the header: the single process's
  ! seqrec-cat --header "$T/out/many" | grep -q shard
  [ "$(seqrec-cat "$T/out/many" | wc -l)" -eq 300 ]
}

@test "mpi_score: top-K lists in every format are the bytes of one process" {
  same 2 -k 5
  same 3 -k 5 -f long --map "$T/map.tsv"
  same 2 -k 7 -f jsonl --map "$T/map.tsv" --include-history
  same 3 -k 5 -f stream
  same 2 -k 200 # more than the items: short lists
  [ "$(wc -l < "$T/out/many")" -eq 300 ]
}

@test "mpi_score: --exclude-items and --allow-items are the bytes of one process" {
  cut -f3 "$T/map.tsv" | sed -n '40,60p' > "$T/ex.txt"
  cut -f3 "$T/map.tsv" | sed -n '30,200p' > "$T/al.txt"
  same 2 --map "$T/map.tsv" --exclude-items "$T/ex.txt"
  same 3 -c uni:20 --map "$T/map.tsv" --exclude-items "$T/ex.txt" --allow-items "$T/al.txt"
  same 2 -k 5 --map "$T/map.tsv" --exclude-items "$T/ex.txt" --allow-items "$T/al.txt"
  # the note on the filtered targets counts every rank's
  seqrec-score -m "$T/m.sqm" --map "$T/map.tsv" --exclude-items "$T/ex.txt" -o "$T/one" "$T/s.sqr" 2> "$T/one.err"
  mpi 2 seqrec-score -m "$T/m.sqm" -j 1 --map "$T/map.tsv" --exclude-items "$T/ex.txt" -o "$T/out/many" "$T/s.sqr" 2> "$T/many.err"
  grep 'note:.*not ranked' "$T/one.err" > "$T/one.note"
  grep 'note:.*not ranked' "$T/many.err" | cmp - "$T/one.note"
}

@test "mpi_score: --users, a padded stream and standard output" {
  cut -f1 "$T/log.tsv" | sort -u | awk 'NR % 7 == 0' > "$T/names.txt"
  same 2 -k 5 --map "$T/map.tsv" --users "$T/names.txt"
  [ "$(wc -l < "$T/out/many")" -eq "$(wc -l < "$T/names.txt")" ]
  seq 1 3 300 > "$T/dense.txt"
  same 2 --users "$T/dense.txt"
  seqrec-pad -n 6 -o "$T/pad.sqr" "$T/s.sqr"
  seqrec-score -m "$T/m.sqm" "$T/pad.sqr" > "$T/pad1"
  mpi 2 seqrec-score -m "$T/m.sqm" -j 1 -o "$T/pad2" "$T/pad.sqr"
  cmp "$T/pad1" "$T/pad2"
  # rank 0's standard output is the launcher's, byte for byte
  seqrec-score -m "$T/m.sqm" -k 3 "$T/s.sqr" > "$T/k1"
  mpi 2 seqrec-score -m "$T/m.sqm" -k 3 "$T/s.sqr" > "$T/k2"
  cmp "$T/k1" "$T/k2"
}

@test "mpi_score: --expert-stats counts are summed over the ranks" {
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/e.sqr"
  seqrec-train --model elastic --dim 16 --ffn 32 --max-len 20 --pool 4x4 --topk-experts 2 \
    --batch 32 --threads 2 --epochs 1 --log /dev/null -o "$T/e.sqm" "$T/e.sqr"
  seqrec-score -m "$T/e.sqm" --expert-stats "$T/ex1.tsv" -o "$T/r1" "$T/e.sqr"
  run -0 mpi 3 seqrec-score -m "$T/e.sqm" -j 1 --expert-stats "$T/out/ex.tsv" -o "$T/out/r" \
    "$T/e.sqr"
  cmp "$T/r1" "$T/out/r"
  cmp "$T/ex1.tsv" "$T/out/ex.tsv"
  no_leftovers "$T/out" r ex.tsv
}

@test "mpi_score: the note on users the model cannot score counts every rank's" {
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/c.sqr"
  seqrec-train --model caser --dim 16 --nh 4 --nv 2 --batch 64 --threads 2 --epochs 1 \
    --log /dev/null -o "$T/c.sqm" "$T/c.sqr"
  seqrec-synth --users 400 --items 100 --seed 2 --format stream | seqrec-split 2>/dev/null \
    > "$T/c400.sqr"
  seqrec-score -m "$T/c.sqm" -t valid -o "$T/r1" "$T/c400.sqr" 2> /dev/null
  run -0 --separate-stderr mpi 2 seqrec-score -m "$T/c.sqm" -j 1 -t valid -o "$T/r2" \
    "$T/c400.sqr"
  cmp "$T/r1" "$T/r2"
  # once, from rank 0, with the job's count
  [ "$(grep -c "100 users of.*not in the training stream.*not scored" <<< "$stderr")" -eq 1 ]
}

@test "mpi_score: modes that cannot run across processes are refused (64), once" {
  run -64 mpi 2 seqrec-score -m "$T/m.sqm" --shard 0/2 -o "$T/out/x" "$T/s.sqr"
  [[ "$output" == *"--shard 0/2 and mpirun's 2 processes do not go together"* ]]
  [ "$(grep -c 'do not go together' <<< "$output")" -eq 1 ]
  run -64 mpi 2 seqrec-score -m "$T/m.sqm" --attention-map 3 -o "$T/out/x" "$T/s.sqr"
  [[ "$output" == *"--attention-map draws one user's maps: run it in one process"* ]]
  run -64 bash -c "mpirun --oversubscribe -np 2 seqrec-score -m '$T/m.sqm' -o '$T/out/x' < '$T/s.sqr'"
  [[ "$output" == *"every process reads the input itself: give it as a FILE"* ]]
  run -64 mpi 2 seqrec-score -m "$T/m.sqm" -k 5 --users - -o "$T/out/x" "$T/s.sqr"
  [[ "$output" == *"give them as files, not standard input"* ]]
  run -64 env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 seqrec-score -m "$T/m.sqm" -o "$T/out/x" "$T/s.sqr"
  [[ "$output" == *"RANK/WORLD_SIZE needs MPI: start them with mpirun or srun"* ]]
  no_leftovers "$T/out"
}

@test "mpi_score: ranks with another model, input or options are refused, naming them" {
  seqrec-train --dim 8 --ffn 16 --max-len 12 --batch 64 --seed 4 --epochs 1 --threads 2 \
    --log /dev/null -o "$T/m4.sqm" "$T/s.sqr"
  run -64 mpirun --oversubscribe -np 1 seqrec-score -m "$T/m.sqm" -o "$T/out/x" "$T/s.sqr" : \
    -np 1 seqrec-score -m "$T/m4.sqm" -o "$T/out/x" "$T/s.sqr"
  [[ "$output" == *"rank 1 has other model file bytes than rank 0"* ]]
  run -64 mpirun --oversubscribe -np 2 seqrec-score -m "$T/m.sqm" -o "$T/out/x" "$T/s.sqr" : \
    -np 1 seqrec-score -m "$T/m.sqm" -c uni:5 -o "$T/out/x" "$T/s.sqr"
  [[ "$output" == *"rank 2 has other scoring options than rank 0"* ]]
  # the same sequences cut another way: the model's dataset, other records
  seqrec-split --holdout-users 0.5 -o "$T/s2.sqr" "$T/seq.sqr" 2>/dev/null
  run -64 mpirun --oversubscribe -np 1 seqrec-score -m "$T/m.sqm" -o "$T/out/x" "$T/s.sqr" : \
    -np 1 seqrec-score -m "$T/m.sqm" -o "$T/out/x" "$T/s2.sqr"
  [[ "$output" == *"rank 1 has other input records than rank 0"* ]]
  no_leftovers "$T/out"
}

@test "mpi_score: a rank that fails ends the job with its status and no output" {
  run -66 mpirun --oversubscribe -np 1 seqrec-score -m "$T/m.sqm" -k 5 -o "$T/out/x" "$T/s.sqr" : \
    -np 1 seqrec-score -m "$T/m.sqm" -k 5 -o "$T/out/x" "$T/nosuch.sqr"
  [[ "$output" == *"seqrec-score (rank 1): $T/nosuch.sqr"* ]]
  [[ "$output" == *"seqrec-score: rank 1 of 2 failed (exit 66): nothing written"* ]]
  no_leftovers "$T/out"
}

@test "mpi_score: a killed rank ends the job, non-zero, without an output file" {
  # long enough to be killed mid-way: 40000 users of 5000 items, dim 256
  seqrec-synth --users 300 --items 5000 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/kt.sqr"
  seqrec-synth --users 40000 --items 5000 --seed 2 --format stream | seqrec-split 2>/dev/null > "$T/k.sqr"
  seqrec-train --dim 256 --ffn 16 --max-len 12 --epochs 1 --threads 2 --log /dev/null \
    -o "$T/km.sqm" "$T/kt.sqr"
  mpi 2 seqrec-score -m "$T/km.sqm" -j 1 -o "$T/out/k.r" "$T/k.sqr" > "$T/k.out" 2>&1 &
  local job=$! pid="" try p
  for try in $(seq 100); do
    for p in $(pgrep -f -- "seqrec-score -m $T/km.sqm") ; do
      tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && pid=$p
    done
    [ -n "$pid" ] && break
    sleep 0.1
  done
  [ -n "$pid" ]
  sleep 1
  kill -9 "$pid"
  local t0=$SECONDS rc=0
  wait "$job" || rc=$?
  cat "$T/k.out"
  [ "$rc" -ne 0 ]
  [ $((SECONDS - t0)) -lt 30 ]
  ! pgrep -f -- "seqrec-score -m $T/km.sqm" || false
  no_leftovers "$T/out"
}

# The nightly job's settings of nightly.bats: day 1, then day 2
nightly_setup() {
  seqrec-synth --users 150 --items 60 --seed 5 > "$T/all.tsv"
  cut=$(sort -t$'\t' -k4,4n "$T/all.tsv" | awk 'NR == int(0.8 * n) { print $4 }' n="$(wc -l < "$T/all.tsv")")
  awk -F'\t' -v c="$cut" '$4 <= c && $2 <= 55' "$T/all.tsv" > "$T/day1.tsv"
  seqrec-preprocess --map "$T/day1.map" "$T/day1.tsv" 2>/dev/null | seqrec-split -o "$T/day1.split" 2>/dev/null
  seqrec-train --dim 8 --ffn 16 --max-len 12 --epochs 1 --threads 1 --log /dev/null \
    --map "$T/day1.map" -o "$T/model.sqm" "$T/day1.split"
  export NIGHTLY_MODEL="$T/model.sqm" NIGHTLY_BIN="$SEQREC_BIN"
  export NIGHTLY_THREADS=2 NIGHTLY_SHARDS=2 NIGHTLY_TOPK=5
}

@test "mpi_score: nightly with NIGHTLY_LAUNCH publishes what the local shards publish" {
  nightly_setup
  local NS="$SEQREC_ROOT/pipelines/nightly.sh" d
  mkdir "$T/local" "$T/launch"
  for d in local launch; do
    local launch=""
    [ "$d" = launch ] && launch="mpirun --oversubscribe -np 2"
    NIGHTLY_LAUNCH="$launch" NIGHTLY_DIR="$T/$d" NIGHTLY_LOG="$T/day1.tsv" \
      NIGHTLY_DATE=20260101 run sh "$NS"
    echo "$output"
    [ "$status" -eq 0 ]
    NIGHTLY_LAUNCH="$launch" NIGHTLY_DIR="$T/$d" NIGHTLY_LOG="$T/all.tsv" \
      NIGHTLY_DATE=20260102 run -0 sh "$NS"
  done
  cmp "$T/local/pub/top5-20260101.tsv" "$T/launch/pub/top5-20260101.tsv"
  cmp "$T/local/pub/top5-20260102.tsv" "$T/launch/pub/top5-20260102.tsv"
  grep -q '"step":"score".*"launch":"mpirun --oversubscribe -np 2"' "$T/launch/nightly.log"
  grep -q '"scope":"changed"' "$T/launch/nightly.log"
  # make nightly NIGHTLY_LAUNCH=...: a third day, as the local job
  for d in local launch; do
    local launch=""
    [ "$d" = launch ] && launch="mpirun --oversubscribe -np 2"
    run -0 mk nightly NIGHTLY_LAUNCH="$launch" NIGHTLY_DIR="$T/$d" NIGHTLY_LOG="$T/all.tsv" \
      NIGHTLY_FULL=1 NIGHTLY_DATE=20260103
  done
  cmp "$T/local/pub/top5-20260103.tsv" "$T/launch/pub/top5-20260103.tsv"
}
