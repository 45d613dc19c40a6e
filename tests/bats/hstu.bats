#!/usr/bin/env bats
# seqrec-train --model hstu: learns what popularity cannot with CE and BCE
# and every --target, scores through seqrec-score as validation does, is
# deterministic for a seed, round-trips through its model file and
# checkpoint, and refuses bad options. Tiny data and models only.
# Determinism, the model file round trip and resuming: models.bats.

load helper

setup() {
  common_setup
  # 300 users, 100 items: a strong successor signal (seqrec-synth(1))
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--model hstu --dim 16 --heads 2 --max-len 20 --batch 32 --threads 2)
}

ndcg() { sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' "$@"; }

# key KEY FILE: the value of a model file's config key.
key() { seqrec-cat --header "$2" | sed -n "s/^config\t$1=//p"; }

@test "hstu: --help names it; the model file holds its defaults" {
  run -0 seqrec-train --help
  [[ "$output" == *"hstu       HSTU"* ]]
  seqrec-train --model hstu --batch 64 --epochs 1 --threads 2 --log /dev/null \
    -o "$T/m.sqm" "$T/s.sqr"
  [ "$(key model "$T/m.sqm")" = hstu ]
  [ "$(key layers "$T/m.sqm")" = 2 ]
  [ "$(key heads "$T/m.sqm")" = 1 ]
  [ "$(key dim "$T/m.sqm")" = 50 ]
  [ "$(key max_len "$T/m.sqm")" = 200 ]
  [ "$(key dropout "$T/m.sqm")" = 0.20000000000000001 ]
  [ "$(key train.loss "$T/m.sqm")" = ce ]
}

@test "hstu: beats popularity on validation NDCG@10, and seqrec-score agrees with the log" {
  run --separate-stderr seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr"
  [ "$status" -eq 0 ]
  pop=$(ndcg <<< "$stderr")
  seqrec-train "${TINY[@]}" --dim 32 --lr 3e-3 --epochs 3 --log "$T/log" -o "$T/m.sqm" \
    "$T/s.sqr"
  h=$(ndcg "$T/log" | sort -g | tail -n 1)
  echo "pop $pop hstu $h"
  awk -v p="$pop" -v s="$h" 'BEGIN { exit !(s > 2 * p && s > 0.3) }'
  score_matches_log "$T/log" "$T/m.sqm"
  # BCE with sampled negatives, and the last item of each prefix, learn too
  for v in "--loss bce --neg 2" "--target last --epochs 1" "--target random --epochs 6"; do
    seqrec-train "${TINY[@]}" --dim 32 --lr 3e-3 --epochs 3 $v --log "$T/log2" \
      -o "$T/m2.sqm" "$T/s.sqr"
    h2=$(ndcg "$T/log2" | sort -g | tail -n 1)
    echo "$v: $h2"
    awk -v p="$pop" -v s="$h2" 'BEGIN { exit !(s > 2 * p) }'
  done
}

@test "hstu: bad options are refused with the option named" {
  for bad in "--layers 0" "--heads 0" "--heads 3" "--dim 0" "--max-len 0" "--dropout 1" \
             "--ffn 32" "--pool 4x4" "--attn linrec"; do
    run --separate-stderr seqrec-train "${TINY[@]}" $bad -o "$T/m.sqm" "$T/s.sqr"
    echo "$bad: $status $stderr"
    [ "$status" -eq 64 ]
    opt=${bad%% *}
    [[ "$stderr" == *"${opt#--}"* ]]
    [ ! -e "$T/m.sqm" ]
  done
}
