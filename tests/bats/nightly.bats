#!/usr/bin/env bats
# The nightly job (pipelines/nightly.sh, `make nightly`): yesterday's model
# on today's log, incremental runs, the lock, failures and signals leave the
# last publication in place. Tiny synthetic logs; wrappers around
# seqrec-score make a shard slow or failing.

load helper

setup() {
  common_setup
  NS="$SEQREC_ROOT/pipelines/nightly.sh"
  # day 1: the interactions before a cut, items 56-60 unseen; day 2: all
  # (new users, new items, longer histories)
  seqrec-synth --users 150 --items 60 --seed 5 > "$T/all.tsv"
  cut=$(sort -t$'\t' -k4,4n "$T/all.tsv" | awk 'NR == int(0.8 * n) { print $4 }' n="$(wc -l < "$T/all.tsv")")
  awk -F'\t' -v c="$cut" '$4 <= c && $2 <= 55' "$T/all.tsv" > "$T/day1.tsv"
  cp "$T/all.tsv" "$T/day2.tsv"
  seqrec-preprocess "$T/day1.tsv" 2>/dev/null | seqrec-split -o "$T/day1.split" 2>/dev/null
  seqrec-train --dim 8 --ffn 16 --max-len 12 --epochs 1 --threads 1 --log /dev/null \
    -o "$T/model.sqm" "$T/day1.split"
  mkdir -p "$T/job" "$T/bin"
  for p in "$SEQREC_BIN"/seqrec*; do ln -s "$p" "$T/bin/"; done
  export NIGHTLY_MODEL="$T/model.sqm" NIGHTLY_DIR="$T/job" NIGHTLY_BIN="$T/bin"
  export NIGHTLY_THREADS=2 NIGHTLY_SHARDS=2 NIGHTLY_TOPK=5
}

# wrap_score BODY: seqrec-score in $T/bin runs BODY (sh) first, then the real one
wrap_score() {
  rm -f "$T/bin/seqrec-score"
  printf '#!/bin/sh\n%s\nexec "%s/seqrec-score" "$@"\n' "$1" "$SEQREC_BIN" > "$T/bin/seqrec-score"
  chmod +x "$T/bin/seqrec-score"
}

# no run directory or temporary file left in the job directory
clean_job() {
  ! ls -a "$T/job" | grep -E '^\.run\.|\.tmp' || { echo "left behind"; false; }
}

@test "nightly: a full run, then an incremental one that scores only changed users" {
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 run -0 sh "$NS"
  [ -L "$T/job/latest" ]
  [ "$(readlink "$T/job/latest")" = pub/top5-20260101.tsv ]
  n1=$(wc -l < "$T/job/latest")
  [ "$n1" -eq "$(cut -f1 "$T/day1.tsv" | sort -u | wc -l)" ]
  grep -q '"step":"users","seconds":[0-9.]*,"scope":"all"' "$T/job/nightly.log"
  cp "$T/job/latest" "$T/pub1.tsv"
  NIGHTLY_LOG="$T/day2.tsv" NIGHTLY_DATE=20260102 run -0 sh "$NS"
  [ "$(readlink "$T/job/latest")" = pub/top5-20260102.tsv ]
  [ -f "$T/job/pub/top5-20260101.tsv" ]
  n2=$(wc -l < "$T/job/latest")
  [ "$n2" -eq "$(cut -f1 "$T/day2.tsv" | sort -u | wc -l)" ]
  scored=$(sed -n 's/.*"step":"users".*"scope":"changed","users":\([0-9]*\).*/\1/p' "$T/job/nightly.log")
  [ -n "$scored" ] && [ "$scored" -gt 0 ] && [ "$scored" -lt "$n2" ]
  # users that did not change keep yesterday's line
  kept=$(LC_ALL=C comm -12 <(sort "$T/pub1.tsv") <(sort "$T/job/latest") | wc -l)
  [ "$kept" -ge $((n2 - scored)) ]
  # one JSON line per step
  python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' "$T/job/nightly.log"
  clean_job
}

@test "nightly: a second run while one holds the lock exits 75 and publishes nothing" {
  wrap_score 'sleep 3'
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 sh "$NS" 2>/dev/null &
  first=$!
  sleep 1
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260109 run -75 sh "$NS"
  [[ "$output" == *"another run holds"* ]]
  wait "$first"
  [ "$(readlink "$T/job/latest")" = pub/top5-20260101.tsv ]
  [ ! -e "$T/job/pub/top5-20260109.tsv" ]
  clean_job
}

@test "nightly: a failing shard fails the run and keeps the last publication" {
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 run -0 sh "$NS"
  cp "$T/job/ids.map" "$T/map1"
  wrap_score 'case "$*" in *"--shard 1/2"*) echo "shard 1 broke" >&2; exit 74;; esac'
  NIGHTLY_LOG="$T/day2.tsv" NIGHTLY_DATE=20260102 run sh "$NS"
  [ "$status" -ne 0 ]
  [[ "$output" == *"1 of 2 shards failed"* ]]
  [ "$(readlink "$T/job/latest")" = pub/top5-20260101.tsv ]
  [ ! -e "$T/job/pub/top5-20260102.tsv" ]
  cmp "$T/map1" "$T/job/ids.map"
  clean_job
}

@test "nightly: SIGTERM mid-run leaves no temporary files and publishes nothing" {
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 run -0 sh "$NS"
  wrap_score 'sleep 30'
  NIGHTLY_LOG="$T/day2.tsv" NIGHTLY_DATE=20260102 sh "$NS" 2>/dev/null &
  job=$!
  for i in $(seq 50); do
    pgrep -f "$T/bin/seqrec-score" >/dev/null && break
    sleep 0.1
  done
  kill -TERM "$job"
  wait "$job" || status=$?
  [ "${status:-0}" -ne 0 ]
  sleep 0.5
  ! pgrep -f "$T/bin/seqrec-score" >/dev/null
  [ "$(readlink "$T/job/latest")" = pub/top5-20260101.tsv ]
  [ ! -e "$T/job/pub/top5-20260102.tsv" ]
  clean_job
}

@test "nightly: NIGHTLY_FINETUNE=1 gives new items ids and fine-tunes the model" {
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 run -0 sh "$NS"
  n1=$(awk -F'\t' '$1 == "item"' "$T/job/ids.map" | wc -l)
  cp "$T/model.sqm" "$T/model0.sqm"
  NIGHTLY_LOG="$T/day2.tsv" NIGHTLY_DATE=20260102 NIGHTLY_FINETUNE=1 run -0 sh "$NS"
  n2=$(awk -F'\t' '$1 == "item"' "$T/job/ids.map" | wc -l)
  [ "$n2" -gt "$n1" ]
  ! cmp -s "$T/model0.sqm" "$T/model.sqm"
  seqrec-cat --header "$T/model.sqm" | grep -qx "config	n_items=$n2"
  grep -q '"step":"finetune"' "$T/job/nightly.log"
  [ "$(wc -l < "$T/job/latest")" -eq "$(cut -f1 "$T/day2.tsv" | sort -u | wc -l)" ]
  clean_job
}

@test "nightly: missing settings and inputs are refused" {
  NIGHTLY_LOG= run sh "$NS"
  [ "$status" -ne 0 ]
  NIGHTLY_LOG="$T/none.tsv" run -66 sh "$NS"
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_MODEL="$T/none.sqm" run -66 sh "$NS"
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_SHARDS=x run sh "$NS"
  [ "$status" -ne 0 ]
  [ ! -e "$T/job/latest" ]
}
