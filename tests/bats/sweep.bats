#!/usr/bin/env bats
# make sweep (pipelines/sweep.mk, sweep.sh): a 2x2 grid on a synthetic split
# with EPOCHS=1 writes its table, best config and curves, and a second call
# trains nothing; a stopped run resumes from its checkpoint; SAMPLES draws
# a seeded subset; bad grids are refused before any training.

load helper

setup() {
  common_setup
  seqrec-synth --users 200 --items 60 --seed 5 --format stream | seqrec-split 2>/dev/null > "$T/syn.split"
  printf 'max_len=20\nffn=16\ntrain.batch=32\n' > "$T/base.conf"
  SW=(SPLIT="$T/syn.split" SWEEP_OUT="$T/sw" SWEEP_CONFIG="$T/base.conf" BUILD="${SEQREC_BIN%/bin}")
}

@test "sweep: a 2x2 grid with EPOCHS=1: every run, the table by validation NDCG@10, best.conf, and no rerun" {
  run mk -j2 sweep-table "${SW[@]}" GRID='lr=1e-3,5e-3 dim=8,16' EPOCHS=1
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"4 of 4 runs of --model sasrec"* ]]
  for r in lr1e-3_dim8 lr1e-3_dim16 lr5e-3_dim8 lr5e-3_dim16; do
    for f in run.conf log.jsonl model.sqm result.json test.json; do
      [ -s "$T/sw/runs/$r/$f" ] || { echo "no $r/$f"; false; }
    done
    [ "$(wc -l < "$T/sw/runs/$r/log.jsonl")" -eq 1 ]
    grep -qx 'max_len=20' "$T/sw/runs/$r/run.conf"
    grep -qx 'train.epochs=1' "$T/sw/runs/$r/run.conf"
  done
  grep -qx 'train.lr=5e-3' "$T/sw/runs/lr5e-3_dim8/run.conf"
  grep -qx 'dim=8' "$T/sw/runs/lr5e-3_dim8/run.conf"
  # the TSV: a header, 4 rows sorted by valid_ndcg@10 (column 7), descending
  head -n 1 "$T/sw/table.tsv" | grep -qx $'run\tlr\tdim\tbest_epoch\tepochs\tvalid_hr@10\tvalid_ndcg@10\ttest_hr@10\ttest_ndcg@10\tseconds'
  [ "$(wc -l < "$T/sw/table.tsv")" -eq 5 ]
  tail -n +2 "$T/sw/table.tsv" | cut -f7 > "$T/v"
  sort -gr "$T/v" | diff - "$T/v"
  # a row's numbers are the run's: valid from its model file, test from its ranks
  row=$(grep '^lr5e-3_dim16' "$T/sw/table.tsv")
  [ "$(cut -f2,3,4,5 <<< "$row")" = $'5e-3\t16\t1\t1' ]
  v=$(seqrec-cat --header "$T/sw/runs/lr5e-3_dim16/model.sqm" | sed -n 's/^config\tvalid.ndcg@10=//p')
  awk -v a="$(cut -f7 <<< "$row")" -v b="$v" 'BEGIN { exit !(a - b < 1e-6 && b - a < 1e-6) }'
  t=$(seqrec-score -m "$T/sw/runs/lr5e-3_dim16/model.sqm" --target test "$T/syn.split" |
      seqrec-metrics -k 10 --json | sed -n 's/.*"ndcg@10": *\([0-9.]*\).*/\1/p')
  [ "$(cut -f9 <<< "$row")" = "$t" ]
  # Markdown: the same rows in the same order, the best in bold; best.conf is its config
  best=$(sed -n '2p' "$T/sw/table.tsv" | cut -f1)
  grep -q "^| \*\*$best\*\* |" "$T/sw/table.md"
  [ "$(grep -c '^| [*a-z]' "$T/sw/table.md")" -eq 5 ]
  cmp "$T/sw/best.conf" "$T/sw/runs/$best/run.conf"
  if command -v gnuplot > /dev/null; then [ -s "$T/sw/curves.png" ]; fi
  # best.conf trains the best run's model again
  seqrec-train --config "$T/sw/best.conf" --threads 1 --log /dev/null -o "$T/again.sqm" "$T/syn.split"
  cmp "$T/again.sqm" "$T/sw/runs/$best/model.sqm"
  # a second call trains nothing and keeps every file
  touch -d '2000-01-01' "$T/stamp"
  find "$T/sw/runs" -type f -exec touch -r "$T/stamp" {} +
  touch "$T/sw/runs/"*/result.json
  run mk sweep-table "${SW[@]}" GRID='lr=1e-3,5e-3 dim=8,16' EPOCHS=1
  [ "$status" -eq 0 ]
  [[ "$output" != *"seqrec-train --config $T/sw/runs"* ]]
  [ -z "$(find "$T/sw/runs" -name model.sqm -newer "$T/stamp")" ]
  # EPOCHS=2 changes every run.conf: each runs again, afresh
  run mk sweep-table "${SW[@]}" GRID='lr=1e-3,5e-3 dim=8,16' EPOCHS=2
  [ "$status" -eq 0 ]
  [ "$(grep -c "seqrec-train --config $T/sw/runs" <<< "$output")" -eq 4 ]
  [ "$(wc -l < "$T/sw/runs/lr1e-3_dim8/log.jsonl")" -eq 2 ]
}

@test "sweep: a stopped run resumes from its checkpoint to the bytes of an uninterrupted one" {
  mk sweep-table "${SW[@]}" GRID='dim=8' EPOCHS=2
  cp "$T/sw/runs/dim8/model.sqm" "$T/full.sqm"
  # as if stopped after its last checkpoint: no model, no result
  rm "$T/sw/runs/dim8/model.sqm" "$T/sw/runs/dim8/result.json"
  run mk sweep-table "${SW[@]}" GRID='dim=8' EPOCHS=2
  [ "$status" -eq 0 ]
  [[ "$output" == *"dim8: resuming"* ]]
  cmp "$T/full.sqm" "$T/sw/runs/dim8/model.sqm"
  [ -s "$T/sw/runs/dim8/result.json" ]
}

@test "sweep: SAMPLES=n trains n points drawn by SWEEP_SEED, the same n again" {
  grid='lr=1e-3,2e-3,5e-3 dim=8,16'
  run -0 mk sweep-plan "${SW[@]}" GRID="$grid" SAMPLES=2 EPOCHS=1
  [[ "$output" == *"2 of 6 runs"* ]]
  cp "$T/sw/runs.list" "$T/first"
  [ "$(wc -l < "$T/first")" -eq 2 ]
  run -0 mk sweep-plan "${SW[@]}" GRID="$grid" SAMPLES=2 EPOCHS=1 SWEEP_OUT="$T/sw2"
  cmp "$T/first" "$T/sw2/runs.list"
  # every seed's pick is 2 of the grid; some seed picks another pair
  other=0
  for s in 2 3 4 5; do
    mk sweep-plan "${SW[@]}" GRID="$grid" SAMPLES=2 EPOCHS=1 SWEEP_OUT="$T/s$s" SWEEP_SEED=$s
    [ "$(wc -l < "$T/s$s/runs.list")" -eq 2 ]
    cmp -s "$T/first" "$T/s$s/runs.list" || other=1
  done
  [ "$other" -eq 1 ]
  # the picked runs train, and only they
  run -0 mk sweep-table "${SW[@]}" GRID="$grid" SAMPLES=2 EPOCHS=1
  [ "$(grep -c "seqrec-train --config $T/sw/runs" <<< "$output")" -eq 2 ]
  [ "$(wc -l < "$T/sw/table.tsv")" -eq 3 ]
}

@test "sweep: bad grids and settings are refused before any training" {
  run mk sweep-table "${SW[@]}" GRID='bogus=1,2'
  [ "$status" -ne 0 ]
  [[ "$output" == *"GRID: bogus is not a setting of --model sasrec"* ]]
  run mk sweep-table "${SW[@]}" GRID='hidden=8,16'
  [[ "$output" == *"GRID: hidden is not a setting of --model sasrec"* ]]
  run mk sweep-table "${SW[@]}" GRID='epochs=1,2'
  [[ "$output" == *"give EPOCHS=N"* ]]
  run mk sweep-table "${SW[@]}" GRID='lr'
  [[ "$output" == *"GRID: lr: not KEY=V1,V2"* ]]
  run mk sweep-table "${SW[@]}" GRID='lr=1e-3,,2e-3'
  [[ "$output" == *"an empty value"* ]]
  run mk sweep-table "${SW[@]}" GRID='lr=1e-3 train.lr=2e-3'
  [[ "$output" == *"given twice"* ]]
  run mk sweep-table "${SW[@]}" GRID='dim=8,0'
  [[ "$output" == *"runs/dim0/run.conf:"*"bad dim=0"* ]]
  run mk sweep-table "${SW[@]}" GRID='dim=8' SAMPLES=x
  [[ "$output" == *"SAMPLES=x"* ]]
  run mk sweep-table "${SW[@]}" GRID='dim=8' MODEL=pop
  [[ "$output" == *"MODEL=pop fits in one pass"* ]]
  run mk sweep-table "${SW[@]}" GRID=''
  [[ "$output" == *"say GRID="* ]]
  run mk sweep-table SPLIT="$T/none.split" SWEEP_OUT="$T/sw" GRID='dim=8' BUILD="${SEQREC_BIN%/bin}"
  [[ "$output" == *"cannot read it"* ]]
  [ -z "$(find "$T/sw" -name model.sqm 2>/dev/null)" ]
  # SWEEP_CONFIG's settings must be the model's too
  run mk sweep-plan "${SW[@]}" GRID='hidden=8,16' MODEL=gru4rec
  [[ "$output" == *"runs/hidden8/run.conf:4: ffn is a setting of --model sasrec, not of --model gru4rec"* ]]
  # another model's keys, by the model given or SWEEP_CONFIG's
  run -0 mk sweep-plan "${SW[@]}" SWEEP_CONFIG= GRID='hidden=8,16' MODEL=gru4rec
  [[ "$output" == *"2 of 2 runs of --model gru4rec"* ]]
  printf 'model=gru4rec\nmax_len=20\n' > "$T/g.conf"
  run -0 mk sweep-plan "${SW[@]}" SWEEP_CONFIG="$T/g.conf" GRID='hidden=8,16' SWEEP_OUT="$T/g"
  [[ "$output" == *"2 of 2 runs of --model gru4rec"* ]]
}
