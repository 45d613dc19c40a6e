#!/usr/bin/env bats
# make reproduce-elastic (pipelines/elastic.mk): the table and figure
# scripts on fixed inputs give the right numbers, Figure 3's script runs
# tiny, `make -n` lists the runs with the paper's protocol, and a reduced
# real run on ml-1m-part (when a copy is at hand) fills Table 2's row.

load helper

setup() {
  common_setup
  P="$SEQREC_ROOT/pipelines"
  mkdir "$T/r"
}

# metrics fixture: RUN HR10 HR20 NDCG10 NDCG20 MRR10 MRR20
metrics() {
  printf '{"records": 3, "users": 3, "mrr": 0.5, "hr@10": %s, "recall@10": 0, "ndcg@10": %s, "mrr@10": %s, "precision@10": 0, "hr@20": %s, "recall@20": 0, "ndcg@20": %s, "mrr@20": %s, "precision@20": 0}\n' \
    "$2" "$4" "$6" "$3" "$5" "$7" > "$T/r/$1.json"
}
# expert counts fixture: RUN EXPERTS USED (the first USED experts retrieved)
experts() {
  awk -v n="$2" -v u="$3" 'BEGIN { for (i = 0; i < n; i++) printf "%d\t%d\n", i, i < u ? i + 1 : 0 }' \
    > "$T/r/$1.experts.tsv"
}

@test "elastic: paper_table.sh --mrr adds MRR columns, ratios and rows for models seqrec lacks" {
  metrics elastic 0.6 0.7 0.4 0.45 0.3 0.35
  printf '{"epoch":1,"loss":9,"valid":{"hr@10":0.1,"ndcg@10":0.05},"seconds":4.0,"seq_per_s":1}\n{"epoch":2,"loss":8,"valid":{"hr@10":0.2,"ndcg@10":0.07},"seconds":6.0,"seq_per_s":1}\n' > "$T/r/elastic.log"
  run -0 sh "$P/paper_table.sh" --mrr "T2" "$T/r" \
    "elastic:0.6619/0.7767/0.4256/0.4546/0.3517/0.3597 fpmc:0.5233/0.6760/0.3220/0.3606/0.2599/0.2705" \
    elastic 'fpmc:not in seqrec yet' sasrec
  echo "$output"
  [[ "$output" == *"| run | HR@10 | paper | ratio | HR@20 | paper | ratio | NDCG@10 | paper | ratio | NDCG@20 | paper | ratio | MRR@10 | paper | ratio | MRR@20 | paper | ratio | epochs | best | s/epoch |"* ]]
  [[ "$output" == *"| elastic | 0.6000 | 0.6619 | 0.91 | 0.7000 | 0.7767 | 0.90 | 0.4000 | 0.4256 | 0.94 | 0.4500 | 0.4546 | 0.99 | 0.3000 | 0.3517 | 0.85 | 0.3500 | 0.3597 | 0.97 | 2 | 2 | 5.0 |"* ]]
  [[ "$output" == *"| fpmc (not in seqrec yet) | - | 0.5233 | - | - | 0.6760 | - | - | 0.3220 | - | - | 0.3606 | - | - | 0.2599 | - | - | 0.2705 | - | - | - | - |"* ]]
  [[ "$output" == *"| sasrec | (not run) |"* ]]
  # without --mrr: Blin's four metrics, as before
  run -0 sh "$P/paper_table.sh" "T" "$T/r" "" elastic
  [[ "$output" != *"MRR"* ]]
  [[ "$output" == *"| elastic | 0.6000 | - | - | 0.7000 | - | - | 0.4000 | - | - | 0.4500 | - | - | 2 | 2 | 5.0 |"* ]]
}

@test "elastic: elastic_fig5.sh tables NDCG@10 and the key usage rate of both sweeps" {
  metrics elastic 0.6 0.7 0.41230 0.45 0.3 0.35
  metrics pool8x8 0.6 0.7 0.40 0.45 0.3 0.35
  metrics pool512x512 0.6 0.7 0.38 0.45 0.3 0.35
  metrics topk4 0.6 0.7 0.39 0.45 0.3 0.35
  experts elastic 256 192
  experts pool8x8 64 64
  experts topk4 256 100
  run -0 sh "$P/elastic_fig5.sh" "$T/r" "8x8 16x16 32x32 512x512" "4 8 16" "elastic:0.4256/- pool512x512:-/55.76"
  cat "$T/r/fig5.md"
  grep -qF '| 8x8 | 64 | pool8x8 | 0.4000 | 100.00% | - | - |' "$T/r/fig5.md"
  grep -qF '| 16x16 | 256 | elastic | 0.4123 | 75.00% | 0.4256 | - |' "$T/r/fig5.md"
  grep -qF '| 32x32 | 1024 | pool32x32 | (not run) | - | - | - |' "$T/r/fig5.md"
  grep -qF '| 512x512 | 262144 | pool512x512 | 0.3800 | - | - | 55.76% |' "$T/r/fig5.md"
  grep -qF '| 4 | 256 | topk4 | 0.3900 | 39.06% | - | - |' "$T/r/fig5.md"
  grep -qF '| 8 | 256 | elastic | 0.4123 | 75.00% | 0.4256 | - |' "$T/r/fig5.md"
  grep -qF '| 16 | 256 | topk16 | (not run) | - | - | - |' "$T/r/fig5.md"
  grep -q '^64 0.40 100.00 8x8$' "$T/r/fig5-pool.dat"
  grep -q '^256 0.41230 75.00 16x16$' "$T/r/fig5-pool.dat"
  grep -q '^4 0.39 39.06 4$' "$T/r/fig5-topk.dat"
  if command -v gnuplot > /dev/null; then [ -s "$T/r/fig5.png" ]; fi
  # an expert file that does not cover the pool is named on stderr
  experts elastic 100 50
  run --separate-stderr -0 sh "$P/elastic_fig5.sh" "$T/r" "16x16" "8"
  [[ "$stderr" == *"100 expert lines, pool has 256"* ]]
  grep -qF '| 16x16 | 256 | elastic | 0.4123 | 19.53% | - | - |' "$T/r/fig5.md"
}

@test "elastic: len_cost.sh times both models by N on a tiny synthetic run" {
  # ELASTIC itself when seqrec-train knows it, else a stand-in
  el="--model sasrec --attn linrec"
  if seqrec-train --help | grep -q '^ *elastic '; then el="--model elastic --pool 4 --topk-experts 2"; fi
  run -0 env SEQREC_BIN="$SEQREC_BIN" FIG3_NS="8 16" FIG3_USERS=40 FIG3_ITEMS=50 FIG3_MEAN_LEN=30 \
    FIG3_MAX_SEQ=60 FIG3_BATCH=16 FIG3_COMMON="--dim 16 --ffn 32 --heads 2 --seed 1" FIG3_ELASTIC="$el" \
    sh "$P/len_cost.sh" "$T/f3"
  echo "$output"
  cat "$T/f3/fig3.md"
  [ "$(wc -l < "$T/f3/fig3.tsv")" -eq 5 ]
  # ms/step = 1000 * samples / seq_per_s / ceil(samples / batch): 40 users, 3 steps
  for m in sasrec elastic; do for n in 8 16; do
    want=$(awk '{ last = $0 } END { sub(/.*"seq_per_s":/, "", last); printf "%.2f", 1000 * 40 / last / 3 }' "$T/f3/$m-$n.log")
    got=$(awk -v m="$m" -v n="$n" '$1 == m && $2 == n { print $3 }' "$T/f3/fig3.tsv")
    [ "$got" = "$want" ] || { echo "$m $n: $got, want $want"; false; }
  done; done
  # every cell is a number, and each ratio is ELASTIC / SASRec
  awk '/^[|] (8|16) [|]/ {
      s = $0; sub(/^[|] /, "", s); sub(/ [|]$/, "", s)
      if (split(s, f, / [|] /) != 10) exit 1
      for (i = 2; i <= 10; i++) if (f[i] !~ /^[0-9.]+$/ && f[i] != "-") exit 1
      for (i = 2; i <= 8; i += 3)
        if (f[i] + 0 > 0 && f[i + 1] != "-" && sprintf("%.2f", f[i + 1] / f[i]) != f[i + 2]) exit 1
      rows++
    } END { exit rows != 2 }' "$T/f3/fig3.md"
  grep -q '^40 synthetic users' "$T/f3/fig3.md"
  if command -v gnuplot > /dev/null; then [ -s "$T/f3/fig3.png" ]; fi
}

@test "elastic: len_cost.sh on the simulated device: --device to both programs, the peak is device_mib" {
  SIM="$SEQREC_BIN/../lib/libseqrec-cuda-sim.so"
  [ -f "$SIM" ] || skip "no simulated device built"
  export SEQREC_CUDA_LIB="$SIM" SEQREC_SIMULATED_DEVICE=1
  run -0 env SEQREC_BIN="$SEQREC_BIN" REPRO_DEVICE=cuda FIG3_NS="8" FIG3_USERS=12 FIG3_ITEMS=20 \
    FIG3_MEAN_LEN=10 FIG3_MAX_SEQ=20 FIG3_BATCH=6 FIG3_COMMON="--dim 8 --ffn 8 --heads 1 --layers 1 --seed 1" \
    FIG3_ELASTIC="--model sasrec --attn linrec" sh "$P/len_cost.sh" "$T/f3"
  grep -q '^### ELASTIC Figure 3: .* (GPU, synthetic)$' "$T/f3/fig3.md"
  for m in sasrec elastic; do
    d=$(grep -o '"device_mib":[0-9.]*' "$T/f3/$m-8.log" | tail -1 | cut -d: -f2)
    [ -n "$d" ]
    [ "$(awk -v m="$m" '$1 == m && $2 == 8 { print $4 }' "$T/f3/fig3.tsv")" = "$d" ]
  done
  [ -s "$T/f3/sasrec-8.ranks" ] && [ -s "$T/f3/elastic-8.ranks" ]
}

@test "elastic: make -n reproduce-elastic lists every run with the paper's protocol" {
  run -0 mk -n reproduce-elastic ELASTIC_OUT="$T/out" ELASTIC_FIG3_OUT="$T/f3"
  trains=$(grep -c 'seqrec-train ' <<< "$output")
  [ "$trains" -eq 20 ]
  for r in fpmc gru4rec hstu sasrec sasrecrand bert4rec linrec elastic noquery noimr nodisp pool8x8 pool32x32 pool64x64 pool128x128 \
           pool256x256 pool512x512 topk4 topk16; do
    line=$(grep "seqrec-train .*-o $T/out/$r.sqm " <<< "$output")
    for o in "--loss ce" "--max-len 256" "--lr 1e-3" "--patience 10" "--epochs 200" "--batch 256" \
             "--dim 64" "--threads 1"; do
      [[ $r == fpmc && $o == "--max-len 256" ]] && continue # the newest item only
      [[ "$line" == *" $o "* ]] || { echo "$r: no $o: $line"; false; }
    done
    grep -q "seqrec-score -m $T/out/$r.sqm --target test --candidates full -x .*| .*seqrec-metrics -k 10,20 --json > $T/out/$r.json.tmp" <<< "$output"
  done
  grep -q -- "--model elastic --dropout 0.5 --pool 16x16 --topk-experts 8 .*-o $T/out/elastic.sqm" <<< "$output"
  grep -q -- "--query mean .*-o $T/out/noquery.sqm" <<< "$output"
  grep -q -- "--no-imr .*-o $T/out/noimr.sqm" <<< "$output"
  grep -q -- "--no-dispatcher .*-o $T/out/nodisp.sqm" <<< "$output"
  grep -q -- "--expert-weights none .*-o $T/out/gather.sqm" <<< "$output"
  grep -q -- "--pool 512x512 --topk-experts 8 .*-o $T/out/pool512x512.sqm" <<< "$output"
  grep -q -- "--pool 16x16 --topk-experts 16 .*-o $T/out/topk16.sqm" <<< "$output"
  grep -q -- "--model sasrec --attn linrec .*-o $T/out/linrec.sqm" <<< "$output"
  grep -q -- "--model sasrec --attn softmax --dropout 0.5 --target random .*-o $T/out/sasrecrand.sqm" <<< "$output"
  grep -q -- "--model bert4rec .*--mask-prob 0.2 .*-o $T/out/bert4rec.sqm" <<< "$output"
  # Table 2's baselines with their own options
  grep -q -- "--model fpmc --dim 64 --target random --loss ce .*-o $T/out/fpmc.sqm" <<< "$output"
  grep -q -- "--model gru4rec --dim 64 --max-len 256 --loss ce .*-o $T/out/gru4rec.sqm" <<< "$output"
  grep -q -- "--model hstu --dim 64 --layers 2 --heads 2 --max-len 256 --loss ce .*-o $T/out/hstu.sqm" <<< "$output"
  ! grep -q -- "--model gru4rec .*--ffn" <<< "$output" || false
  grep -q -- "--expert-stats $T/out/pool8x8.experts.tsv" <<< "$output"
  ! grep -q -- "--expert-stats $T/out/sasrec" <<< "$output" || false
  grep -q -- "seqrec-preprocess --core 5 " <<< "$output"
  grep -q -- " data/raw/ml-1m-part.zip > $T/out/stats.tsv" <<< "$output"
  grep -q -- "seqrec-split --leave-one-out" <<< "$output"
  grep -q "pipelines/len_cost.sh $T/f3" <<< "$output"
  # the knobs: a subset, the epochs, threads, batch, data, the model's name
  run -0 mk -n elastic-runs ELASTIC_OUT="$T/out" ELASTIC_RUNS="sasrec topk4" EPOCHS=7 ELASTIC_THREADS=2 \
    ELASTIC_BATCH=2048 ELASTIC_DATA=ml-1m ELASTIC_MODEL="--model x"
  [ "$(grep -c 'seqrec-train ' <<< "$output")" -eq 2 ]
  grep -q -- "--model x --dropout 0.5 --pool 16x16 --topk-experts 4 .*--batch 2048 .*--epochs 7 .*--threads 2 " <<< "$output"
  grep -q -- "data/raw/ml-1m.zip" <<< "$output"
  run -0 mk -n elastic-runs ELASTIC_OUT="$T/out" ELASTIC_RUNS=elastic ELASTIC_TARGET=last
  grep -q -- "--topk-experts 8 --target last " <<< "$output"
}

@test "elastic: make elastic-tables puts the paper's cells beside ours and says the data is not the paper's" {
  metrics sasrec 0.33 0.4 0.2095 0.3 0.1 0.2
  metrics noimr 0.6515 0.7699 0.4132 0.4433 0.3387 0.3470
  run -0 mk elastic-tables ELASTIC_OUT="$T/r" ELASTIC_FIG3_OUT="$T/none"
  echo "$output"
  grep -qF '| sasrec | 0.3300 | 0.6606 | 0.50 | 0.4000 | 0.7712 | 0.52 | 0.2095 | 0.4190 | 0.50 |' "$T/r/table2.md"
  grep -qF '| bert4rec | (not run) |' "$T/r/table2.md"
  grep -qF '| hstu | (not run) |' "$T/r/table2.md"
  grep -qF '| gru4rec | (not run) |' "$T/r/table2.md"
  grep -qF '| linrec | (not run) |' "$T/r/table2.md"
  grep -q 'ml-1m-part is NOT the paper data' "$T/r/table2.md"
  grep -qF '| noimr | 0.6515 | 0.6515 | 1.00 | 0.7699 | 0.7699 | 1.00 | 0.4132 | 0.4132 | 1.00 | 0.4433 | 0.4433 | 1.00 | 0.3387 | 0.3387 | 1.00 | 0.3470 | 0.3470 | 1.00 |' "$T/r/table3.md"
  grep -qF '| nodisp | (not run) |' "$T/r/table3.md"
  grep -q 'NOT the paper data' "$T/r/table3.md"
  grep -qF '| 512x512 | 262144 | pool512x512 | (not run) | - | - | 55.76% |' "$T/r/fig5.md"
  [[ "$output" == *"### ELASTIC Table 2, ml-1m-part"* ]]
}

@test "elastic: a reduced real run on ml-1m-part (1 epoch, N = 16) fills SASRec's row" {
  zip="$SEQREC_ROOT/data/raw/ml-1m-part.zip"
  if [ ! -f "$zip" ]; then need_mirror ml-1m-part.zip; zip=$MIRROR/ml-1m-part.zip; fi
  run -0 mk elastic-runs elastic-tables ELASTIC_OUT="$T/r" ELASTIC_FIG3_OUT="$T/none" ELASTIC_RAW="$zip" \
    ELASTIC_BIN="$SEQREC_BIN" ELASTIC_RUNS=sasrec EPOCHS=1 ELASTIC_MAXLEN=16 ELASTIC_BATCH=512
  grep -q '^users	2999$' "$T/r/stats.tsv"
  grep -q '^items	3266$' "$T/r/stats.tsv"
  grep -q '"mrr@20": [0-9.]*' "$T/r/sasrec.json"
  # the run's record (pipelines/repro_run.sh): the CPU, short of the paper's budget
  grep -q '^| sasrec | 0\.[0-9]* | 0.6606 | [0-9.]* | .* | 1 | 1 | [0-9.]* | cpu | epochs 1 of 500, batch 512 (paper 2048) |$' "$T/r/table2.md"
  grep -q '^args: .*--epochs 1 .*-o '"$T"'/r/sasrec.sqm ' "$T/r/sasrec.run"
  grep -q '^Ours: 2999 users, 3266 items, 486907 interactions' "$T/r/table2.md"
}

@test "elastic: elastic_fig4.sh tables the load per expert and its hottest experts" {
  printf 'expert\tcount\n0\t5\n1\t0\n2\t12\n3\t3\n' > "$T/r/elastic.experts.tsv"
  run -0 sh "$P/elastic_fig4.sh" "$T/r" elastic
  cat "$T/r/fig4.md"
  grep -qF '### ELASTIC Figure 4: expert load, elastic (4 experts, 20 retrievals)' "$T/r/fig4.md"
  grep -qF '| 3 of 4 (75.00%) | 5.00 | 12 | 2.40 |' "$T/r/fig4.md"
  grep -qF '| 2 | 12 | 60.00% |' "$T/r/fig4.md"
  [ "$(sed -n '/hottest/,$p' "$T/r/fig4.md" | grep -c '^| [0-9]')" -eq 4 ]
  [ "$(head -n 1 "$T/r/fig4-sorted.dat")" = "0 12" ]
  if command -v gnuplot > /dev/null; then [ -s "$T/r/fig4.png" ]; fi
  # no run: a line that says so
  run -0 sh "$P/elastic_fig4.sh" "$T/r" missing
  grep -q 'missing not run' "$T/r/fig4.md"
}
