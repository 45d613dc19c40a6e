#!/usr/bin/env bats
# pipelines/repro_run.sh, the reproductions' runs under DEVICE= and
# GPU_MINUTES= (every reproduce-* target's run rules): the device added to
# training and scoring, a spent budget starts nothing, a run the budget
# stops keeps its checkpoint and no model, and the next call resumes it to
# the uninterrupted run's bytes; at the make level, GPU_MINUTES=0 runs
# nothing and fails nothing.

load helper

setup() {
  common_setup
  RR="sh $SEQREC_ROOT/pipelines/repro_run.sh"
  seqrec-synth --users 80 --items 40 --seed 4 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  O=(--model sasrec --dim 16 --ffn 16 --max-len 20 --batch 16 --threads 1 --loss ce --seed 2 \
     --patience 0)
}

@test "repro_run: DEVICE's --device reaches both programs; without a budget the command runs as given" {
  REPRO_DEVICE=cpu $RR "$SEQREC_BIN/seqrec-train" "${O[@]}" --epochs 2 --log /dev/null \
    -o "$T/a.sqm" "$T/t.sqr"
  "$SEQREC_BIN/seqrec-train" "${O[@]}" --epochs 2 --log /dev/null -o "$T/b.sqm" "$T/t.sqr"
  cmp "$T/a.sqm" "$T/b.sqm"
  # the device is given: an unknown one is refused by the program itself
  REPRO_DEVICE=nope run -64 $RR "$SEQREC_BIN/seqrec-train" "${O[@]}" --epochs 1 -o "$T/c.sqm" "$T/t.sqr"
  [[ "$output" == *"nope"* ]]
  REPRO_DEVICE=nope run -64 $RR --score "$SEQREC_BIN/seqrec-score" -m "$T/a.sqm" "$T/t.sqr"
  [[ "$output" == *"nope"* ]]
  REPRO_DEVICE=cpu $RR --score "$SEQREC_BIN/seqrec-score" -m "$T/a.sqm" "$T/t.sqr" > "$T/s1"
  seqrec-score -m "$T/a.sqm" "$T/t.sqr" > "$T/s2"
  cmp "$T/s1" "$T/s2"
  run -64 $RR
  [[ "$output" == *"usage"* ]]
}

@test "repro_run: a spent budget starts nothing (exit 0, no model, a stale model removed on a fresh start)" {
  REPRO_DEADLINE=$(( $(date +%s) + 10 )) run -0 $RR "$SEQREC_BIN/seqrec-train" "${O[@]}" \
    --epochs 1 -o "$T/m.sqm" "$T/t.sqr"
  [[ "$output" == *"budget is spent"* ]]
  [ ! -e "$T/m.sqm" ]
  echo stale > "$T/m.sqm"
  REPRO_DEADLINE=$(( $(date +%s) + 600 )) $RR "$SEQREC_BIN/seqrec-train" "${O[@]}" --epochs 1 \
    --log /dev/null -o "$T/m.sqm" "$T/t.sqr"
  [ "$(head -c 5 "$T/m.sqm")" != stale ]
  REPRO_DEADLINE=1 run -64 $RR "$SEQREC_BIN/seqrec-train" "${O[@]}" "$T/t.sqr"
  [[ "$output" == *"no -o MODEL"* ]]
}

@test "repro_run: a run the budget stops keeps its checkpoint, and the next call resumes it to the uninterrupted run's bytes" {
  # about 20 ms an epoch: 300 epochs (--patience 0) outlast a budget of 2 s
  seqrec-synth --users 400 --items 80 --seed 4 --format stream | seqrec-split 2>/dev/null > "$T/t.sqr"
  "$SEQREC_BIN/seqrec-train" "${O[@]}" --epochs 300 --log "$T/full.log" -o "$T/full.sqm" "$T/t.sqr"
  # a budget of 2 s: some epochs, then SIGTERM
  REPRO_MIN_LEFT=0 REPRO_DEADLINE=$(( $(date +%s) + 2 )) run -0 $RR "$SEQREC_BIN/seqrec-train" \
    "${O[@]}" --epochs 300 --log "$T/m.log" -o "$T/m.sqm" "$T/t.sqr"
  [[ "$output" == *"ran out during"* ]]
  [ ! -e "$T/m.sqm" ]
  [ -s "$T/m.sqm.ckpt" ]
  done1=$(grep -c '"epoch"' "$T/m.log")
  [ "$done1" -ge 1 ] && [ "$done1" -lt "$(grep -c '"epoch"' "$T/full.log")" ]
  REPRO_DEADLINE=$(( $(date +%s) + 600 )) run -0 $RR "$SEQREC_BIN/seqrec-train" "${O[@]}" \
    --epochs 300 --log "$T/m.log" -o "$T/m.sqm" "$T/t.sqr"
  [[ "$output" == *"resumes from its checkpoint"* ]]
  cmp "$T/full.sqm" "$T/m.sqm"
  # the log appended, up to the uninterrupted run's last epoch (an epoch the
  # budget cut after its line and before its checkpoint is logged twice)
  last() { grep -o '"epoch":[0-9]*' "$1" | tail -1; }
  [ "$(last "$T/m.log")" = "$(last "$T/full.log")" ]
}

@test "repro_run: make with GPU_MINUTES=0 runs no reproduction run and fails nothing; DEVICE reaches the protocol" {
  seqrec-synth --users 60 --items 40 --mean-len 40 --max-len 80 --seed 3 --format stream \
    | seqrec-split --leave-one-out -o "$T/s.split"
  run -0 mk linrec-runs LINREC_BIN="$SEQREC_BIN" LINREC_SPLIT="$T/s.split" LINREC_OUT="$T/out" \
    LINREC_RUNS="sasrec lt" EPOCHS=1 GPU_MINUTES=0
  [[ "$output" == *"budget is spent: $T/out/sasrec.sqm"* ]]
  [ ! -e "$T/out/sasrec.json" ] && [ ! -e "$T/out/lt.json" ]
  # the protocol shows the device on both programs
  run -0 mk -n linrec-runs LINREC_OUT="$T/o2" LINREC_RUNS=sasrec DEVICE=cuda
  grep -q "repro_run.sh .*seqrec-train" <<< "$output"
  grep -q "repro_run.sh --score .*seqrec-score" <<< "$output"
}

@test "repro_run: on a CUDA device a fresh training run trains with --cuda-graphs, a resumed one keeps its checkpoint's; CUDA_GRAPHS=0 trains eagerly" {
  sim_setup
  S=(--model sasrec --dim 8 --ffn 8 --max-len 8 --layers 1 --heads 1 --batch 12 --loss ce --seed 2)
  REPRO_DEVICE=cuda run --separate-stderr $RR "$SEQREC_BIN/seqrec-train" "${S[@]}" --epochs 2 \
    --log /dev/null -o "$T/g.sqm" "$T/t.sqr"
  [ "$status" -eq 0 ]
  [[ "$stderr" == *"--cuda-graphs: "*" captured"* ]]
  seqrec-train "${S[@]}" --epochs 2 --device cuda --cuda-graphs -o "$T/h.sqm" "$T/t.sqr" 2>/dev/null
  cmp "$T/g.sqm" "$T/h.sqm"
  REPRO_DEVICE=cuda REPRO_GRAPHS=0 run --separate-stderr $RR "$SEQREC_BIN/seqrec-train" \
    "${S[@]}" --epochs 1 -o "$T/e.sqm" "$T/t.sqr"
  [ "$status" -eq 0 ]
  [[ "$stderr" != *"captured"* ]]
  # a budget: the resume gives no --cuda-graphs (refused with --resume), the
  # checkpoint's graphs go on
  REPRO_DEVICE=cuda REPRO_DEADLINE=$(( $(date +%s) + 600 )) $RR "$SEQREC_BIN/seqrec-train" \
    "${S[@]}" --epochs 1 --log /dev/null -o "$T/r.sqm" "$T/t.sqr" 2>/dev/null
  rm "$T/r.sqm"
  REPRO_DEVICE=cuda REPRO_DEADLINE=$(( $(date +%s) + 600 )) run --separate-stderr $RR \
    "$SEQREC_BIN/seqrec-train" "${S[@]}" --epochs 2 --log /dev/null -o "$T/r.sqm" "$T/t.sqr"
  [ "$status" -eq 0 ]
  [[ "$stderr" == *"resumes from its checkpoint"* && "$stderr" == *"captured"* ]]
  cmp "$T/r.sqm" "$T/g.sqm"
  # scoring takes no --cuda-graphs
  REPRO_DEVICE=cuda run -0 $RR --score "$SEQREC_BIN/seqrec-score" -m "$T/g.sqm" "$T/t.sqr"
}

@test "repro_run: each training run leaves its record (device, options); a resume sets its epochs and adds its device" {
  $RR "$SEQREC_BIN/seqrec-train" "${O[@]}" --epochs 1 --log /dev/null -o "$T/a.sqm" "$T/t.sqr"
  [ "$(sed -n 1p "$T/a.run")" = "device: cpu" ]
  [ "$(sed -n 2p "$T/a.run")" = "args: ${O[*]} --epochs 1 --log /dev/null -o $T/a.sqm $T/t.sqr" ]
  [ "$(sed -n 3p "$T/a.run")" = "stop: epochs 1" ]
  [ "$(wc -l < "$T/a.run")" -eq 3 ]
  # scoring leaves none, and does not touch the run's
  cp "$T/a.run" "$T/a.run.was"
  $RR --score "$SEQREC_BIN/seqrec-score" -m "$T/a.sqm" "$T/t.sqr" > /dev/null
  cmp "$T/a.run" "$T/a.run.was"
  # a budgeted fresh run records the device it was given; its resume (a
  # later make with a larger EPOCHS) the new cap, and a second device once
  sim_setup
  S=(--model sasrec --dim 8 --ffn 8 --max-len 8 --layers 1 --heads 1 --batch 12 --loss ce --seed 2)
  REPRO_DEVICE=cuda REPRO_DEADLINE=$(( $(date +%s) + 600 )) $RR "$SEQREC_BIN/seqrec-train" \
    "${S[@]}" --epochs 1 --log /dev/null -o "$T/r.sqm" "$T/t.sqr" 2>/dev/null
  [ "$(sed -n 1p "$T/r.run")" = "device: cuda" ]
  grep -q -- "^args: .*--epochs 1 --log" "$T/r.run"
  rm "$T/r.sqm"
  REPRO_DEVICE=cpu REPRO_DEADLINE=$(( $(date +%s) + 600 )) run -0 $RR "$SEQREC_BIN/seqrec-train" \
    "${S[@]}" --epochs 3 --log /dev/null -o "$T/r.sqm" "$T/t.sqr"
  [[ "$output" == *"resumes from its checkpoint"* ]]
  [ "$(sed -n 1p "$T/r.run")" = "device: cuda+cpu" ]
  grep -q -- "^args: .*--epochs 3 --log" "$T/r.run"
  [ "$(grep '^stop: ' "$T/r.run")" = "stop: epochs 3" ]
  rm "$T/r.sqm"
  REPRO_DEVICE=cuda REPRO_DEADLINE=$(( $(date +%s) + 600 )) $RR "$SEQREC_BIN/seqrec-train" \
    "${S[@]}" --epochs 4 --log /dev/null -o "$T/r.sqm" "$T/t.sqr" 2>/dev/null
  [ "$(sed -n 1p "$T/r.run")" = "device: cuda+cpu" ]
  # run_budget.sh reads it
  run -0 sh "$SEQREC_ROOT/pipelines/run_budget.sh" "$T/r.run" "--epochs>=4 --batch=12|2048 --loss!=bce"
  [ "$output" = "cuda+cpu	paper" ]
  run -0 sh "$SEQREC_ROOT/pipelines/run_budget.sh" "$T/r.run" "--epochs>=500 --batch=2048 --loss!=ce --lr=1e-3"
  [ "$output" = "cuda+cpu	epochs 4 of 500, batch 12 (paper 2048), loss ce, lr unset (paper 1e-3)" ]
}

@test "repro_run: a run --patience ended records it, and run_budget.sh credits its epochs, nothing else" {
  # a large learning rate: validation goes up and down; seeds until one stops early
  for seed in 1 2 3 4 5 6 7 8; do
    $RR "$SEQREC_BIN/seqrec-train" "${O[@]}" --patience 1 --lr 0.05 --seed $seed --epochs 15 \
      --log "$T/p.log" -o "$T/p.sqm" "$T/t.sqr"
    grep -q '^stop: patience' "$T/p.run" && break
  done
  [ "$(grep '^stop: ' "$T/p.run")" = "stop: patience $(wc -l < "$T/p.log")" ]
  [ "$(wc -l < "$T/p.log")" -lt 15 ]
  run -0 sh "$SEQREC_ROOT/pipelines/run_budget.sh" "$T/p.run" "--epochs>=500 --batch=16"
  [ "$output" = "cpu	paper" ]
  run -0 sh "$SEQREC_ROOT/pipelines/run_budget.sh" "$T/p.run" "--epochs>=500 --batch=2048 --dim>=64"
  [ "$output" = "cpu	batch 16 (paper 2048), dim 16 of 64" ]
  # the same run with the cap reached is judged by its cap; a failed run
  # adds nothing, and a later end replaces the earlier one
  $RR "$SEQREC_BIN/seqrec-train" "${O[@]}" --patience 1 --lr 0.05 --seed $seed --epochs 1 \
    --log /dev/null -o "$T/p.sqm" "$T/t.sqr"
  [ "$(grep -c '^stop: ' "$T/p.run")" -eq 1 ]
  grep -q '^stop: epochs 1$' "$T/p.run"
  run -0 sh "$SEQREC_ROOT/pipelines/run_budget.sh" "$T/p.run" "--epochs>=500"
  [ "$output" = "cpu	epochs 1 of 500" ]
  run -66 $RR "$SEQREC_BIN/seqrec-train" "${O[@]}" --epochs 1 -o "$T/q.sqm" "$T/none.sqr"
  [ "$(wc -l < "$T/q.run")" -eq 2 ]
}

@test "run_budget.sh: no record gives '-'; an empty SPEC '-'; bad words and usage refused" {
  printf 'device: cpu\nargs: --epochs 20 --batch 256 --target random -o m.sqm s.split\n' > "$T/m.run"
  run -0 sh "$SEQREC_ROOT/pipelines/run_budget.sh" "$T/none.run" "--epochs>=5"
  [ "$output" = "-	-" ]
  run -0 sh "$SEQREC_ROOT/pipelines/run_budget.sh" "$T/m.run" ""
  [ "$output" = "cpu	-" ]
  run -0 sh "$SEQREC_ROOT/pipelines/run_budget.sh" "$T/m.run" "--target!=random --target=last|windows"
  [ "$output" = "cpu	target random, target random (paper last or windows)" ]
  # an option not given meets != and fails = and >=
  run -0 sh "$SEQREC_ROOT/pipelines/run_budget.sh" "$T/m.run" "--neg!=1 --neg>=2"
  [ "$output" = "cpu	neg unset of 2" ]
  for bad in "epochs>=5" "--epochs>5" "--epochs>=many" "--epochs=" "--Epochs=5"; do
    run -65 sh "$SEQREC_ROOT/pipelines/run_budget.sh" "$T/m.run" "$bad"
    [[ "$output" == *"bad budget word \"$bad\""* ]]
  done
  # a bad word is refused even with no record to judge
  run -65 sh "$SEQREC_ROOT/pipelines/run_budget.sh" "$T/none.run" "--epochs>5"
  run -64 sh "$SEQREC_ROOT/pipelines/run_budget.sh" "$T/m.run"
  [[ "$output" == *"usage"* ]]
}
