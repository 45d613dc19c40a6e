#!/usr/bin/env bats
# The nightly job (pipelines/nightly.sh, `make nightly`): yesterday's model
# on today's log, incremental runs, the lock, failures and signals leave the
# last publication in place. Tiny synthetic logs; wrappers around
# seqrec-score make a shard slow or failing; a stand-in launcher takes
# NIGHTLY_LAUNCH's place (the real mpirun: mpi_score.bats).

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
  # the model carries its id map where seqrec-train can carry one
  seqrec-preprocess --map "$T/day1.map" "$T/day1.tsv" 2>/dev/null | seqrec-split -o "$T/day1.split" 2>/dev/null
  MAPARG=()
  if seqrec-train --help | grep -q -- '--map '; then MAPARG=(--map "$T/day1.map"); fi
  seqrec-train --dim 8 --ffn 16 --max-len 12 --epochs 1 --threads 1 --log /dev/null \
    "${MAPARG[@]}" -o "$T/model.sqm" "$T/day1.split"
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

# start_scoring: day 1 published, then day 2 in the background ($job) with
# every shard asleep; returns once a shard runs
start_scoring() {
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 run -0 sh "$NS"
  wrap_score 'case "$*" in *--shard*) sleep 60;; esac'
  NIGHTLY_LOG="$T/day2.tsv" NIGHTLY_DATE=20260102 sh "$NS" 2>/dev/null &
  job=$!
  for i in $(seq 100); do
    pgrep -f "$T/bin/seqrec-score.*--shard" >/dev/null && break
    sleep 0.1
  done
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
  # the first run holds the lock once it scores (not a fixed sleep: the
  # suites share the cores, make check runs files at once)
  for i in $(seq 100); do pgrep -f "$T/bin/seqrec-score" >/dev/null && break; sleep 0.1; done
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
  start_scoring
  kill -TERM "$job"
  wait "$job" || status=$?
  [ "${status:-0}" -ne 0 ]
  sleep 0.5
  ! pgrep -f "$T/bin/seqrec-score" >/dev/null || false
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
  ! cmp -s "$T/model0.sqm" "$T/model.sqm" || false
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

# nightly_make ARGS...: `make nightly` of the checkout (the job of
# build/bin; NIGHTLY_BIN still names the programs), SIGINT, SIGHUP and
# SIGTERM not ignored even where the caller ignores them (nohup, a
# background job)
nightly_make() {
  env --default-signal=INT,HUP,TERM make -s --no-print-directory -C "$SEQREC_ROOT" nightly "$@"
}

# no seqrec-score (or the wrappers' sleep $NAP) left running
no_shard_left() {
  # the job cleans up after make or its caller returns (its traps kill the
  # shards and remove its run directory): a slow build (SANITIZE=1) needs
  # more than a moment, so wait for it, up to 10 s
  for i in $(seq 100); do
    pgrep -f "$T/bin/seqrec-score" >/dev/null || pgrep -f "sleep $NAP" >/dev/null ||
      ls -a "$T/job" | grep -qE '^\.run\.|\.tmp' || break
    sleep 0.1
  done
  ! pgrep -f "$T/bin/seqrec-score" >/dev/null || { echo "a shard is left"; false; }
  ! pgrep -f "sleep $NAP" >/dev/null || { echo "a wrapper's sleep is left"; false; }
}

# json_failed: the last line of the job's log is a valid "failed" line
last_failed() {
  tail -n 1 "$T/job/nightly.log" | python3 -c 'import json, sys; d = json.loads(sys.stdin.read()); assert d["status"] == "failed", d; print(d)'
}

@test "nightly: TERM, INT or HUP to make mid-scoring ends the job, keeps the publication, frees the lock" {
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 run -0 sh "$NS"
  NAP=31.$RANDOM$RANDOM
  for s in TERM INT HUP; do
    wrap_score "case \"\$*\" in *--shard*) sleep $NAP;; esac"
    # make itself is the background job: $! is make's pid
    NIGHTLY_LOG="$T/day2.tsv" NIGHTLY_DATE=20260102 env --default-signal=INT,HUP,TERM \
      make -s --no-print-directory -C "$SEQREC_ROOT" nightly 2>"$T/err.$s" &
    mk=$!
    for i in $(seq 100); do
      pgrep -f "sleep $NAP" >/dev/null && break
      sleep 0.1
    done
    pgrep -f "sleep $NAP" >/dev/null
    kill -"$s" "$mk"
    st=0; wait "$mk" || st=$?
    echo "$s: make $st"; cat "$T/err.$s"
    [ "$st" -ne 0 ]
    no_shard_left
    [ "$(readlink "$T/job/latest")" = pub/top5-20260101.tsv ]
    [ ! -e "$T/job/pub/top5-20260102.tsv" ]
    clean_job
    grep -q "nightly: exit $(( $(kill -l "$s") + 128 )): killed by SIG$s" "$T/err.$s"
    tail -n 1 "$T/job/nightly.log" | grep -q "\"status\":\"failed\".*\"signal\":\"$s\""
    last_failed
  done
  # the lock is free: the next run publishes
  rm "$T/bin/seqrec-score"; ln -s "$SEQREC_BIN/seqrec-score" "$T/bin/"
  NIGHTLY_LOG="$T/day2.tsv" NIGHTLY_DATE=20260102 run -0 nightly_make
  [ "$(readlink "$T/job/latest")" = pub/top5-20260102.tsv ]
}

@test "nightly: seqrec-nightly returns the job's status; make nightly's job line says it" {
  NIGHTLY_LOG="$T/none.tsv" run -66 seqrec-nightly
  [ "${lines[-1]}" = "nightly: exit 66: $T/none.tsv: cannot read the log" ]
  run -64 seqrec-nightly NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_TOPK=x
  [[ "${lines[-1]}" == "nightly: exit 64: "* ]]
  run -64 seqrec-nightly NIGHTLY_BOGUS=1
  NIGHTLY_LOG="$T/none.tsv" run -2 nightly_make
  [[ "$output" == *"nightly: exit 66: $T/none.tsv: cannot read the log"* ]]
  # busy: 75, named settings as arguments
  wrap_score 'sleep 3'
  seqrec-nightly NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 2>/dev/null &
  first=$!
  for i in $(seq 50); do pgrep -f "$T/bin/seqrec-score" >/dev/null && break; sleep 0.1; done
  run -75 seqrec-nightly NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260109
  [[ "${lines[-1]}" == "nightly: exit 75: another run holds the lock"* ]]
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260109 run -2 nightly_make
  [[ "$output" == *"nightly: exit 75: another run holds the lock"* ]]
  wait "$first"
  [ "$(readlink "$T/job/latest")" = pub/top5-20260101.tsv ]
  grep -q '"step":"lock".*"status":"busy"' "$T/job/nightly.log"
}

@test "nightly: a failing step's message and status reach stderr and a failed log line" {
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 run -0 sh "$NS"
  rm "$T/bin/seqrec-split"
  printf '#!/bin/sh\necho "seqrec-split: disk on fire" >&2\nexit 74\n' > "$T/bin/seqrec-split"
  chmod +x "$T/bin/seqrec-split"
  NIGHTLY_LOG="$T/day2.tsv" NIGHTLY_DATE=20260102 run -1 sh "$NS"
  [[ "$output" == *"seqrec-split: disk on fire"* ]]
  [[ "${lines[-1]}" == "nightly: exit 1: step split failed (exit 74): seqrec-split: disk on fire" ]]
  tail -n 1 "$T/job/nightly.log" | grep -q '"step":"split","seconds":[0-9.]*,"status":"failed","exit":74,"message":"seqrec-split: disk on fire"'
  last_failed
  [ "$(readlink "$T/job/latest")" = pub/top5-20260101.tsv ]
  clean_job
}

@test "nightly: a killed run's directory is removed by the next run" {
  mkdir -p "$T/job/.run.AbC123/x"
  : > "$T/job/.latest.tmp"
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 run -0 sh "$NS"
  clean_job
}

@test "nightly: after a SIGKILLed run the next one ends its steps, not other processes" {
  start_scoring
  kill -KILL "$job"
  wait "$job" || true
  # its shards run on, and a stranger's pid is in the list
  pgrep -f "$T/bin/seqrec-score" >/dev/null
  sleep 100 &
  stranger=$!
  echo "$stranger" >> "$(ls -d "$T"/job/.run.*)/.pids"
  rm -f "$T/bin/seqrec-score"
  ln -s "$SEQREC_BIN/seqrec-score" "$T/bin/"
  NIGHTLY_LOG="$T/day2.tsv" NIGHTLY_DATE=20260102 run -0 sh "$NS"
  sleep 0.5
  ! pgrep -f "$T/bin/seqrec-score" >/dev/null || false
  kill -0 "$stranger"
  kill "$stranger"
  clean_job
}

@test "nightly: NIGHTLY_KEEP keeps N days of publications (0: all)" {
  for d in 20260101 20260102 20260104; do
    NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=$d NIGHTLY_KEEP=0 run -0 sh "$NS"
  done
  [ "$(ls "$T/job/pub" | wc -l)" -eq 3 ]
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260105 NIGHTLY_KEEP=3 run -0 sh "$NS"
  [ "$(ls "$T/job/pub" | tr '\n' ' ')" = "top5-20260104.tsv top5-20260105.tsv " ]
  # the default is 30 days
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260203 run -0 sh "$NS"
  [ "$(ls "$T/job/pub" | tr '\n' ' ')" = "top5-20260105.tsv top5-20260203.tsv " ]
  # never the one `latest` names, even when older than the rest
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20250101 NIGHTLY_KEEP=1 run -0 sh "$NS"
  [ -f "$T/job/pub/top5-20250101.tsv" ]
  [ "$(readlink "$T/job/latest")" = pub/top5-20250101.tsv ]
}

@test "nightly: relative paths are the caller's, through make -C too" {
  cd "$T"
  mkdir rel
  NIGHTLY_LOG=day1.tsv NIGHTLY_MODEL=model.sqm NIGHTLY_DIR=rel/job NIGHTLY_DATE=20260101 run -0 nightly_make
  [ "$(readlink "$T/rel/job/latest")" = pub/top5-20260101.tsv ]
  run -0 seqrec-nightly NIGHTLY_LOG=day2.tsv NIGHTLY_MODEL=model.sqm NIGHTLY_DIR=rel/job NIGHTLY_DATE=20260102
  [ "$(readlink "$T/rel/job/latest")" = pub/top5-20260102.tsv ]
}

# same_as_full SETTINGS...: today's run (day2) with SETTINGS, from the
# state of day 1, rescores every user and publishes the bytes of
# NIGHTLY_FULL=1 from the same state
same_as_full() {
  rm -rf "$T/jobF"; cp -a "$T/job" "$T/jobF"
  env NIGHTLY_LOG="$T/day2.tsv" NIGHTLY_DATE=20260102 "$@" sh "$NS" 2>"$T/err" || { cat "$T/err"; false; }
  tail -n 4 "$T/job/nightly.log" | grep -q '"step":"users".*"scope":"all","reason":"key"'
  env NIGHTLY_LOG="$T/day2.tsv" NIGHTLY_DATE=20260102 "$@" NIGHTLY_FULL=1 NIGHTLY_DIR="$T/jobF" sh "$NS" 2>/dev/null
  cmp "$T/job/latest" "$T/jobF/latest"
}

@test "nightly: a new model, top-K or seqrec-score option rescores everyone, as NIGHTLY_FULL=1 does" {
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 run -0 sh "$NS"
  seqrec-train --dim 8 --ffn 16 --max-len 12 --epochs 1 --seed 2 --threads 1 --log /dev/null \
    "${MAPARG[@]}" -o "$T/model2.sqm" "$T/day1.split"
  cp "$T/model2.sqm" "$T/model.sqm"
  same_as_full
  NIGHTLY_LOG="$T/day2.tsv" NIGHTLY_DATE=20260102 run -0 sh "$NS"
  grep '"step":"users"' "$T/job/nightly.log" | tail -n 1 | grep -q '"scope":"changed","users":0'
  same_as_full NIGHTLY_TOPK=7
  same_as_full NIGHTLY_TOPK=7 NIGHTLY_SCORE=--include-history
  same_as_full NIGHTLY_TOPK=7 NIGHTLY_SCORE="--include-history -b 9"
  # and an unchanged key after a change of history: same bytes as well
  rm -rf "$T/jobF"; cp -a "$T/job" "$T/jobF"
  awk -F'\t' -v OFS='\t' '{ print } NR % 7 == 0 { $4 = $4 + 100000000; print }' "$T/day2.tsv" > "$T/day3.tsv"
  for j in job jobF; do
    NIGHTLY_LOG="$T/day3.tsv" NIGHTLY_DATE=20260103 NIGHTLY_TOPK=7 NIGHTLY_SCORE="--include-history -b 9" \
      NIGHTLY_FULL=$([ $j = jobF ] && echo 1 || echo 0) NIGHTLY_DIR="$T/$j" run -0 sh "$NS"
  done
  grep '"step":"users"' "$T/job/nightly.log" | tail -n 1 | grep -q '"scope":"changed"'
  cmp "$T/job/latest" "$T/jobF/latest"
}

@test "nightly: a shrunken log is refused (65); NIGHTLY_LOG_KIND=replace drops the absent users" {
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 run -0 sh "$NS"
  awk -F'\t' '$1 > 10' "$T/day1.tsv" > "$T/less.tsv"
  lost=$(awk -F'\t' '$1 <= 10' "$T/day1.tsv" | wc -l)
  NIGHTLY_LOG="$T/less.tsv" NIGHTLY_DATE=20260102 run -65 sh "$NS"
  [[ "$output" == *"today's log lacks 10 of yesterday's users and $lost interactions: a delta? set NIGHTLY_LOG_KIND=delta"* ]]
  [ "$(readlink "$T/job/latest")" = pub/top5-20260101.tsv ]
  last_failed
  # fewer interactions of the same users: refused as well
  awk -F'\t' '!($1 == 20 && NR % 2)' "$T/day1.tsv" > "$T/less2.tsv"
  NIGHTLY_LOG="$T/less2.tsv" NIGHTLY_DATE=20260102 run -65 sh "$NS"
  [[ "$output" == *"lacks 0 of yesterday's users and "*" interactions"* ]]
  # replace: taken; the absent users are dropped, the rest as a full run
  rm -rf "$T/jobF"; cp -a "$T/job" "$T/jobF"
  NIGHTLY_LOG="$T/less.tsv" NIGHTLY_DATE=20260102 NIGHTLY_LOG_KIND=replace run -0 sh "$NS"
  [ "$(wc -l < "$T/job/latest")" -eq "$(cut -f1 "$T/less.tsv" | sort -u | wc -l)" ]
  awk -F'\t' '$1 <= 10 { exit 1 }' "$T/job/latest"   # no user of 1-10 is left
  NIGHTLY_LOG="$T/less.tsv" NIGHTLY_DATE=20260102 NIGHTLY_LOG_KIND=replace NIGHTLY_FULL=1 NIGHTLY_DIR="$T/jobF" run -0 sh "$NS"
  cmp "$T/job/latest" "$T/jobF/latest"
}

@test "nightly: NIGHTLY_LOG_KIND=delta appends the delta to the history: a full log's result" {
  # the full log of day 2: day 1's lines, then the rest
  awk -F'\t' 'NR == FNR { d[$0] = 1; next } !($0 in d)' "$T/day1.tsv" "$T/all.tsv" > "$T/delta2.tsv"
  cat "$T/day1.tsv" "$T/delta2.tsv" > "$T/full2.tsv"
  export NIGHTLY_PREPROCESS="--format movielens"
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 NIGHTLY_DIR="$T/jobF" run -0 sh "$NS"
  NIGHTLY_LOG="$T/full2.tsv" NIGHTLY_DATE=20260102 NIGHTLY_DIR="$T/jobF" run -0 sh "$NS"
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 NIGHTLY_LOG_KIND=delta run -0 sh "$NS"
  # a delta taken for the full log is refused
  NIGHTLY_LOG="$T/delta2.tsv" NIGHTLY_DATE=20260102 run -65 sh "$NS"
  cmp "$T/day1.tsv" "$T/job/history"
  NIGHTLY_LOG="$T/delta2.tsv" NIGHTLY_DATE=20260102 NIGHTLY_LOG_KIND=delta run -0 sh "$NS"
  cmp "$T/full2.tsv" "$T/job/history"
  cmp "$T/job/latest" "$T/jobF/latest"
  # a failed run appends nothing
  wrap_score 'exit 74'
  NIGHTLY_LOG="$T/delta2.tsv" NIGHTLY_DATE=20260103 NIGHTLY_LOG_KIND=delta run -1 sh "$NS"
  cmp "$T/full2.tsv" "$T/job/history"
  # one line per user cannot be appended; the format must be named
  NIGHTLY_LOG="$T/delta2.tsv" NIGHTLY_LOG_KIND=delta NIGHTLY_PREPROCESS="--format s3rec" run -64 sh "$NS"
  [[ "$output" == *"s3rec logs hold one line per user"* ]]
  NIGHTLY_LOG="$T/delta2.tsv" NIGHTLY_LOG_KIND=delta NIGHTLY_PREPROCESS= run -64 sh "$NS"
}

@test "nightly: a recbole delta's header line is not appended" {
  export NIGHTLY_PREPROCESS="--format recbole"
  hdr=$'user_id:token\titem_id:token\trating:float\ttimestamp:float'
  { echo "$hdr"; cat "$T/day1.tsv"; } > "$T/d1.inter"
  { echo "$hdr"; awk -F'\t' 'NR == FNR { d[$0] = 1; next } !($0 in d)' "$T/day1.tsv" "$T/all.tsv"; } > "$T/d2.inter"
  NIGHTLY_LOG="$T/d1.inter" NIGHTLY_DATE=20260101 NIGHTLY_LOG_KIND=delta run -0 sh "$NS"
  NIGHTLY_LOG="$T/d2.inter" NIGHTLY_DATE=20260102 NIGHTLY_LOG_KIND=delta run -0 sh "$NS"
  [ "$(grep -c user_id "$T/job/history")" -eq 1 ]
  [ "$(wc -l < "$T/job/history")" -eq $(( $(wc -l < "$T/all.tsv") + 1 )) ]
}

@test "nightly: fine-tuning trains on today's new items, which reach the top-K" {
  seqrec-split --help | grep -q -- --holdout-users || skip "needs seqrec-split --holdout-users"
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 run -0 sh "$NS"
  # day 2: the two newest interactions of every other user are the new
  # items 61, 62 (the lists leave out the history's items: the other half
  # can be given them)
  awk -F'\t' -v OFS='\t' '{ print; if ($4 > t[$1]) t[$1] = $4 }
    END { for (u in t) if (u % 2) { print u, 61, 5, t[u] + 1; print u, 62, 5, t[u] + 2 } }' \
    "$T/day1.tsv" > "$T/new.tsv"
  NIGHTLY_LOG="$T/new.tsv" NIGHTLY_DATE=20260102 NIGHTLY_FINETUNE=1 \
    NIGHTLY_TRAIN="--epochs 8 --lr 0.01" run -0 sh "$NS"
  line=$(grep '"step":"merge"' "$T/job/nightly.log" | tail -n 1)
  echo "$line"
  [[ "$line" == *'"new_items":2,'* ]]
  slots=$(echo "$line" | sed -n 's/.*"new_item_slots":\([0-9]*\).*/\1/p')
  # more slots than the users without them: they are trained (leave-one-out
  # never trains on them, and gives them 31 slots here, under the 62 users)
  others=$(cut -f1 "$T/day1.tsv" | sort -u | awk '$1 % 2 == 0' | wc -l)
  echo "slots $slots, users without the new items $others"
  [ "$slots" -gt "$others" ]
}

@test "nightly: the first run of a fresh directory maps today's log through the model's map" {
  seqrec-preprocess --help | grep -q -- '--model' || skip "needs seqrec-preprocess --model"
  # item ids by first appearance: today's log alone would number them otherwise
  awk -F'\t' -v OFS='\t' '{ $2 = "i" (1000 - $2); print }' "$T/day1.tsv" > "$T/d1.tsv"
  awk -F'\t' -v OFS='\t' '{ $2 = "i" (1000 - $2); print }' "$T/day2.tsv" | sort -t$'\t' -k4,4nr > "$T/d2.tsv"
  seqrec-preprocess --map "$T/d1.map" "$T/d1.tsv" 2>/dev/null | seqrec-split -o "$T/d1.split" 2>/dev/null
  seqrec-train --dim 8 --ffn 16 --max-len 12 --epochs 1 --threads 1 --log /dev/null \
    --map "$T/d1.map" -o "$T/model.sqm" "$T/d1.split"
  NIGHTLY_LOG="$T/d2.tsv" NIGHTLY_DATE=20260101 run -0 sh "$NS"
  # the job's map extends the model's
  diff <(awk -F'\t' '$1 == "item"' "$T/d1.map") <(awk -F'\t' '$1 == "item"' "$T/job/ids.map")
  # the lists of seqrec-score on today's log through the model's map
  seqrec-preprocess --dataset d1 --map-in "$T/d1.map" --map "$T/ref.map" "$T/d2.tsv" 2>/dev/null |
    seqrec-split -o "$T/ref.split" 2>/dev/null
  seqrec-score -m "$T/model.sqm" --topk 5 --map "$T/ref.map" "$T/ref.split" | LC_ALL=C sort > "$T/ref.tsv"
  cmp "$T/ref.tsv" "$T/job/latest"
  # a model without a map and no map in the directory: refused
  rm -rf "$T/job2"
  seqrec-train --dim 8 --ffn 16 --max-len 12 --epochs 1 --threads 1 --log /dev/null \
    -o "$T/nomap.sqm" "$T/d1.split"
  NIGHTLY_LOG="$T/d2.tsv" NIGHTLY_MODEL="$T/nomap.sqm" NIGHTLY_DIR="$T/job2" run -1 sh "$NS"
  [[ "$output" == *"carries no id map"* ]]
}

@test "nightly: NIGHTLY_LAUNCH scores as one launcher job: the local shards' publication" {
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 run -0 sh "$NS"
  cp "$T/job/latest" "$T/local.tsv"
  # a launcher of one process: it runs the command once, without --shard
  printf '#!/bin/sh\necho "$*" >> "%s/launched"\nexec "$@"\n' "$T" > "$T/launch"
  chmod +x "$T/launch"
  NIGHTLY_LAUNCH="$T/launch" NIGHTLY_FULL=1 NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260102 \
    run -0 sh "$NS"
  cmp "$T/local.tsv" "$T/job/latest"
  [ "$(wc -l < "$T/launched")" -eq 1 ]
  grep -q -- "seqrec-score -m .* --topk 5 .* -o $T/job/.run.*/part.0 " "$T/launched"
  ! grep -q -- --shard "$T/launched" || false
  grep -q "\"step\":\"score\".*\"launch\":\"$T/launch\"" "$T/job/nightly.log"
  # a failing job fails the step and keeps the publication
  printf '#!/bin/sh\necho "no nodes" >&2\nexit 3\n' > "$T/launch"
  NIGHTLY_LAUNCH="$T/launch" NIGHTLY_LOG="$T/day2.tsv" NIGHTLY_DATE=20260103 run -1 sh "$NS"
  [[ "$output" == *"the scoring job ($T/launch) failed (exit 3); nothing published"* ]]
  [[ "$output" == *"no nodes"* ]]
  [ "$(readlink "$T/job/latest")" = pub/top5-20260102.tsv ]
  clean_job
}

# items FILE: every item of a publication, one a line
pub_items() { cut -f2 "$1" | tr ',' '\n' | sed 's/:[^:]*$//'; }

@test "nightly: NIGHTLY_EXCLUDE takes retired items out of every list, the next best moving up" {
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 NIGHTLY_TOPK=8 run -0 sh "$NS"
  cp "$T/job/latest" "$T/plain.tsv"
  # the three most recommended items retire
  pub_items "$T/plain.tsv" | sort | uniq -c | sort -k1,1nr -k2 | head -3 | awk '{print $2}' > "$T/retired.txt"
  [ "$(wc -l < "$T/retired.txt")" = 3 ]
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260102 NIGHTLY_TOPK=8 NIGHTLY_EXCLUDE="$T/retired.txt" run -0 sh "$NS"
  # the filter changed the key: everyone rescored
  grep -q '"step":"users".*"scope":"all","reason":"key"' "$T/job/nightly.log"
  run -1 grep -x -F -f "$T/retired.txt" <(pub_items "$T/job/latest")
  # each list is yesterday's without the retired items, then the next best
  # (the model's scores are the same): yesterday's filtered list is a prefix
  awk -F'\t' 'NR == FNR { r[$1] = 1; next }
    FILENAME == ARGV[2] { n = split($2, a, ","); s = ""; for (j = 1; j <= n; j++) { it = a[j]; sub(/:[^:]*$/, "", it); if (!(it in r)) s = s a[j] "," } want[$1] = s; next }
    { if (index($2 ",", want[$1]) != 1) { print "user " $1 ": " $2 " does not start with " want[$1]; bad = 1 } c = split($2, b, ","); if (c != 8) { print "user " $1 ": " c " items"; bad = 1 } }
    END { exit bad }' "$T/retired.txt" "$T/plain.tsv" "$T/job/latest"
  [ "$(wc -l < "$T/job/latest")" = "$(wc -l < "$T/plain.tsv")" ]
  # a list that did not hold a retired item is as it was
  grep -v -F -f <(sed 's/$/:/' "$T/retired.txt") "$T/plain.tsv" > "$T/untouched.tsv" || true
  [ -s "$T/untouched.tsv" ] || skip "every list held a retired item"
  LC_ALL=C comm -23 <(sort "$T/untouched.tsv") <(sort "$T/job/latest") > "$T/changed.tsv"
  [ ! -s "$T/changed.tsv" ]
}

@test "nightly: NIGHTLY_ALLOW recommends only its items; NIGHTLY_EXCLUDE wins over it" {
  seq 10 40 > "$T/allow.txt"
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 NIGHTLY_ALLOW="$T/allow.txt" run -0 sh "$NS"
  [ -s "$T/job/latest" ]
  run -1 grep -v -x -F -f "$T/allow.txt" <(pub_items "$T/job/latest")
  [ "$(pub_items "$T/job/latest" | wc -l)" -eq $((5 * $(wc -l < "$T/job/latest"))) ]
  printf '20\n21\n22\n' > "$T/ex.txt"
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260102 NIGHTLY_ALLOW="$T/allow.txt" NIGHTLY_EXCLUDE="$T/ex.txt" run -0 sh "$NS"
  run -1 grep -v -x -F -f "$T/allow.txt" <(pub_items "$T/job/latest")
  run -1 grep -x -F -f "$T/ex.txt" <(pub_items "$T/job/latest")
  # the same lists as seqrec-score with the same filters over the job's map and stream
  seqrec-score -m "$T/model.sqm" -k 5 --map "$T/job/ids.map" --exclude-items "$T/ex.txt" \
    --allow-items "$T/allow.txt" "$T/job/last.split" | LC_ALL=C sort -t$'\t' -k1,1 > "$T/direct.tsv"
  cmp "$T/direct.tsv" "$T/job/latest"
}

@test "nightly: an item id the map does not know is a warning, counted in the log; the run publishes" {
  printf '12\nno-such-item\n' > "$T/ex.txt"
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_DATE=20260101 NIGHTLY_EXCLUDE="$T/ex.txt" run -0 sh "$NS"
  [[ "$output" == *"warning: $T/ex.txt: line 2: item 'no-such-item' is not in the map: ignored"* ]]
  [[ "$output" == *"warning: 1 unknown item id in all (--exclude-items, --allow-items): ignored"* ]]
  grep -q '"step":"score".*"unknown_items":"*1' "$T/job/nightly.log"
  run -1 grep -x 12 <(pub_items "$T/job/latest")
}

@test "nightly: NIGHTLY_EXCLUDE and NIGHTLY_ALLOW refusals" {
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_EXCLUDE="$T/none.txt" run -66 sh "$NS"
  [[ "$output" == *"$T/none.txt: cannot read NIGHTLY_EXCLUDE"* ]]
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_ALLOW="$T" run -66 sh "$NS"
  printf '1\n' > "$T/ex.txt"
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_SCORE="--exclude-items $T/ex.txt" run -64 sh "$NS"
  [[ "$output" == *"give the item lists as NIGHTLY_EXCLUDE and NIGHTLY_ALLOW"* ]]
  # lists that leave no item: the scoring fails, nothing is published
  printf 'no-such-item\n' > "$T/al.txt"
  NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_ALLOW="$T/al.txt" run -1 sh "$NS"
  [[ "$output" == *"leave no item"* ]]
  [ ! -e "$T/job/latest" ]
  # as NAME=VALUE arguments too
  run -66 sh "$NS" NIGHTLY_LOG="$T/day1.tsv" NIGHTLY_ALLOW="$T/none.txt"
}
