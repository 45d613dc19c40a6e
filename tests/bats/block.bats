#!/usr/bin/env bats
# seqrec-train --block recbole: RecBole's transformer block on the SASRec
# backbone learns what popularity cannot, keeps the option in its model file
# (and a file without the key reads as sasrec), scores through seqrec-score
# as validation does, is deterministic, resumes, runs with linrec attention and under
# core and cl4srec, and is refused by bert4rec and for a bad value. Tiny data
# and models only.

load helper

setup() {
  common_setup
  # 300 users, 100 items: a strong successor signal (seqrec-synth(1))
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--block recbole --dim 16 --ffn 32 --max-len 20 --batch 32 --threads 2)
}

ndcg() { sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' "$@"; }

@test "block: --help lists --block; the model file keeps block=recbole and RecBole's tensors" {
  run seqrec-train --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"--block NAME"* ]]
  seqrec-train "${TINY[@]}" --epochs 1 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  run seqrec-cat --header "$T/m.sqm"
  [ "$status" -eq 0 ]
  for kv in model=sasrec block=recbole ln_eps=9.9999999999999998e-13; do
    [[ "$output" == *"$kv"* ]] || { echo "missing $kv"; false; }
  done
  # the embedding LayerNorm, no final LayerNorm
  [[ "$output" == *"embln_w	f32	16"* ]] || { echo "$output" | grep tensor; false; }
  [[ "$output" != *"lnf_w"* ]]
  # the default block is written too
  seqrec-train --dim 16 --ffn 32 --max-len 20 --batch 32 --threads 2 --epochs 1 \
    --log /dev/null -o "$T/d.sqm" "$T/s.sqr"
  run seqrec-cat --header "$T/d.sqm"
  [[ "$output" == *"block=sasrec"* ]]
  [[ "$output" == *"lnf_w"* ]]
}

@test "block: recbole beats popularity on validation NDCG@10, and seqrec-score agrees with the log" {
  run --separate-stderr seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr"
  [ "$status" -eq 0 ]
  pop=$(ndcg <<< "$stderr")
  seqrec-train "${TINY[@]}" --epochs 5 --log "$T/log" -o "$T/m.sqm" "$T/s.sqr"
  rb=$(tail -n 1 "$T/log" | ndcg)
  echo "pop $pop recbole $rb"
  awk -v p="$pop" -v s="$rb" 'BEGIN { exit !(s > 2 * p && s > 0.3) }'
  score_matches_log "$T/log" "$T/m.sqm"
}

@test "block: same seed and threads give the same model and log; another seed another" {
  same_seed_same_model "${TINY[@]}"
}

@test "block: a model file round-trips: scores from the file equal a second load's, --init reads it" {
  roundtrip_and_init "${TINY[@]}"
}

@test "block: a run resumed from its checkpoint ends with the uninterrupted run's model" {
  resume_same_model "${TINY[@]}"
}

@test "block: a model file without the block key reads as the sasrec block" {
  # the golden files of the engine were written before the option
  seqrec-cat --header "$GOLD/engine/sasrec-softmax.sqm" > "$T/h"
  ! grep -q block "$T/h" || false
  seqrec-train --init "$GOLD/engine/sasrec-softmax.sqm" --epochs 1 --threads 2 --log /dev/null \
    -o "$T/m.sqm" "$T/s.sqr"
  seqrec-cat --header "$T/m.sqm" | grep -q 'block=sasrec'
}

@test "block: recbole with linrec attention, under core and cl4srec (and blin)" {
  seqrec-train "${TINY[@]}" --attn linrec --heads 2 --epochs 1 --log "$T/l" -o "$T/l.sqm" "$T/s.sqr"
  seqrec-cat --header "$T/l.sqm" | grep -q 'attn=linrec'
  for m in core cl4srec blin; do
    seqrec-train --model "$m" "${TINY[@]}" --epochs 1 --log "$T/$m.log" \
      -o "$T/$m.sqm" "$T/s.sqr"
    seqrec-cat --header "$T/$m.sqm" | grep -q 'block=recbole'
    seqrec-score -m "$T/$m.sqm" -k 5 "$T/s.sqr" > "$T/$m.top"
    [ -s "$T/$m.top" ]
  done
}

@test "block: bert4rec refuses --block, and a bad value is refused (exit 64, naming --block)" {
  run -64 seqrec-train --model bert4rec --block recbole --epochs 1 -o "$T/b.sqm" "$T/s.sqr"
  [[ "$output" == *"--block"* ]]
  run -64 seqrec-train --model bert4rec --block sasrec --epochs 1 -o "$T/b.sqm" "$T/s.sqr"
  [[ "$output" == *"--block"* ]]
  run -64 seqrec-train --block postln --epochs 1 -o "$T/b.sqm" "$T/s.sqr"
  [[ "$output" == *"--block"* ]]
  [ ! -e "$T/b.sqm" ]
}
