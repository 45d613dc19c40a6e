#!/bin/sh
# bench/bench-recbole.sh BIN OUT.csv ZIP - time to quality against RecBole:
# RecBole 1.2.1's SASRec and seqrec's SASRec (--block recbole) on
# MovieLens-100K in the same run, same data (u.data unfiltered, leave-one-out
# by timestamp, ties in file order on both sides), same model (d 64, ffn 256,
# 2 layers, 2 heads, N 50, dropout 0.5, CE over every item, Adam lr 1e-3 and
# torch's betas 0.9, 0.999), 2 threads, full ranking, early stopping on
# validation NDCG@10.
# RecBole trains at most EPOCHS epochs; its test NDCG@10 (of its best
# validation epoch) is the bar. Each seqrec mode is trained an epoch at a time
# (--resume), its best-validation model scored on the test set after every
# epoch, until its test NDCG@10 reaches the bar or SEQREC_EPOCHS epochs.
# CSV lines "recbole,metric,value" to OUT.csv; one line an epoch to
# OUT_epochs.csv (system,mode,epoch,train_s,epoch_s,cum_s,valid_ndcg10
# [,test_ndcg10,test_hr10]). RECBOLE_PYTHON: an interpreter with recbole
# (default: bench/.venv/bin/python, made by bench/recbole.mk).
set -eu
BIN=$1 CSV=$2 ZIP=$3
EPOCHS=${EPOCHS:-10} SEQREC_EPOCHS=${SEQREC_EPOCHS:-30} THREADS=${THREADS:-2}
SEQREC_MODES=${SEQREC_MODES:-"windows-s25-b32 windows-b32 last-b256"}
here=$(dirname "$0")
PY=${RECBOLE_PYTHON:-$here/.venv/bin/python}
if ! "$PY" -c 'import recbole.trainer' 2>/dev/null; then
  echo "bench-recbole: skipped: no RecBole for $PY (make bench-recbole makes bench/.venv; RECBOLE_PYTHON=...)"
  exit 0
fi
ECSV=${CSV%.csv}_epochs.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -f "$ECSV"

. "$here/timing.sh"
machine_lines "$CSV" recbole
rv=$("$PY" -c 'import recbole, torch; print(recbole.__version__, torch.__version__)')
echo "recbole,versions,$rv" | tee -a "$CSV"
echo "recbole,recbole_epochs_cap,$EPOCHS" | tee -a "$CSV"
"$PY" "$here/recbole_run.py" --zip "$ZIP" --dir "$tmp/rb" --config "$here/recbole.yaml" \
  --epochs "$EPOCHS" --threads "$THREADS" --epochs-csv "$ECSV" > "$tmp/rb.csv"
tee -a "$CSV" < "$tmp/rb.csv"
bar=$(sed -n 's/^recbole,recbole_test_ndcg10,//p' "$tmp/rb.csv")
rb_best=$(sed -n 's/^recbole,recbole_seconds_to_best,//p' "$tmp/rb.csv")

# seqrec: the same split as RecBole's (no filtering, leave-one-out).
"$BIN/seqrec-preprocess" --dataset ml-100k "$ZIP" | "$BIN/seqrec-split" --leave-one-out -o "$tmp/ml.split"
COMMON="--model sasrec --block recbole --dim 64 --ffn 256 --layers 2 --heads 2 --max-len 50 --dropout 0.5 --loss ce --lr 1e-3 --beta2 0.999 --valid-candidates full --stop-metric ndcg@10 --patience 10 --seed 1 --threads $THREADS"
best_t=
for mode in $SEQREC_MODES; do
  # MODE: TARGET[-sSTRIDE]-bBATCH (windows-s10-b32: --window-stride 10)
  target=${mode%%-*} batch=${mode##*-b} stride=
  case $mode in *-s[0-9]*-b*) stride=${mode#*-s}; stride="--window-stride ${stride%%-*}" ;; esac
  m=$tmp/$mode.sqm cum=0 e=1 reached= why="in $SEQREC_EPOCHS epochs"
  while [ "$e" -le "$SEQREC_EPOCHS" ]; do
    if [ "$e" -eq 1 ]; then
      "$BIN/seqrec-train" $COMMON --target "$target" $stride --batch "$batch" \
        --epochs 1 --log "$tmp/e.log" -o "$m" "$tmp/ml.split"
    else
      "$BIN/seqrec-train" --resume "$m.ckpt" --epochs "$e" --threads "$THREADS" --log "$tmp/e.log" "$tmp/ml.split"
    fi
    line=$(tail -n 1 "$tmp/e.log")
    # Early stopping (--patience 10, RecBole's stopping_step): the resumed
    # run trains no further and logs nothing new.
    if [ "$(echo "$line" | sed -n 's/^{"epoch":\([0-9]*\).*/\1/p')" != "$e" ]; then
      why="(stopped by --patience 10 after epoch $((e - 1)))"; break
    fi
    s=$(echo "$line" | sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p')
    ts=$(echo "$line" | sed -n 's/.*"train_seconds":\([0-9.]*\).*/\1/p')
    vn=$(echo "$line" | sed -n 's/.*"valid":{[^}]*"ndcg@10":\([0-9.]*\).*/\1/p')
    cum=$(echo "$cum $s" | awk '{printf "%.2f", $1 + $2}')
    # The model file is the best-validation model so far.
    "$BIN/seqrec-score" -m "$m" -t test "$tmp/ml.split" | "$BIN/seqrec-metrics" -k 10 --json > "$tmp/t.json"
    tn=$(sed -n 's/.*"ndcg@10": *\([0-9.]*\).*/\1/p' "$tmp/t.json")
    th=$(sed -n 's/.*"hr@10": *\([0-9.]*\).*/\1/p' "$tmp/t.json")
    echo "seqrec,$mode,$e,$ts,$s,$cum,$vn,$tn,$th" | tee -a "$ECSV"
    if echo "$tn $bar" | awk '{exit !($1 >= $2)}'; then reached=$cum; break; fi
    e=$((e + 1))
  done
  if [ -n "$reached" ]; then
    echo "recbole,seqrec_seconds_to_recbole_ndcg_$mode,$reached" | tee -a "$CSV"
    echo "recbole,seqrec_epochs_to_recbole_ndcg_$mode,$e" | tee -a "$CSV"
    if [ -z "$best_t" ] || echo "$reached $best_t" | awk '{exit !($1 < $2)}'; then best_t=$reached; fi
  else
    echo "recbole,seqrec_seconds_to_recbole_ndcg_$mode,not reached $why ($cum s; test NDCG@10 $tn)" | tee -a "$CSV"
  fi
done
if [ -n "$best_t" ]; then
  echo "recbole,speedup_time_to_quality,$(echo "$rb_best $best_t" | awk '{printf "%.2f", $1 / $2}')" | tee -a "$CSV"
else
  echo "recbole,speedup_time_to_quality,no seqrec mode reached RecBole's test NDCG@10" | tee -a "$CSV"
fi
