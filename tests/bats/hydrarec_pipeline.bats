#!/usr/bin/env bats
# make reproduce-hydrarec (pipelines/hydrarec.mk): `make -n` lists every
# run with the paper's protocol, and a reduced real run (EPOCHS=1, a tiny
# model on seqrec-synth data standing in for both data sets) fills Tables
# 2, 3 and 4.

load helper

setup() {
  common_setup
}


@test "hydrarec: make -n reproduce-hydrarec lists every run with the paper's protocol" {
  run -0 mk -n reproduce-hydrarec HYDRAREC_OUT="$T/out"
  # Tables 2 and 3 on both data sets, Table 4 on ML-1M
  [ "$(grep -c 'seqrec-train ' <<< "$output")" -eq 32 ]
  for d in beauty-bert4rec ml-1m-part; do
    n=100; [ $d = beauty-bert4rec ] && n=50
    for r in uni-softmax uni-hydra uni-efficient uni-linear uni-linrec bi-softmax bi-hydra bi-efficient bi-linear bi-linrec; do
      line=$(grep "seqrec-train .*-o $T/out/$d/$r.sqm " <<< "$output")
      for o in "--model bert4rec" "--mask-prob 0.1" "--layers 2" "--ffn 256" "--dim 64" "--max-len $n" \
               "--loss ce" "--valid-candidates pop:100" "--valid-exclude-history" "--stop-metric ndcg@10" \
               "--epochs 200" "--attn ${r#*-}"; do
        [[ "$line" == *" $o "* ]] || { echo "$d $r: no $o: $line"; false; }
      done
      if [[ $r == uni-* ]]; then [[ "$line" == *" --causal "* ]]; else [[ "$line" != *" --causal "* ]]; fi
      if [[ $r == *-hydra ]]; then [[ "$line" != *" --heads "* ]]; else [[ "$line" == *" --heads 8 "* ]]; fi
      grep -q "seqrec-score -m $T/out/$d/$r.sqm --target valid --candidates pop:100 -x .*| .*seqrec-metrics -k 10 --json > $T/out/$d/$r.json.tmp" <<< "$output"
      grep -q "seqrec-score -m $T/out/$d/$r.sqm --target test --candidates pop:100 -x .*> $T/out/$d/$r.test.json" <<< "$output"
    done
  done
  grep -q -- "--attn hydra --heads 16 --dim 256 --max-len 64 --batch 32 --epochs 20 .*-o $T/out/ml-1m-part/t4-h16-d256.sqm" <<< "$output"
  ! grep -q -- "-o $T/out/beauty-bert4rec/t4-" <<< "$output" || false
  run -0 mk -n hydrarec-runs HYDRAREC_OUT="$T/out" EPOCHS=2
  [ "$(grep -c -- '--epochs 2 ' <<< "$output")" -eq 32 ]
  [ "$(grep -c -- '--mask-prob 0.1 ' <<< "$output")" -eq 32 ]
  run -0 mk -n hydrarec-runs HYDRAREC_OUT="$T/out" HYDRAREC_MASK=0.6
  [ "$(grep -c -- '--mask-prob 0.6 ' <<< "$output")" -eq 32 ]
}

@test "hydrarec: a reduced run (EPOCHS=1, tiny models, synthetic data) fills Tables 2, 3 and 4" {
  seqrec-synth --users 60 --items 40 --mean-len 20 --max-len 50 --seed 5 --format stream \
    | seqrec-split --leave-one-out -o "$T/s.split"
  set -- HYDRAREC_BIN="$SEQREC_BIN" HYDRAREC_OUT="$T/out" HYDRAREC_DATASETS=synth HYDRAREC_ML=synth \
    HYDRAREC_SPLIT_synth="$T/s.split" EPOCHS=1 HYDRAREC_DIM=8 HYDRAREC_MAXLEN_ML=12 \
    HYDRAREC_T4_HEADS="2 4" HYDRAREC_T4_DIMS="8 16"
  run -0 mk -j2 hydrarec-runs "$@"
  run -0 mk hydrarec-tables "$@"
  echo "$output"
  for r in softmax hydra efficient linear linrec; do
    grep -qE "^\| uni-$r \| 0\.[0-9]{4} \| [0-9.-]+ \|" "$T/out/synth/table2.md"
    grep -qE "^\| bi-$r \| 0\.[0-9]{4} \|" "$T/out/synth/table3.md"
  done
  for r in t4-h2-d8 t4-h2-d16 t4-h4-d8 t4-h4-d16; do
    grep -qE "^\| $r \| 0\.[0-9]{4} \|" "$T/out/synth/table4.md"
  done
  grep -q 'pop:100 -x' "$T/out/synth/table2.md"
  # device and budget from the runs' records: ML-1M's 200 epochs, Table 4's 20 at batch 32
  grep -qE '^\| uni-hydra \| .* \| cpu \| epochs 1 of 200 \|$' "$T/out/synth/table2.md"
  grep -qE '^\| t4-h2-d8 \| .* \| cpu \| epochs 1 of 20 \|$' "$T/out/synth/table4.md"
  # the cells are the validation targets' (pop:100 -x), as the paper reports
  seqrec-score -m "$T/out/synth/bi-hydra.sqm" --target valid --candidates pop:100 -x "$T/s.split" \
    | seqrec-metrics -k 10 --json | cmp - "$T/out/synth/bi-hydra.json"
  [ -s "$T/out/synth/bi-hydra.test.json" ]
}
