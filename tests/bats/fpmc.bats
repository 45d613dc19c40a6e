#!/usr/bin/env bats
# seqrec-train --model fpmc: learns what popularity cannot, scores through
# seqrec-score as validation does (users of its training stream only), trains
# with CE and BCE, is deterministic for a seed, round-trips through its model
# file and checkpoint, and refuses bad options. Tiny data and models only.
# Determinism, the model file round trip and resuming: models.bats.

load helper

setup() {
  common_setup
  # 300 users, 100 items: a strong successor signal (seqrec-synth(1))
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--model fpmc --dim 16 --batch 64 --threads 2)
}

ndcg() { sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' "$@"; }

@test "fpmc: --help lists its options; the model file holds its defaults" {
  run seqrec-train --help
  [ "$status" -eq 0 ]
  # its options are named by other models' (listed under theirs)
  for o in "fpmc       FPMC: user-item" "default last with --model fpmc"; do
    [[ "$output" == *"$o"* ]] || { echo "missing $o"; false; }
  done
  seqrec-train --model fpmc --batch 256 --epochs 1 --threads 2 --log /dev/null \
    -o "$T/m.sqm" "$T/s.sqr"
  run seqrec-cat --header "$T/m.sqm"
  [ "$status" -eq 0 ]
  for kv in model=fpmc dim=64 max_len=1 n_users=301 train.target=last train.loss=ce; do
    [[ "$output" == *"$kv"* ]] || { echo "missing $kv"; false; }
  done
}

@test "fpmc: beats popularity on validation NDCG@10 (CE and BCE), seqrec-score agrees with the log" {
  run --separate-stderr seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr"
  [ "$status" -eq 0 ]
  pop=$(ndcg <<< "$stderr")
  seqrec-train "${TINY[@]}" --lr 1e-2 --epochs 3 --log "$T/log" -o "$T/m.sqm" "$T/s.sqr"
  best=$(ndcg "$T/log" | sort -g | tail -n 1)
  echo "pop $pop fpmc $best"
  awk -v p="$pop" -v s="$best" 'BEGIN { exit !(s > 2 * p && s > 0.3) }'
  score_matches_log "$T/log" "$T/m.sqm"
  seqrec-train "${TINY[@]}" --lr 1e-2 --epochs 3 --loss bce --log "$T/logb" -o "$T/b.sqm" \
    "$T/s.sqr"
  bce=$(ndcg "$T/logb" | sort -g | tail -n 1)
  echo "bce $bce"
  awk -v p="$pop" -v s="$bce" 'BEGIN { exit !(s > 2 * p) }'
}

@test "fpmc: seqrec-score skips the users it has no row for, and says how many" {
  seqrec-train "${TINY[@]}" --epochs 1 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr" 2> /dev/null
  # the same dataset with 100 users more: ids 301..400 had no training row
  seqrec-synth --users 400 --items 100 --seed 3 --format stream | seqrec-split 2>/dev/null > "$T/s4.sqr"
  run --separate-stderr seqrec-score -m "$T/m.sqm" --target valid -o "$T/r" "$T/s4.sqr"
  [ "$status" -eq 0 ]
  echo "$stderr"
  [[ "$stderr" == *"100 users of"*"not in the training stream of the fpmc model"*"not scored"* ]]
  [ "$(seqrec-metrics "$T/r" | awk '$1 == "records" { print $2 }')" -eq 300 ]
  seqrec-score -m "$T/pop.sqm" --target valid "$T/s4.sqr" > "$T/p"
  [ "$(seqrec-metrics "$T/p" | awk '$1 == "records" { print $2 }')" -eq 400 ]
  # the training stream's own users are all scored, without a note
  run --separate-stderr seqrec-score -m "$T/m.sqm" --target valid -o "$T/r3" "$T/s.sqr"
  [ "$status" -eq 0 ]
  [[ "$stderr" != *"not scored"* ]]
}

@test "fpmc: bad options are refused with the option named" {
  for bad in "--dim 0" "--dim 8193" "--max-len 0" "--max-len 65537" "--hidden 4" \
             "--dropout 0.1" "--heads 2"; do
    run --separate-stderr seqrec-train "${TINY[@]}" $bad -o "$T/m.sqm" "$T/s.sqr"
    echo "$bad: $status $stderr"
    [ "$status" -eq 64 ]
    opt=${bad%% *}
    [[ "$stderr" == *"${opt#--}"* ]]
    [ ! -e "$T/m.sqm" ]
  done
}
