#!/usr/bin/env bats
# seqrec-train: determinism, resume after SIGKILL, divergence, bad inputs,
# and SASRec learning what popularity cannot. Tiny data and models only.

load helper

setup() {
  common_setup
  # 300 users, 100 items: a strong successor signal (seqrec-synth(1))
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--dim 16 --ffn 32 --max-len 20 --batch 32 --threads 2)
}


@test "train: --help and --version" {
  run seqrec-train --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"Usage: seqrec-train"* ]]
  [[ "$output" == *"--resume CKPT"* ]]
  run seqrec-train --version
  [ "$status" -eq 0 ]
  [[ "$output" == "seqrec-train (seqrec) "* ]]
}

@test "train: --help shows each model's own default of a shared option, and only where it differs" {
  run -0 seqrec-train --help
  # the lines under --max-len: ELASTIC 256, Caser 5, HSTU 200; SASRec's 50 is the option's own
  block=$(printf '%s\n' "$output" | sed -n '/^  --max-len N/,/^  --[a-z]/p')
  for kv in "256 elastic" "5 caser" "200 hstu" "100 blin"; do
    [[ "$block" == *"(default ${kv% *} with --model ${kv#* })"* ]] || { echo "$block"; echo "missing $kv"; false; }
  done
  [[ "$block" != *"with --model bert4rec"* ]]
  # attention kinds' options have no per-model default
  kinds=$(printf '%s\n' "$output" | sed -n '/^  --rank K/,/^  --[a-z]/p')
  [[ "$kinds" != *"with --model"* ]]
}

@test "train: one JSON line per epoch, model and checkpoint written" {
  mkdir "$T/o"
  run --separate-stderr seqrec-train "${TINY[@]}" --epochs 3 -o "$T/o/m.sqm" "$T/s.sqr"
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  [ "${#stderr_lines[@]}" -eq 3 ]
  [[ "${stderr_lines[0]}" =~ ^\{\"epoch\":1,\"loss\":[0-9.]+,\"valid\":\{\"hr@10\":[0-9.]+,\"ndcg@10\":[0-9.]+,\"mrr@10\":[0-9.]+\},\"seconds\":[0-9.]+,\"train_seconds\":[0-9.]+,\"eval_seconds\":[0-9.]+,\"seq_per_s\":[0-9.]+,\"max_rss_mib\":[0-9]+\.[0-9]\}$ ]]
  [ -s "$T/o/m.sqm" ]
  [ -s "$T/o/m.sqm.ckpt" ]
  no_leftovers "$T/o" m.sqm m.sqm.ckpt
}

@test "train: same seed and threads give the same model and log (bce, --target last)" {
  for i in 1 2; do
    seqrec-train "${TINY[@]}" --epochs 2 --loss bce --neg 2 --dropout 0.3 --log "$T/log$i" \
      -o "$T/m$i.sqm" "$T/s.sqr"
    seqrec-train "${TINY[@]}" --epochs 1 --target last --eval-every 2 --log "$T/last$i" \
      -o "$T/l$i.sqm" "$T/s.sqr"
  done
  cmp "$T/m1.sqm" "$T/m2.sqm"
  cmp "$T/l1.sqm" "$T/l2.sqm"
  diff <(strip_times "$T/log1") <(strip_times "$T/log2")
  diff <(strip_times "$T/last1") <(strip_times "$T/last2")
  # another seed, another model
  seqrec-train "${TINY[@]}" --epochs 2 --loss bce --neg 2 --dropout 0.3 --seed 2 \
    --log /dev/null -o "$T/m3.sqm" "$T/s.sqr"
  ! cmp -s "$T/m1.sqm" "$T/m3.sqm" || false
}

@test "train: --target random: one drawn prefix per user, seeded; blin refuses it" {
  for i in 1 2; do
    seqrec-train "${TINY[@]}" --epochs 2 --target random --loss bce --neg 2 --log "$T/r$i" \
      -o "$T/r$i.sqm" "$T/s.sqr"
  done
  cmp "$T/r1.sqm" "$T/r2.sqm"
  diff <(strip_times "$T/r1") <(strip_times "$T/r2")
  grep -a -q "train.target=random" "$T/r1.sqm"
  # not the model of --target all
  seqrec-train "${TINY[@]}" --epochs 1 --log /dev/null -o "$T/a.sqm" "$T/s.sqr"
  ! cmp -s "$T/r1.sqm" "$T/a.sqm" || false
  seqrec-train "${TINY[@]}" --model bert4rec --epochs 1 --target random --log /dev/null \
    -o "$T/b.sqm" "$T/s.sqr"
  run seqrec-train "${TINY[@]}" --model blin --target random -o "$T/x.sqm" "$T/s.sqr"
  [ "$status" -eq 64 ]
  [[ "$output" == *"--target random is not available"* ]]
}

@test "train: a run killed with SIGKILL and resumed ends bit-identical" {
  # big enough that an epoch takes a noticeable time
  seqrec-synth --users 1500 --items 300 --seed 3 --format stream | seqrec-split 2>/dev/null > "$T/big.sqr"
  opts=(--dim 32 --ffn 64 --max-len 30 --batch 64 --threads 2 --epochs 12 --patience 0 --dropout 0.2)
  seqrec-train "${opts[@]}" --log "$T/full.log" -o "$T/full.sqm" "$T/big.sqr"
  seqrec-train "${opts[@]}" --log "$T/cut.log" -o "$T/cut.sqm" "$T/big.sqr" &
  pid=$!
  for _ in $(seq 600); do
    [ -e "$T/cut.sqm.ckpt" ] && [ "$(wc -l < "$T/cut.log")" -ge 2 ] && break
    sleep 0.05
  done
  kill -9 $pid
  wait $pid || true
  done_epochs=$(wc -l < "$T/cut.log")
  [ "$done_epochs" -lt 12 ]
  seqrec-train --resume "$T/cut.sqm.ckpt" --threads 2 --log "$T/cut.log" "$T/big.sqr"
  cmp "$T/full.sqm" "$T/cut.sqm"
  # the resumed log goes on where the checkpoint was: epochs 1..12, some twice
  [ "$(tail -n 1 "$T/cut.log" | cut -c1-12)" = '{"epoch":12,' ]
  # resuming a finished run rewrites the same model
  seqrec-train --resume "$T/cut.sqm.ckpt" --threads 2 --log /dev/null "$T/big.sqr"
  cmp "$T/full.sqm" "$T/cut.sqm"
}

@test "train: --resume without the split says to give it again (terminal 64, empty 65)" {
  seqrec-train "${TINY[@]}" --epochs 1 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  cp "$T/m.sqm" "$T/before.sqm"
  hint="--resume needs the training split again: seqrec-train --resume $T/m.sqm.ckpt ... SPLIT"
  run -65 seqrec-train --resume "$T/m.sqm.ckpt" --epochs 2 < /dev/null
  [ "$output" = "seqrec-train: <stdin>: byte 0: empty input ($hint)" ]
  cmp "$T/m.sqm" "$T/before.sqm"
  if command -v script >/dev/null; then
    run -64 timeout 20 script -qec "seqrec-train --resume '$T/m.sqm.ckpt' --epochs 2" /dev/null
    [[ "$output" == *"seqrec-train: $hint (standard input is a terminal)"* ]]
  fi
  # the split on standard input is still fine
  seqrec-train --resume "$T/m.sqm.ckpt" --epochs 2 --log /dev/null < "$T/s.sqr"
}

@test "train: --epochs 0 is refused for a fresh run (64), kept for --init and --resume" {
  mkdir "$T/o"
  run -64 seqrec-train "${TINY[@]}" --epochs 0 -o "$T/o/m.sqm" "$T/s.sqr"
  [ "${lines[0]}" = "seqrec-train: --epochs must be at least 1 (0 only with --init or --resume)" ]
  no_leftovers "$T/o"
  seqrec-train "${TINY[@]}" --epochs 1 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  seqrec-train --init "$T/m.sqm" --epochs 0 --log /dev/null -o "$T/o/x.sqm" "$T/s.sqr"
  seqrec-train --resume "$T/m.sqm.ckpt" --epochs 0 --log /dev/null "$T/s.sqr"
  # a one-pass model has no epochs: --epochs is not its business
  seqrec-train --model pop --epochs 0 --log /dev/null -o "$T/o/p.sqm" "$T/s.sqr"
}

@test "train: --resume refuses another dataset and changed options" {
  seqrec-train "${TINY[@]}" --epochs 1 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  seqrec-synth --users 50 --items 40 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/other.sqr"
  run seqrec-train --resume "$T/m.sqm.ckpt" --log /dev/null "$T/other.sqr"
  [ "$status" -eq 65 ]
  [[ "$output" == *"trained on 100 items"* ]]
  run seqrec-train --resume "$T/m.sqm.ckpt" --lr 0.1 "$T/s.sqr"
  [ "$status" -eq 64 ]
  [[ "$output" == *"--lr cannot be given with --resume"* ]]
  run seqrec-train --resume "$T/nothing.ckpt" "$T/s.sqr"
  [ "$status" -eq 66 ]
  run seqrec-train --resume "$T/s.sqr" -o "$T/x.sqm" "$T/s.sqr"
  [ "$status" -eq 65 ]
}

@test "train: a diverging run stops with 70 and a clear message" {
  run seqrec-train "${TINY[@]}" --epochs 3 --lr 1e6 -o "$T/d.sqm" "$T/s.sqr"
  [ "$status" -eq 70 ]
  [[ "$output" == *"training diverged in epoch 1"* ]]
  [[ "$output" == *"no model written"* ]]
  [ ! -e "$T/d.sqm" ]
  [ ! -e "$T/d.sqm.ckpt" ]
  # a model from an earlier run is kept as it was
  seqrec-train "${TINY[@]}" --epochs 1 --log /dev/null -o "$T/d.sqm" "$T/s.sqr"
  cp "$T/d.sqm" "$T/keep.sqm"
  run seqrec-train "${TINY[@]}" --epochs 3 --lr 1e6 --loss bce -o "$T/d.sqm" "$T/s.sqr"
  [ "$status" -eq 70 ]
  cmp "$T/d.sqm" "$T/keep.sqm"
}

@test "train: bad inputs" {
  run seqrec-train -o "$T/m.sqm" "$T/missing.sqr"
  [ "$status" -eq 66 ]
  seqrec-synth --users 20 --items 30 --seed 1 --format stream > "$T/seq.sqr"
  run seqrec-train -o "$T/m.sqm" "$T/seq.sqr"
  [ "$status" -eq 65 ]
  [[ "$output" == *"$T/seq.sqr: byte 6: expected a split or padded stream, got sequences"* ]]
  # issue 40: the message names only the kinds train takes, whatever it gets
  printf '1\t5\t100\t3\n' > "$T/r.txt"
  seqrec-cat --from-text ranks -o "$T/r.sqr" "$T/r.txt"
  run -65 seqrec-train -o "$T/m.sqm" "$T/r.sqr"
  [[ "$output" == *"$T/r.sqr: byte 6: expected a split or padded stream, got ranks"* ]]
  head -c 300 "$T/s.sqr" > "$T/cut.sqr"
  run seqrec-train -o "$T/m.sqm" "$T/cut.sqr"
  [ "$status" -eq 65 ]
  # nothing to learn from: an empty split, or every item held out (every
  # model, one-pass ones too)
  seqrec-cat --from-text split -o "$T/empty.sqr" /dev/null
  printf '1\t\t6\t7\n2\t\t3\t4\n' | seqrec-cat --from-text split -o "$T/held.sqr"
  for m in sasrec pop; do
    run -65 seqrec-train --model $m -o "$T/m.sqm" "$T/empty.sqr"
    [[ "$output" == *"$T/empty.sqr: an empty stream (0 records, 0 items): nothing to train on"* ]]
    run -65 seqrec-train --model $m -o "$T/m.sqm" "$T/held.sqr"
    [[ "$output" == *"$T/held.sqr: no user has a training item (every item is held out)"* ]]
  done
  run seqrec-train "${TINY[@]}" -o "$T/no/such/dir/m.sqm" "$T/s.sqr"
  [ "$status" -eq 73 ]
  for bad in "--dim 0" "--heads 3" "--dropout 1" "--lr -1" "--loss mse" "--model gru" \
             "--target first" "--batch x" "--epochs -1" "--eval-every 0" "--seed 1.5" \
             "--neg 0" "--bogus"; do
    run seqrec-train $bad -o "$T/m.sqm" "$T/s.sqr"
    [ "$status" -eq 64 ] || { echo "$bad: $status"; false; }
  done
  run seqrec-train "$T/s.sqr"
  [ "$status" -eq 64 ]
  [[ "$output" == *"-o MODEL"* ]]
  no_leftovers "$T" s.sqr seq.sqr cut.sqr r.txt r.sqr empty.sqr held.sqr
}

@test "train: SASRec beats popularity on validation NDCG@10" {
  run --separate-stderr seqrec-train --model pop -o "$T/pop.sqm" "$T/s.sqr"
  [ "$status" -eq 0 ]
  pop=$(sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' <<< "$stderr")
  seqrec-train --dim 32 --ffn 64 --max-len 20 --batch 32 --threads 2 --dropout 0.1 --lr 3e-3 \
    --epochs 8 --log "$T/log" -o "$T/m.sqm" "$T/s.sqr"
  sas=$(tail -n 1 "$T/log" | sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p')
  echo "pop $pop sasrec $sas"
  awk -v p="$pop" -v s="$sas" 'BEGIN { exit !(s > 2 * p && s > 0.3) }'
}

@test "train: seqrec-score on the model reproduces the validation NDCG@10 of the log" {
  seqrec-train "${TINY[@]}" --epochs 2 --log "$T/log" -o "$T/m.sqm" "$T/s.sqr"
  best=$(sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' "$T/log" | sort -g | tail -n 1)
  seqrec-score -m "$T/m.sqm" --target valid "$T/s.sqr" | seqrec-metrics --json -k 10 > "$T/metrics"
  cat "$T/metrics"
  got=$(sed -n 's/.*"ndcg@10": *\([0-9.]*\).*/\1/p' "$T/metrics")
  echo "log $best score $got"
  awk -v a="$best" -v b="$got" 'BEGIN { d = a - b; exit !(d < 5e-6 && d > -5e-6) }'
}

@test "train: a padded stream trains as it is (zero and randompad rows)" {
  seqrec-pad --len 20 "$T/s.sqr" > "$T/zero.sqr"
  seqrec-pad --len 20 --mode randompad --copies 2 "$T/s.sqr" > "$T/rp.sqr"
  for f in zero rp; do
    run --separate-stderr seqrec-train --dim 16 --ffn 32 --batch 32 --threads 2 --epochs 2 \
      -o "$T/$f.sqm" "$T/$f.sqr"
    [ "$status" -eq 0 ]
    [ "${#stderr_lines[@]}" -eq 2 ]
    seqrec-score -m "$T/$f.sqm" "$T/$f.sqr" > /dev/null
  done
}

# Without clipping the update sums the threads' gradients inside Adam, in
# the micro-batches' parallel region; with --clip the sum, the norm and
# Adam follow the step. A bound never reached must give the same tensors,
# bit for bit; one that is reached must change them.
@test "train: --clip with a bound never reached trains the same tensors as no clipping (1 and 2 threads)" {
  for t in 1 2; do
    for c in 0 1e9 0.05; do
      seqrec-train "${TINY[@]}" --threads "$t" --epochs 2 --clip "$c" -o "$T/c$t-$c.sqm" "$T/s.sqr" 2>/dev/null
    done
    same=0 differ=0 n=0
    for tn in $(seqrec-export -m "$T/c$t-0.sqm" --list | cut -f1); do
      n=$((n + 1))
      seqrec-export -m "$T/c$t-0.sqm" -t "$tn" -f npy -o "$T/a.npy"
      seqrec-export -m "$T/c$t-1e9.sqm" -t "$tn" -f npy -o "$T/b.npy"
      seqrec-export -m "$T/c$t-0.05.sqm" -t "$tn" -f npy -o "$T/c.npy"
      cmp -s "$T/a.npy" "$T/b.npy" && same=$((same + 1))
      cmp -s "$T/a.npy" "$T/c.npy" || differ=$((differ + 1))
    done
    echo "threads $t: $same of $n tensors the same, $differ changed by clipping"
    [ "$n" -gt 10 ]
    [ "$same" -eq "$n" ]
    [ "$differ" -gt 0 ]
  done
}

@test "train: a loss that rises 10x is warned about in the epoch line; --max-loss stops with 70" {
  run --separate-stderr seqrec-train "${TINY[@]}" --epochs 2 --lr 30 -o "$T/hot.sqm" "$T/s.sqr"
  [ "$status" -eq 0 ]
  [[ "${stderr_lines[0]}" =~ \"warning\":\"the\ loss\ rose\ to\ [0-9.e+]+x\ its\ first\ value ]]
  python3 -c 'import json, sys; [json.loads(l) for l in sys.stdin]' <<< "$stderr"
  # a sane run has no warning
  run --separate-stderr seqrec-train "${TINY[@]}" --epochs 2 -o "$T/ok.sqm" "$T/s.sqr"
  [[ "$stderr" != *warning* ]]
  run seqrec-train "${TINY[@]}" --epochs 2 --lr 30 --max-loss 50 -o "$T/stop.sqm" "$T/s.sqr"
  [ "$status" -eq 70 ]
  [[ "$output" == *"above --max-loss"* ]]
  run seqrec-train "${TINY[@]}" --max-loss -1 -o "$T/x.sqm" "$T/s.sqr"
  [ "$status" -eq 64 ]
}

@test "train: -o a device or FIFO is 73 before training, no checkpoint beside it (issue 40)" {
  mkdir "$T/o"
  mkfifo "$T/o/fifo"
  run -73 timeout 60 seqrec-train "${TINY[@]}" --epochs 1 -o "$T/o/fifo" "$T/s.sqr"
  [ "$output" = "seqrec-train: -o $T/o/fifo: not a regular file" ]
  run -73 timeout 60 seqrec-train --model pop -o "$T/o/fifo" "$T/s.sqr"
  if [ "$(id -u)" = 0 ] && mknod "$T/o/dev" c 1 3 2>/dev/null; then
    run -73 seqrec-train "${TINY[@]}" --epochs 1 -o "$T/o/dev" "$T/s.sqr"
    [ "$output" = "seqrec-train: -o $T/o/dev: not a regular file" ]
    no_leftovers "$T/o" fifo dev
  fi
  no_leftovers "$T/o" fifo dev
}

@test "train: OpenBLAS buffers that do not fit ulimit -v: 71 at once, not a spin (issue 40)" {
  ldd "$SEQREC_BIN/seqrec-train" | grep -q libasan && skip "ASan reserves more address space than the limit"
  mkdir "$T/o"
  run -71 timeout 60 bash -c "ulimit -v 250000; seqrec-train ${TINY[*]} --epochs 1 -o '$T/o/m.sqm' '$T/s.sqr'"
  [[ "$output" == *"out of memory: 2 threads and their 128 MiB OpenBLAS buffers do not fit the address-space limit (ulimit -v 250000)"* ]]
  no_leftovers "$T/o"
  # one thread fits; popularity needs no OpenBLAS at all
  run -0 timeout 120 bash -c "ulimit -v 250000; seqrec-train ${TINY[*]} --threads 1 --epochs 1 --log /dev/null -o '$T/o/m.sqm' '$T/s.sqr'"
  run -0 bash -c "ulimit -v 120000; seqrec-train --model pop --threads 2 -o '$T/o/p.sqm' '$T/s.sqr'"
}
