#!/usr/bin/env bats
# tests/gpu/repro.sh, a reproduction's runs on a borrowed GPU within its
# minutes (here on the simulated device, GPU_CHECK_DRY=1, with a pack made
# of this build): make's runs with the pack's programs and DEVICE=cuda,
# each run's state in repro.txt, the outputs packed without the splits,
# and a budget that cuts a run resumed by the next call.

load helper

setup() {
  sim_setup
  PK="$T/pack"
  mkdir -p "$PK/lib"
  ln -s "$SEQREC_BIN" "$PK/bin"
  cp "$SIM" "$PK/lib/libseqrec-cuda.so"
  cp "$SEQREC_ROOT/tests/gpu/cudalibs.sh" "$PK/"
  seqrec-synth --users 40 --items 30 --mean-len 12 --max-len 20 --seed 3 --format stream \
    | seqrec-split --leave-one-out -o "$T/s.split" 2>/dev/null
  # a tiny LinRec reproduction: its split carried as make gpu-repro-splits leaves it
  mkdir -p "$T/r/linrec"
  cp "$T/s.split" "$T/r/linrec/data.split"
  NET="--dim 8 --ffn 8 --layers 1 --heads 1 --dropout 0.2"
}

# rr ARG...: repro.sh from the checkout's root, as on the GPU machine
rr() { (cd "$SEQREC_ROOT" && GPU_CHECK_DRY=1 REPRO_ROOT="$T/r" OUT="$T/out" tests/gpu/repro.sh "$@"); }

@test "gpu repro: the runs train on the device with the pack's programs; repro.txt says each run's state; results and models come back apart" {
  mkdir -p "$T/out"
  run -0 rr "$PK" 5 linrec-runs LINREC_OUT="$T/r/linrec" LINREC_RUNS="sasrec lt" EPOCHS=1 \
    LINREC_MAXLEN=12 LINREC_NET="$NET"
  echo "$output"
  grep -q "^# DRY RUN on the simulated device" "$T/out/repro.txt"
  grep -q "^# make linrec-runs BUILD=$PK DEVICE=cuda GPU_MINUTES=5 " "$T/out/repro.txt"
  grep -q "^# make exit 0 after " "$T/out/repro.txt"
  for r in sasrec lt; do
    grep -q "^$T/r/linrec/$r	done (epochs)	1 epochs logged	cuda$" "$T/out/repro.txt"
    [ -s "$T/r/linrec/$r.json" ]
    # the pack's programs ran it (BUILD=PACK), with --cuda-graphs on the device
    grep -q "^device: cuda$" "$T/r/linrec/$r.run"
  done
  tar -tzf "$T/out/repro.tar.gz" > "$T/list"
  grep -q 'linrec/sasrec.json$' "$T/list"
  grep -q 'linrec/sasrec.log$' "$T/list"
  grep -q 'linrec/sasrec.run$' "$T/list"
  # not the splits, nor a done run's model (apart) or checkpoint (nowhere)
  ! grep -q '\.split$\|\.sqm$\|\.ckpt$' "$T/list"
  tar -tzf "$T/out/repro-models.tar.gz" > "$T/models"
  grep -q 'linrec/lt.sqm$' "$T/models"
  grep -q 'linrec/sasrec.sqm$' "$T/models"
  [ "$(wc -l < "$T/models")" -eq 2 ]
  # unpacked elsewhere, the results and models are the runs' own bytes
  mkdir "$T/back"
  tar -xzf "$T/out/repro.tar.gz" -C "$T/back"
  tar -xzf "$T/out/repro-models.tar.gz" -C "$T/back"
  cmp "$T/back/$T/r/linrec/sasrec.json" "$T/r/linrec/sasrec.json"
  cmp "$T/back/$T/r/linrec/lt.sqm" "$T/r/linrec/lt.sqm"
  # parts of at most REPRO_PART_BYTES, which cat joins; models over it stay behind
  rm -rf "$T/out" && mkdir "$T/out"
  (cd "$SEQREC_ROOT" && GPU_CHECK_DRY=1 REPRO_ROOT="$T/r" OUT="$T/out" REPRO_PART_BYTES=300 \
    tests/gpu/repro.sh "$PK" 5 linrec-runs LINREC_OUT="$T/r/linrec" LINREC_RUNS="sasrec lt")
  [ ! -e "$T/out/repro.tar.gz" ] && [ -s "$T/out/repro.tar.gz.00" ] && [ -s "$T/out/repro.tar.gz.01" ]
  grep -q "^# repro.tar.gz is [0-9]* bytes: in [0-9]* parts" "$T/out/repro.txt"
  cat "$T/out"/repro.tar.gz.* | tar -tz | grep -q 'linrec/lt.json$'
  [ ! -e "$T/out/repro-models.tar.gz" ]
  grep -q "^# the done runs' models ([0-9]* bytes packed) stay on the GPU machine" "$T/out/repro.txt"
}

@test "gpu repro: a run the budget cuts is 'to resume', and the next call finishes it" {
  mkdir -p "$T/out"
  # no minutes left to start in: nothing runs, nothing fails
  run -0 rr "$PK" 0 linrec-runs LINREC_OUT="$T/r/linrec" LINREC_RUNS=sasrec EPOCHS=1 \
    LINREC_MAXLEN=12 LINREC_NET="$NET"
  [[ "$output" == *"budget is spent"* ]]
  [ ! -e "$T/r/linrec/sasrec.json" ]
  # a checkpoint left by a cut run (as a SIGTERM at the budget leaves it)
  seqrec-train --model sasrec --block recbole $NET --target windows --batch 16 --attn softmax --loss ce \
    --lr 1e-3 --beta2 0.999 --max-len 12 --epochs 1 --seed 1 --threads 1 --device cuda --cuda-graphs \
    --log "$T/r/linrec/sasrec.log" -o "$T/x.sqm" "$T/r/linrec/data.split" 2>/dev/null
  mv "$T/x.sqm.ckpt" "$T/r/linrec/sasrec.sqm.ckpt"
  printf 'device: cuda\nargs: --epochs 1\n' > "$T/r/linrec/sasrec.run"
  run -0 rr "$PK" 0 linrec-runs LINREC_OUT="$T/r/linrec" LINREC_RUNS=sasrec EPOCHS=1
  grep -q "^$T/r/linrec/sasrec	to resume	1 epochs logged	cuda$" "$T/out/repro.txt"
  # the checkpoint of a run not done goes back, for the next GPU to resume
  tar -tzf "$T/out/repro.tar.gz" | grep -q 'linrec/sasrec.sqm.ckpt$'
  [ ! -e "$T/out/repro-models.tar.gz" ]
  run -0 rr "$PK" 5 linrec-runs LINREC_OUT="$T/r/linrec" LINREC_RUNS=sasrec EPOCHS=2 \
    LINREC_MAXLEN=12 LINREC_NET="$NET"
  [[ "$output" == *"resumes from its checkpoint"* ]]
  grep -q "^$T/r/linrec/sasrec	done (epochs)	2 epochs logged	cuda$" "$T/out/repro.txt"
  grep -q -- "--epochs 2" "$T/r/linrec/sasrec.run"
}

@test "gpu repro: usage errors are 64" {
  run -64 rr "$PK" 5
  [[ "$output" == *"usage"* ]]
  run -64 rr "$PK" five linrec-runs
  [[ "$output" == *"MINUTES must be a whole number"* ]]
  run -64 rr "$T/nopack" 5 linrec-runs
  mkdir "$T/empty"
  run -64 rr "$T/empty" 5 linrec-runs
  [[ "$output" == *"no pack at"* ]]
}
