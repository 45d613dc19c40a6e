#!/usr/bin/env bats
# seqrec-train --model core: learns what popularity cannot, scores through
# seqrec-score as validation does, is deterministic for a seed, round-trips
# through its model file, resumes, trains both encoders and refuses bad
# options, --loss bce and --target all. Tiny data and models only.
# Determinism, the model file round trip and resuming: models.bats.

load helper

setup() {
  common_setup
  # 300 users, 100 items: a strong successor signal (seqrec-synth(1))
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  # --target random: one prefix a user and epoch, the quick runs
  TINY=(--model core --dim 16 --ffn 32 --max-len 20 --batch 32 --threads 2 --target random)
}

ndcg() { sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' "$@"; }

@test "core: --help lists its options; the model file keeps its defaults and the alpha layer" {
  run seqrec-train --help
  [ "$status" -eq 0 ]
  for o in --encoder --temperature --item-dropout --sess-dropout; do
    [[ "$output" == *"$o"* ]] || { echo "missing $o"; false; }
  done
  [[ "$output" == *"(default last with --model core)"* ]]
  seqrec-train --model core --dim 16 --ffn 32 --max-len 10 --batch 64 --epochs 1 --threads 2 \
    --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  run seqrec-cat --header "$T/m.sqm"
  [ "$status" -eq 0 ]
  for kv in model=core heads=2 dropout=0.5 core.encoder=trm core.temperature=0.07 \
            core.item_dropout=0.2 core.sess_dropout=0.2 train.target=last; do
    [[ "$output" == *"$kv"* ]] || { echo "missing $kv"; false; }
  done
  [[ "$output" == *"core_w	f32	1x16"* ]] || { echo "$output" | grep tensor; false; }
  [[ "$output" == *"item_emb	f32	101x16"* ]]
}

@test "core: beats popularity on validation NDCG@10, and seqrec-score agrees with the log" {
  run --separate-stderr seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr"
  [ "$status" -eq 0 ]
  pop=$(ndcg <<< "$stderr")
  seqrec-train --model core --dim 32 --ffn 64 --max-len 20 --batch 32 --threads 2 \
    --dropout 0.1 --lr 3e-3 --epochs 3 --log "$T/log" -o "$T/m.sqm" "$T/s.sqr"
  core=$(tail -n 1 "$T/log" | ndcg)
  echo "pop $pop core $core"
  awk -v p="$pop" -v s="$core" 'BEGIN { exit !(s > 2 * p && s > 0.3) }'
  score_matches_log "$T/log" "$T/m.sqm"
}

@test "core: both encoders and the dropout settings train and score" {
  for v in "--encoder ave" "--item-dropout 0 --sess-dropout 0" "--temperature 1" \
           "--attn linrec"; do
    run --separate-stderr seqrec-train "${TINY[@]}" $v --epochs 1 -o "$T/m.sqm" "$T/s.sqr"
    [ "$status" -eq 0 ] || { echo "$v: $status $stderr"; false; }
    [[ "$stderr" =~ \"ndcg@10\":[0-9.]+ ]]
    seqrec-score -m "$T/m.sqm" -k 3 "$T/s.sqr" > /dev/null
  done
}

@test "core: options out of range or of other models are refused with the option named" {
  for bad in "--temperature 0" "--temperature 101" "--temperature x" "--item-dropout 1" \
             "--item-dropout -0.1" "--sess-dropout 1" "--sess-dropout -1" "--encoder gru" \
             "--heads 3"; do
    run seqrec-train "${TINY[@]}" $bad -o "$T/m.sqm" "$T/s.sqr"
    [ "$status" -eq 64 ] || { echo "$bad: $status"; false; }
    opt=${bad%% *}
    [[ "$output" == *"${opt}"* ]] || { echo "$bad: $output"; false; }
  done
  run seqrec-train "${TINY[@]}" --loss bce -o "$T/m.sqm" "$T/s.sqr"
  [ "$status" -eq 64 ]
  [[ "$output" == *"--model core cannot train --loss bce"* ]]
  run seqrec-train "${TINY[@]}" --target all -o "$T/m.sqm" "$T/s.sqr"
  [ "$status" -eq 64 ]
  [[ "$output" == *"--target last or random"* ]]
  run seqrec-train --model sasrec --sess-dropout 0.1 -o "$T/m.sqm" "$T/s.sqr"
  [ "$status" -eq 64 ]
  [[ "$output" == *"--sess-dropout is not an option of --model sasrec"* ]]
  no_leftovers "$T" s.sqr
}
