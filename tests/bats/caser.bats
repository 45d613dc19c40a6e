#!/usr/bin/env bats
# seqrec-train --model caser: learns what popularity cannot (CE and BCE),
# scores through seqrec-score as validation does, is deterministic for a
# seed, round-trips through its model file and checkpoint, trains every
# --target and the ablations without a kind of filter, skips the users it
# has no row for, and refuses bad options. Tiny data and models only.
# Determinism, the model file round trip and resuming: models.bats.

load helper

setup() {
  common_setup
  # 300 users, 100 items: a strong successor signal (seqrec-synth(1))
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--model caser --dim 16 --nh 4 --nv 2 --batch 64 --threads 2)
}

ndcg() { sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' "$@"; }

@test "caser: --help lists its options; the model file holds its defaults" {
  run seqrec-train --help
  [ "$status" -eq 0 ]
  for o in --nh --nv "default last with --model caser"; do
    [[ "$output" == *"$o"* ]] || { echo "missing $o"; false; }
  done
  seqrec-train --model caser --epochs 1 --threads 2 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  run seqrec-cat --header "$T/m.sqm"
  [ "$status" -eq 0 ]
  for kv in model=caser dim=64 max_len=5 nh=16 nv=4 dropout=0.5 n_users=301 \
            train.target=last train.loss=ce; do
    [[ "$output" == *"$kv"* ]] || { echo "missing $kv"; false; }
  done
}

@test "caser: beats popularity on validation NDCG@10 (CE and BCE), seqrec-score agrees with the log" {
  run --separate-stderr seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr"
  [ "$status" -eq 0 ]
  pop=$(ndcg <<< "$stderr")
  seqrec-train "${TINY[@]}" --dim 32 --dropout 0.2 --lr 1e-2 --epochs 5 --log "$T/log" \
    -o "$T/m.sqm" "$T/s.sqr"
  ca=$(ndcg "$T/log" | sort -g | tail -n 1)
  echo "pop $pop caser $ca"
  awk -v p="$pop" -v s="$ca" 'BEGIN { exit !(s > 3 * p && s > 0.4) }'
  score_matches_log "$T/log" "$T/m.sqm"
  # the paper's loss: BCE with 3 negatives
  seqrec-train "${TINY[@]}" --dim 32 --dropout 0.2 --lr 1e-2 --loss bce --neg 3 --epochs 5 \
    --log "$T/logb" -o "$T/b.sqm" "$T/s.sqr"
  bce=$(ndcg "$T/logb" | sort -g | tail -n 1)
  echo "bce $bce"
  awk -v p="$pop" -v s="$bce" 'BEGIN { exit !(s > 2 * p) }'
}

@test "caser: every --target, and the ablations without a kind of filter, train and score" {
  for v in "--target all" "--target random" "--nh 0" "--nv 0" "--max-len 1" "--max-len 9"; do
    run --separate-stderr seqrec-train "${TINY[@]}" $v --epochs 1 -o "$T/m.sqm" "$T/s.sqr"
    [ "$status" -eq 0 ] || { echo "$v: $stderr"; false; }
    seqrec-score -m "$T/m.sqm" "$T/s.sqr" | seqrec-metrics > /dev/null
  done
  seqrec-cat --header "$T/m.sqm" | grep -q "$(printf '^config\tmax_len=9$')"
}

@test "caser: seqrec-score skips, and counts, the users it has no row for" {
  seqrec-train "${TINY[@]}" --epochs 1 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  # 400 users: ids 301..400 are beyond the training stream's
  seqrec-synth --users 400 --items 100 --seed 2 --format stream | seqrec-split 2>/dev/null \
    > "$T/s400.sqr"
  run --separate-stderr seqrec-score -m "$T/m.sqm" --target valid -o "$T/r" "$T/s400.sqr"
  [ "$status" -eq 0 ]
  echo "$stderr"
  [[ "$stderr" == *"100 users of"*"not in the training stream"*"not scored"* ]]
  [ "$(seqrec-metrics "$T/r" | awk '$1 == "records" { print $2 }')" -eq 300 ]
  # the training stream's own users: no note
  run --separate-stderr seqrec-score -m "$T/m.sqm" --target valid -o "$T/r0" "$T/s.sqr"
  [ "$status" -eq 0 ]
  [[ "$stderr" != *"not in the training stream"* ]]
}

@test "caser: bad options are refused with the option named" {
  for bad in "--nh -1" "--nv -1" "--nh 0 --nv 0" "--dim 0" "--max-len 0" "--max-len 257" \
             "--dropout 1" "--nh 4097" "--heads 2" "--attn softmax" "--pool 4x4"; do
    run --separate-stderr seqrec-train "${TINY[@]}" $bad -o "$T/m.sqm" "$T/s.sqr"
    echo "$bad: $status $stderr"
    [ "$status" -eq 64 ]
    opt=${bad%% *}
    [[ "$stderr" == *"${opt#--}"* ]]
    [ ! -e "$T/m.sqm" ]
  done
  # no --init: caser has no init_from
  seqrec-train "${TINY[@]}" --epochs 1 --log /dev/null -o "$T/m0.sqm" "$T/s.sqr"
  run -64 seqrec-train --init "$T/m0.sqm" -o "$T/m.sqm" "$T/s.sqr"
}
