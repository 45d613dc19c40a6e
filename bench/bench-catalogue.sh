#!/bin/sh
# bench/bench-catalogue.sh BIN OUTDIR PEAK - `make bench-catalogue` (issue
# 38): what a catalogue of N items costs SASRec's training with each loss.
# For every N of CAT_ITEMS (default 10000 100000 1000000 10000000; the
# first is the base) a seeded synthetic log (seqrec-synth --items N --users
# CAT_USERS --seed 7, split leave-one-out) and, for every loss of
# CAT_LOSSES (default "ce ssm:128 ssm:1024 ssm:4096 gbce:128 ssm:128+seq
# ssm:1024+seq gbce:128+seq ssm:128+batch ssm:1024+batch ssm:4096+batch
# gbce:128+batch": full CE, the sampled softmax with K negatives from
# CAT_SAMPLER (default uniform), gBCE with K uniform negatives and t 0.75;
# a word ending in +seq or +batch trains with --neg-share sequence or batch
# and --lazy-adam, the update column saying which):
#   timing   CAT_EPOCHS epochs (default 2) on the split without its
#            validation and test items (no validation to wait for):
#            epoch_seconds the least train_seconds of the log (the batches
#            only), max_rss_mib the process's peak resident memory (the
#            log's getrusage), vs_base the epoch time over the same loss's
#            at the base N (empty where that one reads 0: under the log's
#            microsecond, there is no ratio to give). Full CE above CAT_CE_MAX items (default
#            1000000) is not run (its row says so): a 10M-column GEMM a
#            position.
#   quality  for N in CAT_QUALITY_ITEMS (default "10000 100000"; empty:
#            none), a log of CAT_QUALITY_USERS users (default 5000: enough
#            that the items recur and there is something to learn) trained
#            with validation for a fixed budget of training time: one epoch,
#            then --resume one more at a time while the log's train_seconds
#            sum to less than CAT_BUDGET (default 30 s; at most
#            CAT_MAX_EPOCHS, default 200), and the best validation NDCG@10
#            and HR@10 (full ranking) the log reached.
# The model: SASRec --dim 32 --ffn 32 --layers 2 --heads 1 --max-len 50
# --batch 128 --dropout 0.2 --threads 2 (CAT_MODEL_ARGS replaces it); the
# log's mean length CAT_LEN (default 20). Into OUTDIR/catalogue.csv after
# the machine lines (timing.sh):
#   bench,items,loss,neg,sampler,update,epoch_seconds,max_rss_mib,vs_base
#   quality,items,loss,neg,sampler,update,budget_seconds,epochs,train_seconds,ndcg@10,hr@10
# (update: adam, K negatives a position and exact Adam; seq+lazy and
# batch+lazy, --neg-share sequence or batch with --lazy-adam)
# and OUTDIR/catalogue.png (bench/catalogue.gnuplot) when gnuplot is there.
# Timings on a shared machine are noisy; nothing asserts them.
set -eu
BIN=$1 OUT=$2 PEAK=$3
CAT_ITEMS=${CAT_ITEMS:-10000 100000 1000000 10000000}
CAT_USERS=${CAT_USERS:-500}
CAT_LEN=${CAT_LEN:-20}
CAT_LOSSES=${CAT_LOSSES:-ce ssm:128 ssm:1024 ssm:4096 gbce:128 ssm:128+seq ssm:1024+seq gbce:128+seq ssm:128+batch ssm:1024+batch ssm:4096+batch gbce:128+batch}
CAT_SAMPLER=${CAT_SAMPLER:-uniform}
CAT_CE_MAX=${CAT_CE_MAX:-1000000}
CAT_EPOCHS=${CAT_EPOCHS:-2}
CAT_QUALITY_ITEMS=${CAT_QUALITY_ITEMS-10000 100000}
CAT_QUALITY_USERS=${CAT_QUALITY_USERS:-5000}
CAT_BUDGET=${CAT_BUDGET:-30}
CAT_MAX_EPOCHS=${CAT_MAX_EPOCHS:-200}
CAT_MODEL_ARGS=${CAT_MODEL_ARGS:---dim 32 --ffn 32 --layers 2 --heads 1 --max-len 50 --batch 128 --dropout 0.2 --threads 2}
here=$(dirname "$0")
. "$here/timing.sh"
CSV=$OUT/catalogue.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$OUT"
rm -f "$CSV"
machine_lines "$CSV" catalogue "$PEAK"
{
  echo "catalogue,users,$CAT_USERS"
  echo "catalogue,mean_len,$CAT_LEN"
  echo "catalogue,epochs,$CAT_EPOCHS"
  echo "catalogue,budget_seconds,$CAT_BUDGET"
  echo "catalogue,quality_users,$CAT_QUALITY_USERS"
  echo "catalogue,max_epochs,$CAT_MAX_EPOCHS"
  echo "catalogue,model,sasrec $CAT_MODEL_ARGS --seed 1"
} | tee -a "$CSV"

# loss_args SPEC: seqrec-train's options of a CAT_LOSSES word
loss_args() {
  case $1 in
    ce) echo "--loss ce" ;;
    ssm:*+seq|ssm:*+batch) echo "--loss sampled-softmax --neg $(loss_neg "$1") --neg-sampler $CAT_SAMPLER $(share_args "$1")" ;;
    gbce:*+seq|gbce:*+batch) echo "--loss gbce --neg $(loss_neg "$1") --gbce-t 0.75 $(share_args "$1")" ;;
    *+*|ssm:*:*|gbce:*:*) echo "bench-catalogue: CAT_LOSSES: $1: the suffixes are +seq and +batch" >&2; exit 64 ;;
    ssm:*) echo "--loss sampled-softmax --neg ${1#ssm:} --neg-sampler $CAT_SAMPLER" ;;
    gbce:*) echo "--loss gbce --neg ${1#gbce:} --gbce-t 0.75" ;;
    *) echo "bench-catalogue: CAT_LOSSES: $1 is none of ce, ssm:K[+seq|+batch], gbce:K[+seq|+batch]" >&2; exit 64 ;;
  esac
}
loss_name() { case $1 in ce) echo ce ;; ssm:*) echo sampled-softmax ;; *) echo gbce ;; esac; }
loss_neg() { case $1 in *:*) k=${1#*:}; echo "${k%%+*}" ;; *) echo 0 ;; esac; }
loss_sampler() { case $1 in ssm:*) echo "$CAT_SAMPLER" ;; gbce:*) echo uniform ;; *) echo - ;; esac; }
loss_update() { case $1 in *+seq) echo seq+lazy ;; *+batch) echo batch+lazy ;; *) echo adam ;; esac; }
share_args() { case $1 in *+seq) echo "--neg-share sequence --lazy-adam" ;; *) echo "--neg-share batch --lazy-adam" ;; esac; }
for l in $CAT_LOSSES; do loss_args "$l" >/dev/null; done

# train LOG SPLIT EPOCHS SPEC: one seeded run (model file thrown away)
train() {
  # shellcheck disable=SC2046,SC2086
  "$BIN/seqrec-train" --model sasrec $CAT_MODEL_ARGS $(loss_args "$4") --seed 1 \
    --epochs "$3" --patience 0 --log "$1" -o "$tmp/m.sqm" "$2" 2>/dev/null ||
    { echo "bench-catalogue: seqrec-train $(loss_args "$4") on $2 failed" >&2; exit 1; }
  rm -f "$tmp/m.sqm" "$tmp/m.sqm.ckpt"
}
least() { sed -n 's/.*"train_seconds":\([0-9.]*\).*/\1/p' "$1" | sort -g | head -n 1; }
peak() { sed -n 's/.*"max_rss_mib":\([0-9.]*\).*/\1/p' "$1" | sort -g | tail -n 1; }
best_of() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" "$2" | sort -g | tail -n 1; }
# qtrain LOG SPLIT SPEC: epochs until the log's train_seconds reach CAT_BUDGET
qtrain() {
  rm -f "$1"
  # shellcheck disable=SC2046,SC2086
  "$BIN/seqrec-train" --model sasrec $CAT_MODEL_ARGS $(loss_args "$3") --seed 1 --epochs 1 \
    --patience 0 --log "$1" -o "$tmp/q.sqm" "$2" 2>/dev/null ||
    { echo "bench-catalogue: seqrec-train $(loss_args "$3") on $2 failed" >&2; exit 1; }
  e=1
  threads=$(echo "$CAT_MODEL_ARGS" | sed -n 's/.*--threads \([0-9]*\).*/\1/p')
  while [ "$e" -lt "$CAT_MAX_EPOCHS" ] &&
        awk -v s="$(sum_train "$1")" -v b="$CAT_BUDGET" 'BEGIN {exit !(s < b)}'; do
    e=$((e + 1))
    "$BIN/seqrec-train" --resume "$tmp/q.sqm.ckpt" --epochs "$e" --threads "${threads:-2}" \
      --log "$1" "$2" 2>/dev/null || { echo "bench-catalogue: resume to $e failed" >&2; exit 1; }
  done
  rm -f "$tmp/q.sqm" "$tmp/q.sqm.ckpt"
}
sum_train() { sed -n 's/.*"train_seconds":\([0-9.]*\).*/\1/p' "$1" | awk '{s += $1} END {printf "%.3f", s}'; }

echo "bench,items,loss,neg,sampler,update,epoch_seconds,max_rss_mib,vs_base" | tee -a "$CSV"
base=""
for n in $CAT_ITEMS; do
  [ -n "$base" ] || base=$n
  echo "bench-catalogue: $n items ($(date +%T))" >&2
  "$BIN/seqrec-synth" --items "$n" --users "$CAT_USERS" --mean-len "$CAT_LEN" --seed 7 \
    --format stream | "$BIN/seqrec-split" --leave-one-out -o "$tmp/$n.split" 2>/dev/null
  # the training part alone: no validation or test items
  "$BIN/seqrec-cat" --no-ts "$tmp/$n.split" | awk -F '\t' 'BEGIN {OFS = "\t"} {$3 = ""; $4 = ""; print}' |
    "$BIN/seqrec-cat" --from-text split --n-items "$n" -o "$tmp/$n.train"
  for l in $CAT_LOSSES; do
    key=$(echo "$l" | tr ':+' '__')
    row="catalogue,$n,$(loss_name "$l"),$(loss_neg "$l"),$(loss_sampler "$l"),$(loss_update "$l")"
    if [ "$l" = ce ] && [ "$n" -gt "$CAT_CE_MAX" ]; then
      echo "$row,,,skipped (ce above CAT_CE_MAX $CAT_CE_MAX)" | tee -a "$CSV"
      continue
    fi
    if [ "$(loss_neg "$l")" -ge "$n" ]; then
      echo "$row,,,skipped (K not below n_items)" | tee -a "$CSV"
      continue
    fi
    echo "bench-catalogue: $n items, $l ($(date +%T))" >&2
    train "$tmp/$n-$key.log" "$tmp/$n.train" "$CAT_EPOCHS" "$l"
    sec=$(least "$tmp/$n-$key.log")
    [ "$n" = "$base" ] && eval "base_$key=$sec"
    b=$(eval "echo \${base_$key:-}")
    vs=$(awk -v a="$sec" -v b="$b" 'BEGIN {if (b > 0) printf "%.2f", a / b}')
    echo "$row,$sec,$(peak "$tmp/$n-$key.log"),$vs" | tee -a "$CSV"
  done
done

echo "quality,items,loss,neg,sampler,update,budget_seconds,epochs,train_seconds,ndcg@10,hr@10" | tee -a "$CSV"
for n in $CAT_QUALITY_ITEMS; do
  [ -r "$tmp/$n.split" ] || { echo "bench-catalogue: CAT_QUALITY_ITEMS: $n is not in CAT_ITEMS" >&2; exit 64; }
  "$BIN/seqrec-synth" --items "$n" --users "$CAT_QUALITY_USERS" --mean-len "$CAT_LEN" --seed 7 \
    --format stream | "$BIN/seqrec-split" --leave-one-out -o "$tmp/q$n.split" 2>/dev/null
  for l in $CAT_LOSSES; do
    key=$(echo "$l" | tr ':+' '__')
    [ -s "$tmp/$n-$key.log" ] || continue
    echo "bench-catalogue: quality, $n items, $l ($(date +%T))" >&2
    qtrain "$tmp/q.log" "$tmp/q$n.split" "$l"
    ep=$(grep -c '"train_seconds"' "$tmp/q.log")
    echo "catalogue-quality,$n,$(loss_name "$l"),$(loss_neg "$l"),$(loss_sampler "$l"),$(loss_update "$l"),$CAT_BUDGET,$ep,$(sum_train "$tmp/q.log"),$(best_of ndcg@10 "$tmp/q.log"),$(best_of hr@10 "$tmp/q.log")" |
      tee -a "$CSV"
  done
done

if command -v gnuplot >/dev/null 2>&1; then
  gnuplot -e "csv='$CSV'; out='$OUT/catalogue.png'; pngcall='$here/../pipelines/png.gp'" \
    "$here/catalogue.gnuplot"
else
  echo "bench-catalogue: gnuplot not found: $CSV written, no PNG" >&2
fi
