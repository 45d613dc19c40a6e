#!/usr/bin/env bats
# seqrec-train --attn linrec --linrec-variant full|no-l2|no-elu (LinRec's
# ablations, Figure 4): each variant trains in SASRec (causal) and BERT4Rec
# (bidirectional), is recorded in the model file and scores as validation
# did, round-trips (files without the key read as full), draws attention
# maps, and bad uses are refused. Tiny data and models only.

load helper

setup() {
  common_setup
  seqrec-synth --users 200 --items 60 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--attn linrec --dim 8 --ffn 16 --max-len 12 --batch 64 --threads 2)
}

VARIANTS=(full no-l2 no-elu)

# key KEY MODEL: the value of a model file's config key (none: empty).
key() { seqrec-cat --header "$2" | sed -n "s/^config	$1=//p"; }

@test "linrec: every variant trains in SASRec and BERT4Rec, is recorded, scores as validation did" {
  for v in "${VARIANTS[@]}"; do
    for m in sasrec bert4rec; do
      seqrec-train "${TINY[@]}" --model $m --linrec-variant $v --epochs 3 \
        --log "$T/$m-$v.log" -o "$T/$m-$v.sqm" "$T/s.sqr"
      [ "$(key linrec_variant "$T/$m-$v.sqm")" = "$v" ]
      [ "$(key linrec_scale "$T/$m-$v.sqm")" = code ]
      score_matches_log "$T/$m-$v.log" "$T/$m-$v.sqm"
    done
  done
  # three variants, three models (same seed, same data)
  ! cmp -s "$T/sasrec-full.sqm" "$T/sasrec-no-l2.sqm" || false
  ! cmp -s "$T/sasrec-full.sqm" "$T/sasrec-no-elu.sqm" || false
  ! cmp -s "$T/sasrec-no-l2.sqm" "$T/sasrec-no-elu.sqm" || false
  # the default is full: the same bytes as --linrec-variant full
  seqrec-train "${TINY[@]}" --epochs 3 --log /dev/null -o "$T/def.sqm" "$T/s.sqr"
  cmp "$T/def.sqm" "$T/sasrec-full.sqm"
}

@test "linrec: each variant round-trips with either scaling, --init keeps it" {
  for v in no-l2 no-elu; do
    for s in code paper; do
      roundtrip_and_init "${TINY[@]}" --linrec-variant $v --linrec-scale $s
      [ "$(key linrec_variant "$T/m2.sqm")" = "$v" ]
      [ "$(key linrec_scale "$T/m2.sqm")" = "$s" ]
    done
  done
}

@test "linrec: a file written before --linrec-variant reads as full" {
  # the engine's recorded linrec model has linrec_scale but no linrec_variant
  old="$GOLD/engine/sasrec-linrec.sqm"
  [ -z "$(key linrec_variant "$old")" ]
  seqrec-synth --users 120 --items 50 --seed 3 --format stream | seqrec-split 2>/dev/null > "$T/d.sqr"
  seqrec-score -m "$old" -k 5 "$T/d.sqr" > "$T/a"
  [ -s "$T/a" ]
  seqrec-train --init "$old" --epochs 1 --threads 2 --log /dev/null -o "$T/n.sqm" "$T/d.sqr"
  [ "$(key linrec_variant "$T/n.sqm")" = full ]
}

@test "linrec: --attention-map draws each variant; the normalised ones are bounded" {
  for v in "${VARIANTS[@]}"; do
    seqrec-train "${TINY[@]}" --heads 2 --linrec-variant $v --epochs 2 --log /dev/null \
      -o "$T/$v.sqm" "$T/s.sqr"
    seqrec-score -m "$T/$v.sqm" --attention-map 5 -o "$T/$v" "$T/s.sqr"
    [ -s "$T/$v.png" ] && [ -s "$T/$v.l1.h2.tsv" ] && [ -s "$T/$v.l2.mean.tsv" ]
    n=$(($(wc -l < "$T/$v.items.tsv") - 1))
    [ "$n" -ge 2 ]
    # n rows of n finite weights, none above the diagonal (causal); with L2
    # normalisation (full, no-elu) |w| <= 1 (code scaling: attn_linear.h)
    bound=1.000001
    [ "$v" = no-l2 ] && bound=1e30
    for f in "$T/$v".l[12].h[12].tsv; do
      awk -v n="$n" -v b="$bound" -F'\t' '
        NF != n { print FILENAME ": " NF " columns"; bad = 1 }
        { for (j = 1; j <= NF; j++) {
            if ($j !~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/) { print FILENAME ": " $j; bad = 1 }
            a = $j < 0 ? -$j : $j
            if (j > NR && a != 0) { print FILENAME ": above the diagonal"; bad = 1 }
            if (a > b) { print FILENAME ": |" $j "| > " b; bad = 1 } } }
        END { exit bad || NR != n }' "$f"
    done
  done
  ! cmp -s "$T/full.l1.h1.tsv" "$T/no-l2.l1.h1.tsv" || false
}

@test "linrec: bad --linrec-variant values and uses are refused" {
  for bad in "--linrec-variant none" "--linrec-variant" "--linrec-variant FULL" \
             "--linrec-variant no-l2,no-elu"; do
    # last, so that a missing value is missing (not the next argument)
    run seqrec-train "${TINY[@]}" --epochs 1 -o "$T/m.sqm" "$T/s.sqr" $bad
    [ "$status" -eq 64 ] || { echo "$bad: $status $output"; false; }
    [[ "$output" == *--linrec-variant* ]] || { echo "$bad: $output"; false; }
  done
  # another kind, another model: the option is linrec's
  run -64 seqrec-train --attn softmax --linrec-variant no-l2 --dim 8 --ffn 16 -o "$T/m.sqm" "$T/s.sqr"
  [[ "$output" == *"--linrec-variant is for --attn linrec, not softmax"* ]]
  run -64 seqrec-train --attn hydra --linrec-variant full --dim 8 --ffn 16 -o "$T/m.sqm" "$T/s.sqr"
  [[ "$output" == *"--linrec-variant is for --attn linrec, not hydra"* ]]
  run -64 seqrec-train --model gru4rec --linrec-variant no-elu -o "$T/m.sqm" "$T/s.sqr"
  [[ "$output" == *--linrec-variant* ]]
  # the variant cannot change on resume
  seqrec-train "${TINY[@]}" --epochs 1 --linrec-variant no-l2 --log /dev/null -o "$T/r.sqm" "$T/s.sqr"
  run -64 seqrec-train --resume "$T/r.sqm.ckpt" --linrec-variant full --epochs 2 "$T/s.sqr"
  [[ "$output" == *--linrec-variant* ]]
  no_leftovers "$T" s.sqr r.sqm r.sqm.ckpt
}
