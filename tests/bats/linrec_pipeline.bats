#!/usr/bin/env bats
# make reproduce-linrec (pipelines/linrec.mk): the Table 4 and Figure 4
# scripts on fixed inputs give the right numbers, `make -n` lists every run
# with the paper's protocol, and a reduced real run (EPOCHS=1, a tiny model
# on seqrec-synth data) fills every table and figure.

load helper

setup() {
  common_setup
  P="$SEQREC_ROOT/pipelines"
  mkdir "$T/r"
}

# epoch line fixture: RUN "TRAIN_S EVAL_S RSS_MIB" ...
logs() {
  local run=$1 e=0; shift
  : > "$T/r/$run.log"
  for l in "$@"; do
    set -- $l
    e=$((e + 1))
    printf '{"epoch":%d,"loss":5,"valid":{"hr@10":0.5,"ndcg@10":0.3},"seconds":%s,"train_seconds":%s,"eval_seconds":%s,"max_rss_mib":%s,"seq_per_s":1}\n' \
      "$e" "$(awk -v a="$1" -v b="$2" 'BEGIN { print a + b }')" "$1" "$2" "$3" >> "$T/r/$run.log"
  done
}

@test "linrec: linrec_table4.sh tables peak memory and seconds with their ratios beside the paper's" {
  logs sasrec "10 4 100" "12 6 120"
  logs sasrec-linrec "5 2 40" "6 2 60"
  logs core "8 2 50"
  run -0 sh "$P/linrec_table4.sh" "$T/r" "sasrec:21.07/121/41 sasrec-linrec:8.72/44/20"
  echo "$output"
  [[ "$output" == *"| sasrec | 120.0 | 60.0 | 0.50 | 0.41 | 11.0 | 5.5 | 0.50 | 0.36 | 5.0 | 2.0 | 0.40 | 0.49 | 2, 2 |"* ]]
  [[ "$output" == *"| core | 50.0 | - | - | - | 8.0 | - | - | - | 2.0 | - | - | - | 1, 0 |"* ]]
  [[ "$output" == *"| bert4rec | (not run) |"* ]]
  [[ "$output" == *"Ours: one CPU process each"* ]]
  # GPU runs: the peak is device_mib, not the host's resident set
  for r in sasrec sasrec-linrec; do
    sed -i 's/}$/,"device_mib":'"$([ $r = sasrec ] && echo 400.0 || echo 100.0)"'}/' "$T/r/$r.log"
  done
  run -0 sh "$P/linrec_table4.sh" "$T/r" "sasrec:21.07/121/41 sasrec-linrec:8.72/44/20"
  [[ "$output" == *"| sasrec | 400.0 | 100.0 | 0.25 | 0.41 | 11.0 | 5.5 | 0.50 |"* ]]
  # CORE's pair: one on the CPU, one on the GPU: no memory ratio
  logs core-linrec "4 1 30"
  sed -i 's/}$/,"device_mib":20.0}/' "$T/r/core-linrec.log"
  run -0 sh "$P/linrec_table4.sh" "$T/r" ""
  [[ "$output" == *"| core | 50.0 | 20.0 | - | - | 8.0 | 4.0 | 0.50 |"* ]]
  [[ "$output" == *"Ours: one process each, on the GPU or the CPU"* ]]
  rm "$T/r/core.log" "$T/r/core-linrec.log"
  run -0 sh "$P/linrec_table4.sh" "$T/r" ""
  [[ "$output" == *"Ours: one process each on the GPU"* ]]
}

@test "linrec: linrec_fig4.sh tables the ablations and draws them" {
  printf '{"records": 3, "hr@10": 0.7, "ndcg@10": 0.5, "mrr@10": 0.4}\n' > "$T/r/sasrec-linrec.json"
  printf '{"records": 3, "hr@10": 0.6, "ndcg@10": 0.45, "mrr@10": 0.35}\n' > "$T/r/noelu.json"
  run -0 sh "$P/linrec_fig4.sh" "$T/r"
  cat "$T/r/fig4.md"
  grep -qF '| full | sasrec-linrec | 0.7000 | 0.4000 | 0.5000 |' "$T/r/fig4.md"
  grep -qF '| w/o-ELU | noelu | 0.6000 | 0.3500 | 0.4500 |' "$T/r/fig4.md"
  grep -qF '| w/o-L2 | nol2 | (not run) |' "$T/r/fig4.md"
  if command -v gnuplot > /dev/null; then [ -s "$T/r/fig4.png" ]; fi
}

@test "linrec: make -n reproduce-linrec lists every run with the paper's protocol" {
  run -0 mk -n reproduce-linrec LINREC_OUT="$T/out" LINREC_FIG3_OUT="$T/f3"
  [ "$(grep -c 'seqrec-train ' <<< "$output")" -eq 10 ]
  for r in sasrec sasrec-linrec bert4rec bert4rec-linrec core core-linrec lt ea nol2 noelu; do
    line=$(grep "seqrec-train .*-o $T/out/$r.sqm " <<< "$output")
    for o in "--loss ce" "--max-len 200" "--dim 128" "--ffn 256" "--layers 2" "--heads 8" "--dropout 0.2" \
             "--lr 1e-3" "--beta2 0.999" "--patience 10" "--epochs 100" "--valid-candidates pop:100" \
             "--valid-exclude-history" "--stop-metric ndcg@10"; do
      [[ "$line" == *" $o "* ]] || { echo "$r: no $o: $line"; false; }
    done
    [[ $r == bert4rec* ]] || [[ "$line" == *" --block recbole "* ]]
    grep -q "seqrec-score -m $T/out/$r.sqm --target test --candidates pop:100 -x .*| .*seqrec-metrics -k 10 --json > $T/out/$r.json.tmp" <<< "$output"
  done
  grep -q -- "--target windows --batch 16 --attn linrec .*-o $T/out/sasrec-linrec.sqm" <<< "$output"
  grep -q -- "--model bert4rec .*--target windows --batch 16 --attn softmax .*-o $T/out/bert4rec.sqm" <<< "$output"
  grep -q -- "--attn linear .*-o $T/out/lt.sqm" <<< "$output"
  grep -q -- "--attn efficient .*-o $T/out/ea.sqm" <<< "$output"
  grep -q -- "--linrec-variant no-l2 .*-o $T/out/nol2.sqm" <<< "$output"
  grep -q -- "--linrec-variant no-elu .*-o $T/out/noelu.sqm" <<< "$output"
  grep -q -- "--model bert4rec .*--mask-prob 0.2 .*-o $T/out/bert4rec.sqm" <<< "$output"
  grep -q -- "--model core .*--target random .*-o $T/out/core.sqm" <<< "$output"
  grep -q "pipelines/len_cost.sh $T/f3" <<< "$output"
  # EPOCHS caps every run; LINREC_TARGET=last is RecBole's samples, batch 2048
  run -0 mk -n linrec-runs LINREC_OUT="$T/out" EPOCHS=3 LINREC_TARGET=last
  [ "$(grep -c -- '--epochs 3 ' <<< "$output")" -eq 10 ]
  grep -q -- "--target last --batch 2048 --attn softmax .*-o $T/out/sasrec.sqm" <<< "$output"
  grep -q -- "--model bert4rec .*--target last --batch 2048 --attn linrec .*-o $T/out/bert4rec-linrec.sqm" <<< "$output"
}

@test "linrec: a reduced run (EPOCHS=1, tiny model, synthetic data) fills every table and figure" {
  seqrec-synth --users 60 --items 40 --mean-len 40 --max-len 80 --seed 3 --format stream \
    | seqrec-split --leave-one-out -o "$T/s.split"
  run -0 mk -j2 linrec-runs linrec-fig3 LINREC_BIN="$SEQREC_BIN" LINREC_SPLIT="$T/s.split" \
    LINREC_OUT="$T/out" LINREC_FIG3_OUT="$T/f3" EPOCHS=1 LINREC_MAXLEN=16 \
    LINREC_NET="--dim 16 --ffn 32 --layers 2 --heads 2 --dropout 0.2" LINREC_FIG3_NS="8 16" \
    LINREC_FIG3_USERS=30 LINREC_FIG3_ITEMS=40 LINREC_FIG3_MEAN_LEN=20 LINREC_FIG3_MAX_SEQ=40
  u=$(seqrec-cat --no-ts "$T/s.split" | awk -F'\t' '{ print split($2, a, " ") + split($3, b, " ") }' | sort -n | sed -n 30p)
  run -0 mk linrec-tables LINREC_BIN="$SEQREC_BIN" LINREC_OUT="$T/out" LINREC_FIG3_OUT="$T/f3" \
    LINREC_FIG5_LEN="$u" EPOCHS=1
  echo "$output"
  for r in sasrec sasrec-linrec bert4rec bert4rec-linrec core core-linrec; do
    grep -qE "^\| $r \| 0\.[0-9]{4} \| [0-9.]+ \| [0-9.]+ \|" "$T/out/table2.md"
  done
  grep -qE '^\| lt \| 0\.[0-9]{4} \|' "$T/out/table3.md"
  # device and budget from the runs' records: CORE's random prefixes fall short
  grep -qE '^\| sasrec \| .* \| cpu \| epochs 1 of 100 \|$' "$T/out/table2.md"
  grep -qE '^\| core \| .* \| cpu \| epochs 1 of 100, target random \(paper last or windows\) \|$' "$T/out/table2.md"
  grep -qE '^\| sasrec \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|' "$T/out/table4.md"
  grep -qE '^\| w/o-L2 \| nol2 \| 0\.[0-9]{4} \|' "$T/out/fig4.md"
  [ "$(grep -c '^| \(8\|16\) |' "$T/f3/fig3.md")" -eq 2 ]
  grep -q 'LinRec+SASRec' "$T/f3/fig3.md"
  # Figure 5: both models' maps for the chosen user
  for r in sasrec sasrec-linrec; do [ -s "$T/out/fig5-$r.l1.mean.tsv" ]; done
  if command -v gnuplot > /dev/null; then
    [ -s "$T/out/fig4.png" ] && [ -s "$T/f3/fig3.png" ] && [ -s "$T/out/fig5-sasrec.png" ]
  fi
  # every run's log has Table 4's fields
  grep -q '"train_seconds":.*"eval_seconds":.*"max_rss_mib":' "$T/out/sasrec.log"
}
