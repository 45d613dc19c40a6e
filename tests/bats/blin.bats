#!/usr/bin/env bats
# seqrec-train --model blin: learns what popularity cannot, scores through
# seqrec-score as validation does, is deterministic for a seed, round-trips
# through its model file, runs the Table 3 ablations and refuses bad
# options. Tiny data and models only.
# Determinism, the model file round trip and resuming: models.bats.

load helper

setup() {
  common_setup
  # 300 users, 100 items: a strong successor signal (seqrec-synth(1))
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--model blin --dim 16 --ffn 32 --max-len 20 --batch 32 --threads 2)
}

ndcg() { sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' "$@"; }

@test "blin: --help lists its options; its defaults are the paper's" {
  run seqrec-train --help
  [ "$status" -eq 0 ]
  for o in --pad --crop-eta --bkl-lambda --softmax --infer-pad --dwc-kernel; do
    [[ "$output" == *"$o"* ]] || { echo "missing $o"; false; }
  done
  [[ "$output" == *"efficient-dwc"* ]]
  seqrec-train --model blin --dim 16 --ffn 32 --batch 64 --epochs 1 --threads 2 \
    --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  run seqrec-cat --header "$T/m.sqm"
  [ "$status" -eq 0 ]
  for kv in model=blin attn=efficient-dwc dwc_kernel=5 heads=2 max_len=100 dropout=0.5 \
            blin.pad=randompad blin.bkl_lambda=2 blin.softmax=full blin.infer_pad=repeat; do
    [[ "$output" == *"$kv"* ]] || { echo "missing $kv"; false; }
  done
  # --infer-pad auto scores as trained: zero-padded crops score the history alone
  seqrec-train --model blin --pad zero --dim 16 --ffn 32 --batch 64 --epochs 1 --threads 2 \
    --log /dev/null -o "$T/zc.sqm" "$T/s.sqr"
  seqrec-cat --header "$T/zc.sqm" | grep -q 'blin.infer_pad=zero'

}

@test "blin: beats popularity on validation NDCG@10, and seqrec-score agrees with the log" {
  run --separate-stderr seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr"
  [ "$status" -eq 0 ]
  pop=$(ndcg <<< "$stderr")
  seqrec-train "${TINY[@]}" --dim 32 --ffn 64 --dropout 0.1 --lr 3e-3 --epochs 8 \
    --log "$T/log" -o "$T/m.sqm" "$T/s.sqr"
  blin=$(tail -n 1 "$T/log" | ndcg)
  echo "pop $pop blin $blin"
  awk -v p="$pop" -v s="$blin" 'BEGIN { exit !(s > 2 * p && s > 0.3) }'
  score_matches_log "$T/log" "$T/m.sqm"
}

@test "blin: the Table 3 ablations and the sampled softmax train and score" {
  for v in "--pad zero" "--attn softmax" "--dwc-kernel 0" "--bkl-lambda 0" \
           "--softmax sampled --neg 5" "--infer-pad zero" "--pad zero --crop-eta 0.3"; do
    run --separate-stderr seqrec-train "${TINY[@]}" $v --epochs 1 -o "$T/m.sqm" "$T/s.sqr"
    [ "$status" -eq 0 ] || { echo "$v: $status $stderr"; false; }
    [[ "$stderr" =~ \"ndcg@10\":[0-9.]+ ]]
    seqrec-score -m "$T/m.sqm" -k 3 "$T/s.sqr" > /dev/null
  done
}

@test "blin: options out of range or of other models are refused with the option named" {
  for bad in "--bkl-lambda -1" "--bkl-lambda x" "--crop-eta 0" "--crop-eta 1.5" "--pad ones" \
             "--softmax all" "--infer-pad random" "--dwc-kernel -1" "--dwc-kernel 100000" \
             "--heads 3"; do
    run seqrec-train "${TINY[@]}" $bad -o "$T/m.sqm" "$T/s.sqr"
    [ "$status" -eq 64 ] || { echo "$bad: $status"; false; }
    opt=${bad%% *}
    [[ "$output" == *"${opt}"* ]] || { echo "$bad: $output"; false; }
  done
  run seqrec-train "${TINY[@]}" --loss bce -o "$T/m.sqm" "$T/s.sqr"
  [ "$status" -eq 64 ]
  [[ "$output" == *"--softmax sampled"* ]]
  run seqrec-train "${TINY[@]}" --target last -o "$T/m.sqm" "$T/s.sqr"
  [ "$status" -eq 64 ]
  run seqrec-train --model sasrec --bkl-lambda 1 -o "$T/m.sqm" "$T/s.sqr"
  [ "$status" -eq 64 ]
  [[ "$output" == *"--bkl-lambda is not an option of --model sasrec"* ]]
  run seqrec-train --model blin --attn softmax --dwc-kernel 3 -o "$T/m.sqm" "$T/s.sqr"
  [ "$status" -eq 64 ]
  [[ "$output" == *"--dwc-kernel is for --attn efficient-dwc"* ]]
  no_leftovers "$T" s.sqr
}

@test "blin: reproduce-blin's table and figure scripts (paper cells, ratios, epochs, PNG)" {
  mkdir "$T/r"
  printf '{"records": 3, "hr@10": 0.300000, "ndcg@10": 0.200000, "hr@20": 0.400000, "ndcg@20": 0.250000}\n' > "$T/r/Beauty-blin.json"
  printf '{"records": 3, "hr@10": 0.100000, "ndcg@10": 0.050000, "hr@20": 0.200000, "ndcg@20": 0.070000}\n' > "$T/r/Beauty-lambda0.5.json"
  printf '{"epoch":1,"loss":9,"valid":{"hr@10":0.1,"ndcg@10":0.05},"seconds":10.0,"seq_per_s":1}\n{"epoch":2,"loss":8,"valid":{"hr@10":0.2,"ndcg@10":0.07},"seconds":20.0,"seq_per_s":1}\n{"epoch":3,"loss":7,"valid":{"hr@10":0.2,"ndcg@10":0.06},"seconds":30.0,"seq_per_s":1}\n' > "$T/r/Beauty-blin.log"
  run sh "$SEQREC_ROOT/pipelines/paper_table.sh" "T" "$T/r" "Beauty-blin:0.3319/0.4051/0.2218/0.2446" \
    Beauty-blin Beauty-lambda0.5 Beauty-none
  [ "$status" -eq 0 ]
  echo "$output"
  [[ "$output" == *"| Beauty-blin | 0.3000 | 0.3319 | 0.90 | 0.4000 | 0.4051 | 0.99 | 0.2000 | 0.2218 | 0.90 | 0.2500 | 0.2446 | 1.02 | 3 | 2 | 20.0 |"* ]]
  [[ "$output" == *"| Beauty-lambda0.5 | 0.1000 | - | - |"* ]]
  [[ "$output" == *"| Beauty-none | (not run) |"* ]]
  run sh "$SEQREC_ROOT/pipelines/blin_fig5.sh" "$T/r" Beauty "0.1 0.5 1 3"
  [ "$status" -eq 0 ]
  grep -q '^0.5 0.100000 0.050000$' "$T/r/fig5.dat"
  grep -q '^2 0.300000 0.200000$' "$T/r/fig5.dat"
  if command -v gnuplot > /dev/null; then [ -s "$T/r/fig5.png" ]; fi
  # blin-tables: the three tables and the figure from the runs there are, training nothing
  run -0 mk -n blin-tables BLIN_OUT="$T/out"
  [ "$(grep -c 'pipelines/paper_table.sh --budget "--epochs>=200 --batch=256"' <<< "$output")" -eq 3 ]
  grep -q "pipelines/blin_fig5.sh $T/out" <<< "$output"
  [[ "$output" != *seqrec-train* ]]
}

@test "blin: --attention-map draws the padded input the model scores" {
  seqrec-train "${TINY[@]}" --epochs 1 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  run -0 seqrec-score -m "$T/m.sqm" --attention-map 5 -o "$T/maps" "$T/s.sqr"
  grep -q '^# blin --attn efficient-dwc, history repeated, user 5' "$T/maps.gp"
  [ -s "$T/maps.l1.h1.tsv" ]
  [ -s "$T/maps.items.tsv" ]
}
