#!/bin/sh
# bench/bench-losses.sh BIN OUTDIR NAME:MAXLEN:SPLIT... - `make
# bench-losses` (issue 38): the quality of each next-item loss against full
# CE at equal epochs, per dataset (NAME, its leave-one-out SPLIT, SASRec's
# --max-len MAXLEN). Every loss of LOSS_SET (default "ce bce:1 ssm:128:uniform
# ssm:128:pop:0.75 ssm:127:in-batch ssm:128:mixed gbce:128": full CE,
# SASRec's BCE with K negatives, the sampled softmax with K negatives of a
# sampler, gBCE with K negatives and t 0.75; a word ending in +seq or
# +batch, as ssm:128:uniform+seq, trains with --neg-share sequence or batch
# and --lazy-adam, its sampler column saying "SAMPLER+seq") trains the
# README's SASRec
# (LOSS_MODEL_ARGS, default --dim 64 --ffn 64 --dropout 0.5 --threads 2)
# for LOSS_EPOCHS epochs (default 10, --patience 0; the model kept is the
# best validation epoch's), then seqrec-score ranks the test items against
# every item (history not excluded) and seqrec-metrics gives HR@10 and
# NDCG@10. Into OUTDIR/losses.csv after the machine lines (timing.sh):
#   bench,dataset,loss,neg,sampler,epochs,epoch_seconds,valid_ndcg@10,test_hr@10,test_ndcg@10,ndcg_vs_ce
# (epoch_seconds the median train_seconds of the log; ndcg_vs_ce the test
# NDCG@10 over the ce run's on the dataset, when LOSS_SET has ce first).
set -eu
BIN=$1 OUT=$2
shift 2
LOSS_SET=${LOSS_SET:-ce bce:1 ssm:128:uniform ssm:128:pop:0.75 ssm:127:in-batch ssm:128:mixed gbce:128}
LOSS_EPOCHS=${LOSS_EPOCHS:-10}
LOSS_MODEL_ARGS=${LOSS_MODEL_ARGS:---dim 64 --ffn 64 --dropout 0.5 --threads 2}
here=$(dirname "$0")
. "$here/timing.sh"
CSV=$OUT/losses.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$OUT"
rm -f "$CSV"
machine_lines "$CSV" losses ""
{
  echo "losses,epochs,$LOSS_EPOCHS"
  echo "losses,model,sasrec $LOSS_MODEL_ARGS --seed 1"
  echo "bench,dataset,loss,neg,sampler,epochs,epoch_seconds,valid_ndcg@10,test_hr@10,test_ndcg@10,ndcg_vs_ce"
} | tee -a "$CSV"

# args SPEC: seqrec-train's options of a LOSS_SET word
args() {
  case $1 in
    ssm:*+seq|gbce:*+seq) echo "$(args "${1%+seq}") --neg-share sequence --lazy-adam" ;;
    ssm:*+batch|gbce:*+batch) echo "$(args "${1%+batch}") --neg-share batch --lazy-adam" ;;
    *+*) echo "bench-losses: LOSS_SET: $1: the suffixes are +seq and +batch" >&2; exit 64 ;;
    ce) echo "--loss ce" ;;
    bce:*) echo "--loss bce --neg ${1#bce:}" ;;
    ssm:*:*) k=${1#ssm:}; echo "--loss sampled-softmax --neg ${k%%:*} --neg-sampler ${k#*:}" ;;
    gbce:*) echo "--loss gbce --neg ${1#gbce:} --gbce-t 0.75" ;;
    *) echo "bench-losses: LOSS_SET: $1 is none of ce, bce:K, ssm:K:SAMPLER[+seq|+batch], gbce:K[+seq|+batch]" >&2; exit 64 ;;
  esac
}
for l in $LOSS_SET; do args "$l" >/dev/null; done
name_of() { case $1 in ssm:*) echo sampled-softmax ;; *) echo "${1%%:*}" ;; esac; }
neg_of() { case $1 in ce) echo 0 ;; ssm:*) k=${1#ssm:}; echo "${k%%:*}" ;; *) k=${1#*:}; echo "${k%%+*}" ;; esac; }
sampler_of() { case $1 in ssm:*) k=${1#ssm:}; echo "${k#*:}" ;; gbce:*+*) echo "uniform+${1#*+}" ;; gbce:*) echo uniform ;; bce:*) echo not-in-history ;; *) echo - ;; esac; }
median() { sed -n 's/.*"train_seconds":\([0-9.]*\).*/\1/p' "$1" | sort -g |
  awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'; }
best() { sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' "$1" | sort -g | tail -n 1; }
metric() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" "$2"; }

for spec in "$@"; do
  name=${spec%%:*} rest=${spec#*:}
  maxlen=${rest%%:*} split=${rest#*:}
  [ -r "$split" ] || { echo "bench-losses: $name: no split $split" >&2; exit 66; }
  ce=""
  for l in $LOSS_SET; do
    echo "bench-losses: $name, $l ($(date +%T))" >&2
    # shellcheck disable=SC2046,SC2086
    "$BIN/seqrec-train" --model sasrec $LOSS_MODEL_ARGS --max-len "$maxlen" $(args "$l") \
      --seed 1 --epochs "$LOSS_EPOCHS" --patience 0 --log "$tmp/log" -o "$tmp/m.sqm" "$split" \
      2>/dev/null || { echo "bench-losses: $name $l: seqrec-train failed" >&2; exit 1; }
    "$BIN/seqrec-score" -m "$tmp/m.sqm" --target test "$split" |
      "$BIN/seqrec-metrics" --json -k 10 > "$tmp/metrics"
    nd=$(metric ndcg@10 "$tmp/metrics")
    [ "$l" != ce ] || ce=$nd
    vs=$(awk -v a="$nd" -v b="$ce" 'BEGIN {if (b > 0) printf "%.3f", a / b}')
    echo "losses,$name,$(name_of "$l"),$(neg_of "$l"),$(sampler_of "$l"),$LOSS_EPOCHS,$(median "$tmp/log"),$(best "$tmp/log"),$(metric hr@10 "$tmp/metrics"),$nd,$vs" |
      tee -a "$CSV"
    rm -f "$tmp/m.sqm" "$tmp/m.sqm.ckpt"
  done
done
