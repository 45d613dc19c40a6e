#!/bin/sh
# bench/bench-bert4rec.sh BIN OUT.csv SPLIT - `make bench-bert4rec`: BERT4Rec
# training speed of the C engine and of the same model in PyTorch
# (bench/bert4rec_torch.py, the twin gpu-check's bench times on a GPU), in
# one run, the same data and threads: N 50, d 64, ffn 256, 2 layers, 2
# heads, batch 256, dropout 0.2, cloze masks with probability 0.2, the full
# cross-entropy over every item at the masked positions. CSV lines
# "bert4rec,metric,value": the machine lines (timing.sh), then epochs,
# threads, users, items, each side's median epoch seconds and sequences a
# second over EPOCHS epochs (training steps only), the speedup (C over
# PyTorch) and each side's last epoch's mean batch loss (the twin draws its
# own initial weights and masks: the losses track each other, they are not
# equal). Knobs: EPOCHS (default 2), THREADS (default 2), TORCH_PYTHON
# (the interpreter with torch; default the first python3 that imports it;
# none: the PyTorch half is skipped with a line saying so). Timings on a
# shared machine are noisy; nothing asserts them.
set -eu
BIN=$1 CSV=$2 SPLIT=$3
EPOCHS=${EPOCHS:-2} THREADS=${THREADS:-2}
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
SHAPE="--max-len 50 --dim 64 --ffn 256 --layers 2 --heads 2 --batch 256 --dropout 0.2"
SHAPE="$SHAPE --mask-prob 0.2"

out() { echo "bert4rec,$1,$2" | tee -a "$CSV"; }
. "$here/timing.sh"
machine_lines "$CSV" bert4rec

items=$("$BIN/seqrec-cat" -H "$SPLIT" | awk '$1 == "n_items" {print $2}')
users=$("$BIN/seqrec-cat" "$SPLIT" | awk -F '\t' '{ if (split($2, a, " ") >= 2) u++ } END { print u + 0 }')
out epochs "$EPOCHS"
out threads "$THREADS"
out users "$users"
out items "$items"

# C (the validation after the last epoch is not in train_seconds)
# shellcheck disable=SC2086
"$BIN/seqrec-train" --model bert4rec --attn softmax --loss ce $SHAPE --seed 1 \
  --threads "$THREADS" --epochs "$EPOCHS" --eval-every 1000 --log "$tmp/c.log" -o "$tmp/m.sqm" \
  "$SPLIT" > "$tmp/c.out" 2>&1 ||
  { echo "bench-bert4rec: seqrec-train failed:" >&2; tail -n 3 "$tmp/c.out" >&2; exit 1; }
c_sps=$(field seq_per_s "$tmp/c.log" | median)
out c_seq_per_s_median "$c_sps"
out c_epoch_seconds_median "$(field train_seconds "$tmp/c.log" | median)"
out c_loss_last "$(field loss "$tmp/c.log" | tail -n 1)"

PY=$(torch_python)
if [ -z "$PY" ]; then
  out torch "skipped: no python3 with torch (apt-get install python3-torch)"
  exit 0
fi
out torch_version "$("$PY" -c 'import torch; print(torch.__version__)')"
# shellcheck disable=SC2086
"$BIN/seqrec-cat" "$SPLIT" | "$PY" "$here/bert4rec_torch.py" $SHAPE --n-items "$items" \
  --epochs "$EPOCHS" --threads "$THREADS" > "$tmp/t.csv" ||
  { echo "bench-bert4rec: bert4rec_torch.py failed" >&2; exit 1; }
t_sps=$(grep seq_per_s "$tmp/t.csv" | cut -d, -f3 | median)
out torch_seq_per_s_median "$t_sps"
out torch_epoch_seconds_median "$(grep epoch_seconds "$tmp/t.csv" | cut -d, -f3 | median)"
out torch_loss_last "$(grep ',loss,' "$tmp/t.csv" | tail -n 1 | cut -d, -f3)"
out speedup "$(ratio "$c_sps" "$t_sps")"
