#!/usr/bin/env bats
# -o never damages what it points at (issue 11): FIFOs and devices are
# written through, symlinks keep being links, a directory is refused before
# any work, signals leave no temporary files, a failed training run leaves
# no model.

load helper

setup() {
  common_setup
  seqrec-synth --users 200 --items 80 --seed 1 --format stream > "$T/seq.sqr"
  seqrec-split < "$T/seq.sqr" 2>/dev/null > "$T/want.sqr"
}

@test "outputs: -o FIFO writes through the pipe, which stays a FIFO" {
  mkfifo "$T/fifo"
  timeout 20 cat "$T/fifo" > "$T/got" &
  reader=$!
  run timeout 20 seqrec-split -o "$T/fifo" "$T/seq.sqr"
  [ "$status" -eq 0 ]
  wait "$reader"
  [ -p "$T/fifo" ]
  cmp "$T/got" "$T/want.sqr"
  no_leftovers "$T" seq.sqr want.sqr fifo got
}

@test "outputs: -o SYMLINK writes the link's target atomically, the link stays" {
  mkdir "$T/d"
  echo old > "$T/d/real.sqr"
  ln -s d/real.sqr "$T/link"
  ln -s link "$T/link2"           # a chain
  ln -s d/new.sqr "$T/dangling"   # a link to a file not there yet
  seqrec-split -o "$T/link2" "$T/seq.sqr" 2>/dev/null
  [ -L "$T/link" ] && [ -L "$T/link2" ]
  [ "$(readlink "$T/link")" = d/real.sqr ]
  cmp "$T/d/real.sqr" "$T/want.sqr"
  seqrec-split -o "$T/dangling" "$T/seq.sqr" 2>/dev/null
  [ -L "$T/dangling" ]
  cmp "$T/d/new.sqr" "$T/want.sqr"
  # a failed run leaves the target as it was
  head -c 300 "$T/seq.sqr" > "$T/cut.sqr"
  run seqrec-split -o "$T/link" "$T/cut.sqr"
  [ "$status" -eq 65 ]
  cmp "$T/d/real.sqr" "$T/want.sqr"
  no_leftovers "$T" seq.sqr want.sqr cut.sqr d link link2 dangling
  no_leftovers "$T/d" real.sqr new.sqr
}

@test "outputs: -o on a character device writes through it (/dev/null stays a device)" {
  # first a device of our own where we may make one (root), so that a
  # broken build replaces it and not the system's /dev/null
  if mknod "$T/null" c 1 3 2>/dev/null; then
    run seqrec-split -o "$T/null" "$T/seq.sqr"
    [ "$status" -eq 0 ]
    [ -c "$T/null" ]
    rm -f "$T/null"
  fi
  run seqrec-split -o /dev/null "$T/seq.sqr"
  [ "$status" -eq 0 ]
  [ -c /dev/null ]
  run seqrec-synth --users 50 --format stream -o /dev/null
  [ "$status" -eq 0 ]
  [ -c /dev/null ]
  # a full device: 74, naming it
  if [ -c /dev/full ]; then
    run seqrec-split -o /dev/full "$T/seq.sqr"
    [ "$status" -eq 74 ]
    [[ "$output" == *"/dev/full: write error"* ]]
    [ -c /dev/full ]
  fi
}

@test "outputs: split -o DIR fails with 73 at once, before reading its input" {
  mkdir "$T/dir"
  # an input that never ends: reading it all would hang until the timeout
  mkfifo "$T/in"
  exec {fd}<>"$T/in"
  cat "$T/seq.sqr" >&"$fd"
  run timeout 10 seqrec-split -o "$T/dir" "$T/in"
  exec {fd}>&-
  [ "$status" -eq 73 ]
  [[ "$output" == *"$T/dir: cannot create: is a directory"* ]]
  no_leftovers "$T/dir"
  no_leftovers "$T" seq.sqr want.sqr dir in
  run seqrec-synth --users 50 -o "$T/dir"
  [ "$status" -eq 73 ]
  run seqrec-train --dim 8 --ffn 8 --max-len 10 --epochs 1 -o "$T/dir" "$T/want.sqr"
  [ "$status" -eq 73 ]
  no_leftovers "$T/dir"
}

# kill_mid_write SIGNAL: a seqrec-synth writing a big file, stopped by
# SIGNAL while its temp file grows: no temp file left, status 128+SIGNAL.
kill_mid_write() {
  local sig=$1
  mkdir "$T/$sig"
  env --default-signal="$sig" seqrec-synth --users 20000000 --format stream \
    -o "$T/$sig/big.sqr" &
  local pid=$! tmp="$T/$sig/big.sqr.tmp.$!"
  for _ in $(seq 400); do
    [ -s "$tmp" ] && break
    sleep 0.05
  done
  [ -s "$tmp" ]
  kill -s "$sig" "$pid"
  local status=0
  wait "$pid" || status=$?
  echo "$sig: status $status"
  [ "$status" -eq $((128 + $(kill -l "$sig"))) ]
  no_leftovers "$T/$sig"
}

@test "outputs: SIGTERM, SIGHUP and SIGINT mid-write leave no temporary file" {
  kill_mid_write TERM
  kill_mid_write HUP
  kill_mid_write INT
}

@test "outputs: SIGTERM mid-training keeps the checkpoint, no temp file, no model; --resume ends it" {
  seqrec-synth --users 1500 --items 300 --seed 3 --format stream | seqrec-split 2>/dev/null > "$T/big.sqr"
  mkdir "$T/o"
  opts=(--dim 32 --ffn 64 --max-len 30 --batch 64 --threads 2 --patience 0 --epochs 40)
  seqrec-train "${opts[@]}" --log "$T/log" -o "$T/o/m.sqm" "$T/big.sqr" &
  pid=$!
  for _ in $(seq 600); do
    [ -e "$T/o/m.sqm.ckpt" ] && break
    sleep 0.05
  done
  sleep 0.3
  kill -TERM $pid
  status=0
  wait $pid || status=$?
  [ "$status" -eq 143 ]
  [ "$(wc -l < "$T/log")" -lt 40 ]
  # the checkpoint stays for --resume; no half-written files, and no model
  # file from a run that did not finish
  no_leftovers "$T/o" m.sqm.ckpt
  done_epochs=$(wc -l < "$T/log")
  seqrec-train --resume "$T/o/m.sqm.ckpt" --epochs "$done_epochs" --threads 2 --log /dev/null "$T/big.sqr"
  [ -s "$T/o/m.sqm" ]
  no_leftovers "$T/o" m.sqm m.sqm.ckpt
}

@test "outputs: a failed training run leaves no model file (the log cannot be written)" {
  mkdir "$T/o"
  # epoch 1 validates and would write its best model at once; the log
  # write then fails (74): no model may be left for seqrec-score to load
  run seqrec-train --dim 8 --ffn 8 --max-len 10 --epochs 3 --log /dev/full \
    -o "$T/o/m.sqm" "$T/want.sqr"
  [ "$status" -eq 74 ]
  [ ! -e "$T/o/m.sqm" ]
  no_leftovers "$T/o"
}

@test "outputs: train --log - writes the epoch lines to stdout; a full stdout is 74 and no model" {
  mkdir "$T/o"
  run --separate-stderr seqrec-train --dim 8 --ffn 8 --max-len 10 --epochs 2 --threads 1 --log - \
    -o "$T/o/m.sqm" "$T/want.sqr"
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 2 ]
  [[ "${lines[1]}" == '{"epoch":2,"loss":'* ]]
  [ ! -e ./- ] && [ ! -e "$T/-" ]
  [ -s "$T/o/m.sqm" ]
  rm -f "$T/o/"*
  if [ -c /dev/full ]; then
    run bash -c 'seqrec-train --dim 8 --ffn 8 --max-len 10 --epochs 2 --threads 1 --log - \
      -o "$1" "$2" > /dev/full' _ "$T/o/m.sqm" "$T/want.sqr"
    [ "$status" -eq 74 ]
    [[ "$output" == *"seqrec-train: <stdout>: cannot write the log"* ]]
    [ ! -e "$T/o/m.sqm" ]
    no_leftovers "$T/o"
  fi
}

@test "outputs: a one-pass model (pop) whose log cannot be written or created leaves no model" {
  mkdir "$T/o"
  if [ -c /dev/full ]; then
    run seqrec-train --model pop --log /dev/full -o "$T/o/p.sqm" "$T/want.sqr"
    [ "$status" -eq 74 ]
    [[ "$output" == *"/dev/full: cannot write the log"* ]]
    no_leftovers "$T/o"
  fi
  run -73 seqrec-train --model pop --log "$T/no/such/log" -o "$T/o/p.sqm" "$T/want.sqr"
  no_leftovers "$T/o"
  seqrec-train --model pop --log "$T/o/log" -o "$T/o/p.sqm" "$T/want.sqr"
  grep -q '^{"model":"pop","valid":{"hr@10":' "$T/o/log"
  [ -s "$T/o/p.sqm" ]
}
