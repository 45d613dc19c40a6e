#!/usr/bin/env bats
# seqrec-train --model elastic: learns what popularity cannot, scores through
# seqrec-score as validation does, is deterministic for a seed, round-trips
# through its model file and checkpoint, trains the Table 3 ablations,
# counts its experts for seqrec-score --expert-stats and refuses bad
# options (among them every-position training, which would leak). Tiny data
# and models only.
# Determinism, the model file round trip and resuming: models.bats.

load helper

setup() {
  common_setup
  # 300 users, 100 items: a strong successor signal (seqrec-synth(1))
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--model elastic --dim 16 --ffn 32 --max-len 20 --pool 4x4 --topk-experts 2 --batch 32
        --threads 2)
}

ndcg() { sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' "$@"; }

@test "elastic: --help lists its options; the model file holds its defaults" {
  run seqrec-train --help
  [ "$status" -eq 0 ]
  for o in --pool --topk-experts --stride --query --expert-weights --no-imr --no-dispatcher \
           "default random with --model elastic"; do
    [[ "$output" == *"$o"* ]] || { echo "missing $o"; false; }
  done
  seqrec-train --model elastic --dim 16 --ffn 32 --batch 64 --epochs 1 --threads 2 \
    --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  run seqrec-cat --header "$T/m.sqm"
  [ "$status" -eq 0 ]
  for kv in model=elastic pool=16x16 topk_experts=8 stride=4 query=net expert_weights=softmax \
            no_imr=0 no_dispatcher=0 max_len=256 heads=2 train.target=random; do
    [[ "$output" == *"$kv"* ]] || { echo "missing $kv"; false; }
  done
}

@test "elastic: beats popularity on validation NDCG@10, and seqrec-score agrees with the log" {
  run --separate-stderr seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr"
  [ "$status" -eq 0 ]
  pop=$(ndcg <<< "$stderr")
  seqrec-train "${TINY[@]}" --dim 32 --ffn 64 --dropout 0.1 --lr 3e-3 --target last \
    --epochs 2 --log "$T/log" -o "$T/m.sqm" "$T/s.sqr"
  el=$(tail -n 1 "$T/log" | ndcg)
  echo "pop $pop elastic $el"
  awk -v p="$pop" -v s="$el" 'BEGIN { exit !(s > 2 * p && s > 0.3) }'
  score_matches_log "$T/log" "$T/m.sqm"
  # its default, one random prefix a user an epoch, learns too
  seqrec-train "${TINY[@]}" --dim 32 --ffn 64 --dropout 0.1 --lr 3e-3 --epochs 12 \
    --log "$T/log2" -o "$T/m2.sqm" "$T/s.sqr"
  el2=$(ndcg "$T/log2" | sort -g | tail -n 1)
  echo "random prefixes: $el2"
  awk -v p="$pop" -v s="$el2" 'BEGIN { exit !(s > 2 * p) }'
}

@test "elastic: the Table 3 ablations and Algorithm 1's plain gather train and score" {
  for v in "--query mean" "--no-imr" "--no-dispatcher" "--expert-weights none" "--stride 3"; do
    run --separate-stderr seqrec-train "${TINY[@]}" $v --epochs 1 -o "$T/m.sqm" "$T/s.sqr"
    [ "$status" -eq 0 ] || { echo "$v: $stderr"; false; }
    seqrec-score -m "$T/m.sqm" "$T/s.sqr" | seqrec-metrics > /dev/null
  done
  seqrec-cat --header "$T/m.sqm" | grep -q "$(printf '^config\tstride=3$')"
}

@test "elastic: --expert-stats counts every ranked target's experts" {
  seqrec-train "${TINY[@]}" --epochs 1 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  seqrec-score -m "$T/m.sqm" --expert-stats "$T/ex.tsv" "$T/s.sqr" > "$T/ranks"
  [ "$(head -n 1 "$T/ex.tsv")" = "$(printf 'expert\tcount')" ]
  [ "$(wc -l < "$T/ex.tsv")" -eq 17 ] # a header and the 4x4 experts
  users=$(seqrec-metrics "$T/ranks" | awk '$1 == "records" { print $2 }')
  sum=$(awk 'NR > 1 { s += $2 } END { print s }' "$T/ex.tsv")
  [ "$sum" -eq $((2 * users)) ] # top-2 experts each
  # the same counts whatever the threads
  seqrec-score -m "$T/m.sqm" -j 1 --expert-stats "$T/ex1.tsv" "$T/s.sqr" > /dev/null
  cmp "$T/ex.tsv" "$T/ex1.tsv"
  # a model without experts, an unwritable file, --topk
  seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr" 2> /dev/null
  run -65 seqrec-score -m "$T/pop.sqm" --expert-stats "$T/x.tsv" -o "$T/r65" "$T/s.sqr"
  [[ "$output" == *"has no experts"* ]]
  [ ! -e "$T/x.tsv" ] && [ ! -e "$T/r65" ]
  # refused before any scoring: neither output is left behind
  run -73 seqrec-score -m "$T/m.sqm" --expert-stats "$T/nodir/x.tsv" -o "$T/r73" "$T/s.sqr"
  [[ "$output" == *"nodir"* ]]
  [ ! -e "$T/r73" ]
  # the counts cannot be written (a full disk): the ranks are not left either
  if [ -c /dev/full ]; then
    run -74 seqrec-score -m "$T/m.sqm" --expert-stats /dev/full -o "$T/r74" "$T/s.sqr"
    [[ "$output" == *"/dev/full: write error"* ]]
    [ ! -e "$T/r74" ]
  fi
  run -64 seqrec-score -m "$T/m.sqm" --topk 5 --expert-stats "$T/x.tsv" "$T/s.sqr"
  [[ "$output" == *"--expert-stats"* ]]
  [ ! -e "$T/x.tsv" ]
  seqrec-train "${TINY[@]}" --no-imr --epochs 1 --log /dev/null -o "$T/n.sqm" "$T/s.sqr"
  run -65 seqrec-score -m "$T/n.sqm" --expert-stats "$T/x.tsv" "$T/s.sqr"
}

@test "elastic: bad options are refused with the option named" {
  for bad in "--pool 16x8" "--pool 0x0" "--topk-experts 5" "--heads 3" "--dim 15 --heads 1" \
             "--stride 1" "--query max" "--expert-weights hard" "--attn softmax" \
             "--bkl-lambda 1" "--target all" "--loss bce"; do
    run --separate-stderr seqrec-train "${TINY[@]}" $bad -o "$T/m.sqm" "$T/s.sqr"
    echo "$bad: $status $stderr"
    [ "$status" -eq 64 ]
    opt=${bad%% *}
    [[ "$stderr" == *"${opt#--}"* ]]
  done
  run --separate-stderr seqrec-train "${TINY[@]}" --target all -o "$T/m.sqm" "$T/s.sqr"
  [[ "$stderr" == *"leak"* ]]
  [ ! -e "$T/m.sqm" ]
  # no --init: nothing to grow an interest pool from yet
  seqrec-train "${TINY[@]}" --target last --epochs 1 --log /dev/null -o "$T/m0.sqm" "$T/s.sqr"
  run -64 seqrec-train --init "$T/m0.sqm" -o "$T/m.sqm" "$T/s.sqr"
}
