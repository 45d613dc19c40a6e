#!/usr/bin/env bats
# seqrec-train --model gru4rec: learns what popularity cannot, scores through
# seqrec-score as validation does, trains every --target and both losses, is
# deterministic for a seed, round-trips through its model file and
# checkpoint, and refuses bad options. Tiny data and models only.
# Determinism, the model file round trip and resuming: models.bats.

load helper

setup() {
  common_setup
  # 300 users, 100 items: a strong successor signal (seqrec-synth(1))
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--model gru4rec --dim 16 --hidden 24 --max-len 20 --batch 32 --threads 2)
}

ndcg() { sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' "$@"; }

@test "gru4rec: --help lists its options; the model file holds its defaults" {
  run seqrec-train --help
  [ "$status" -eq 0 ]
  # --dim, --layers, --dropout and --max-len are listed under sasrec's
  for o in "Options of --model gru4rec" "--hidden N          gru4rec: GRU hidden units"; do
    [[ "$output" == *"$o"* ]] || { echo "missing $o"; false; }
  done
  seqrec-train --model gru4rec --batch 64 --epochs 1 --threads 2 --log /dev/null \
    -o "$T/m.sqm" "$T/s.sqr"
  run seqrec-cat --header "$T/m.sqm"
  [ "$status" -eq 0 ]
  for kv in model=gru4rec dim=64 hidden=128 layers=1 dropout=0.29999 max_len=50; do
    [[ "$output" == *"$kv"* ]] || { echo "missing $kv"; false; }
  done
}

@test "gru4rec: beats popularity on validation NDCG@10, and seqrec-score agrees with the log" {
  run --separate-stderr seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr"
  [ "$status" -eq 0 ]
  pop=$(ndcg <<< "$stderr")
  seqrec-train "${TINY[@]}" --lr 1e-2 --epochs 6 --log "$T/log" -o "$T/m.sqm" "$T/s.sqr"
  best=$(ndcg "$T/log" | sort -g | tail -n 1)
  echo "pop $pop gru4rec $best"
  awk -v p="$pop" -v s="$best" 'BEGIN { exit !(s > 2 * p && s > 0.3) }'
  score_matches_log "$T/log" "$T/m.sqm"
}

@test "gru4rec: every --target, --loss bce and two layers train and beat popularity" {
  pop=$(seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr" 2>&1 | ndcg)
  for v in "--target last" "--target random --epochs 8" "--loss bce --neg 2" \
           "--layers 2 --dropout 0.1"; do
    seqrec-train "${TINY[@]}" --lr 1e-2 --epochs 4 $v --log "$T/log" -o "$T/m.sqm" "$T/s.sqr"
    best=$(ndcg "$T/log" | sort -g | tail -n 1)
    echo "$v: $best (pop $pop)"
    awk -v p="$pop" -v s="$best" 'BEGIN { exit !(s > 1.5 * p) }'
  done
}

@test "gru4rec: bad options are refused with the option named" {
  for bad in "--dim 0" "--dim 8193" "--hidden 0" "--hidden 8193" "--layers 0" "--layers 17" \
             "--dropout 1" "--dropout -0.1" "--max-len 0" "--heads 2" "--pool 4x4"; do
    run --separate-stderr seqrec-train "${TINY[@]}" $bad -o "$T/m.sqm" "$T/s.sqr"
    echo "$bad: $status $stderr"
    [ "$status" -eq 64 ]
    opt=${bad%% *}
    [[ "$stderr" == *"${opt#--}"* ]]
    [ ! -e "$T/m.sqm" ]
  done
}
