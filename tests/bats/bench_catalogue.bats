#!/usr/bin/env bats
# bench/catalogue.mk and bench/bench-catalogue.sh (make bench-catalogue,
# issue 38) at tiny sizes: the machine lines, the table's columns, a row a
# catalogue and loss (full CE above CAT_CE_MAX skipped, with the reason),
# the quality rows, a plot without a gnuplot warning, a bad loss refused.
# Timings are printed, never judged.

load helper

setup() {
  common_setup
  PEAK=${SEQREC_BIN%/bin}/bench/sgemm_peak
  [ -x "$PEAK" ] || PEAK=""
  export CAT_ITEMS="300 3000" CAT_USERS=60 CAT_LOSSES="ce ssm:8 gbce:8 ssm:8+seq ssm:8+batch" CAT_EPOCHS=1 \
    CAT_BUDGET=0.05 CAT_MAX_EPOCHS=3 CAT_QUALITY_ITEMS=300 CAT_QUALITY_USERS=80 CAT_CE_MAX=1000 \
    CAT_MODEL_ARGS="--dim 8 --ffn 8 --layers 1 --heads 1 --max-len 10 --batch 32 --threads 2"
}

bench() { sh "$SEQREC_ROOT/bench/bench-catalogue.sh" "$SEQREC_BIN" "$T/out" "$PEAK"; }

@test "bench-catalogue.sh: machine lines, a timed row a catalogue and loss, quality rows, a quiet plot" {
  run -0 bench
  csv=$T/out/catalogue.csv
  head -n 1 "$csv" | grep -q '^catalogue,cpu,'
  grep -q '^catalogue,users,60$' "$csv"
  grep -q '^bench,items,loss,neg,sampler,update,epoch_seconds,max_rss_mib,vs_base$' "$csv"
  for r in "300,ce,0,-,adam" "300,sampled-softmax,8,uniform,adam" "300,gbce,8,uniform,adam" \
           "3000,sampled-softmax,8,uniform,adam" "3000,gbce,8,uniform,adam" \
           "300,sampled-softmax,8,uniform,seq\+lazy" "3000,sampled-softmax,8,uniform,batch\+lazy"; do
    grep -Eq "^catalogue,$r,[0-9.]+,[0-9.]+,[0-9.]*$" "$csv" || { echo "no $r"; cat "$csv"; false; }
  done
  grep -q '^catalogue,3000,ce,0,-,adam,,,skipped (ce above CAT_CE_MAX 1000)$' "$csv"
  # vs_base is the ratio to the same loss at 300 items, empty only where
  # that epoch read 0 (below the log's microsecond)
  awk -F, '$1 == "catalogue" && $2 ~ /^[0-9]+$/ && $7 != "" {
      k = $3 "," $4 "," $5 "," $6
      if ($2 == 300) base[k] = $7
      want = (base[k] > 0)
      if (want != ($9 != "") || ($2 == 300 && want && $9 != "1.00")) { print "vs_base: " $0; bad = 1 }
    } END { exit bad }' "$csv"
  [ "$(grep -c '^catalogue-quality,300,' "$csv")" = 5 ]
  awk -F, '$1 == "catalogue-quality" && !(NF == 11 && $8 >= 2 && $8 <= 3 && $10 > 0 && $10 <= 1) { print; bad = 1 } END { exit bad }' "$csv"
  if command -v gnuplot >/dev/null; then
    [ -s "$T/out/catalogue.png" ]
    gnuplot -e "csv='$csv'; out='$T/p.png'; pngcall='$SEQREC_ROOT/pipelines/png.gp'" \
      "$SEQREC_ROOT/bench/catalogue.gnuplot" > "$T/gp.out" 2>&1
    [ ! -s "$T/gp.out" ] || { cat "$T/gp.out"; false; }
  fi
  no_leftovers "$T" out p.png gp.out
}

@test "bench-catalogue.sh: a loss it does not know is a usage error (64); a quality size not timed too" {
  CAT_LOSSES="ce bpr" run -64 bench
  [[ "$output" == *"bpr is none of ce, ssm:K[+seq|+batch], gbce:K[+seq|+batch]"* ]]
  CAT_LOSSES="ssm:8+lazy" run -64 bench
  [[ "$output" == *"ssm:8+lazy: the suffixes are +seq and +batch"* ]]
  CAT_QUALITY_ITEMS=1234 CAT_LOSSES=ssm:8 run -64 bench
  [[ "$output" == *"1234 is not in CAT_ITEMS"* ]]
}

@test "make -n bench-catalogue runs the script with the build's programs" {
  run -0 mk -n bench-catalogue BUILD="${SEQREC_BIN%/bin}" BENCH_OUT="$T/out"
  [[ "$output" == *"bench/bench-catalogue.sh ${SEQREC_BIN%/bin}/bin $T/out"* ]]
}

@test "bench-losses.sh: a row a loss with its test metrics and the ratio to full CE; bad inputs refused" {
  "$SEQREC_BIN/seqrec-synth" --users 100 --items 60 --seed 1 --format stream |
    "$SEQREC_BIN/seqrec-split" --leave-one-out 2>/dev/null > "$T/s.sqr"
  export LOSS_EPOCHS=1 LOSS_MODEL_ARGS="--dim 8 --ffn 8 --threads 2" \
    LOSS_SET="ce bce:1 ssm:8:uniform ssm:8:in-batch gbce:8 ssm:8:pop+seq gbce:8+batch"
  run -0 sh "$SEQREC_ROOT/bench/bench-losses.sh" "$SEQREC_BIN" "$T/out" tiny:10:"$T/s.sqr"
  csv=$T/out/losses.csv
  head -n 1 "$csv" | grep -q '^losses,cpu,'
  for r in "ce,0,-" "bce,1,not-in-history" "sampled-softmax,8,uniform" "sampled-softmax,8,in-batch" \
           "gbce,8,uniform" "sampled-softmax,8,pop\+seq" "gbce,8,uniform\+batch"; do
    grep -Eq "^losses,tiny,$r,1,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+$" "$csv" ||
      { echo "no $r"; cat "$csv"; false; }
  done
  grep -Eq '^losses,tiny,ce,0,-,1,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,1.000$' "$csv"
  LOSS_SET="ce bpr" run -64 sh "$SEQREC_ROOT/bench/bench-losses.sh" "$SEQREC_BIN" "$T/out" tiny:10:"$T/s.sqr"
  [[ "$output" == *"bpr is none of"* ]]
  LOSS_SET="ce ssm:8:pop+lazy" run -64 sh "$SEQREC_ROOT/bench/bench-losses.sh" "$SEQREC_BIN" "$T/out" tiny:10:"$T/s.sqr"
  [[ "$output" == *"ssm:8:pop+lazy: the suffixes are +seq and +batch"* ]]
  run -66 sh "$SEQREC_ROOT/bench/bench-losses.sh" "$SEQREC_BIN" "$T/out" tiny:10:"$T/none.sqr"
  no_leftovers "$T" out s.sqr
}
