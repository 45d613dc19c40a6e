#!/usr/bin/env bats
# seqrec-plot: training curves of seqrec-train logs, and its refusals.

load helper

setup() {
  common_setup
  command -v gnuplot > /dev/null || skip "no gnuplot"
  seqrec-synth --users 200 --items 60 --seed 3 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--dim 16 --ffn 16 --max-len 20 --batch 32 --threads 2 --epochs 3)
}

png() { [ "$(head -c 8 "$1" | od -An -c | tr -d ' ')" = '211PNG\r\n032\n' ]; }

@test "plot: a PNG from two logs, one of them validated every second epoch" {
  seqrec-train "${TINY[@]}" --log "$T/a.jsonl" -o "$T/a.sqm" "$T/s.sqr"
  seqrec-train "${TINY[@]}" --dim 8 --eval-every 2 --log "$T/b.jsonl" -o "$T/b.sqm" "$T/s.sqr"
  mkdir "$T/o"
  run -0 seqrec-plot -o "$T/o/c.png" "$T/a.jsonl" "$T/b.jsonl"
  [ -z "$output" ]
  png "$T/o/c.png"
  [ "$(file_size "$T/o/c.png")" -gt 10000 ]
  no_leftovers "$T/o" c.png
  # names, another metric, the stop metric a log carries, the default output
  seqrec-train "${TINY[@]}" --stop-metric mrr@20 --log "$T/c.log" -o "$T/c.sqm" "$T/s.sqr"
  (cd "$T/o" && seqrec-plot -n one,two -m mrr@20 -t 'two runs' "$T/a.jsonl" "$T/c.log")
  png "$T/o/curves.png"
  seqrec-plot --metric=hr@10 --output="$T/o/hr.png" "$T/a.jsonl"
  png "$T/o/hr.png"
}

@test "plot: the help and the man page list the same options" {
  run -0 seqrec-plot --help
  [[ "$output" == "Usage: seqrec-plot"* ]]
  diff <(printf '%s\n' "$output" | help_options) <(man_options "$SEQREC_ROOT/man/man1/seqrec-plot.1")
}

@test "plot: refusals leave no picture" {
  seqrec-train "${TINY[@]}" --log "$T/a.jsonl" -o "$T/a.sqm" "$T/s.sqr"
  mkdir "$T/o"
  run -64 seqrec-plot -o "$T/o/x.png"
  [[ "$output" == *"no LOG"* ]]
  run -64 seqrec-plot -m bleu -o "$T/o/x.png" "$T/a.jsonl"
  [[ "$output" == *"--metric 'bleu'"* ]]
  run -64 seqrec-plot -n a,b -o "$T/o/x.png" "$T/a.jsonl"
  [[ "$output" == *"2 names for 1 LOGs"* ]]
  run -64 seqrec-plot --frob "$T/a.jsonl"
  run -64 seqrec-plot -o - "$T/a.jsonl"
  run -66 seqrec-plot -o "$T/o/x.png" "$T/none.jsonl"
  [[ "$output" == *"none.jsonl: cannot open"* ]]
  { head -n 2 "$T/a.jsonl"; echo 'epoch 3 loss 4.1'; } > "$T/bad.jsonl"
  run -65 seqrec-plot -o "$T/o/x.png" "$T/a.jsonl" "$T/bad.jsonl"
  [[ "$output" == *"bad.jsonl:3: not a JSON line"* ]]
  echo '{"model":"pop","valid":{"hr@10":0.1,"ndcg@10":0.05}}' > "$T/pop.jsonl"
  run -65 seqrec-plot -o "$T/o/x.png" "$T/pop.jsonl"
  [[ "$output" == *"pop.jsonl: no epoch lines"* ]]
  echo '{"epoch":1,"valid":{"hr@10":0.1}}' > "$T/noloss.jsonl"
  run -65 seqrec-plot -o "$T/o/x.png" "$T/noloss.jsonl"
  [[ "$output" == *"noloss.jsonl:1: an epoch line without loss or seconds"* ]]
  no_leftovers "$T/o"
  # a directory as the picture
  run -73 seqrec-plot -o "$T/o" "$T/a.jsonl"
  no_leftovers "$T/o"
}
