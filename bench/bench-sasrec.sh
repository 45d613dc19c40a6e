#!/bin/sh
# bench/bench-sasrec.sh BIN OUT.csv SPLIT - SASRec training speed of the C
# engine and of the same model in PyTorch, in the same run, same data and
# threads (FPARec/issue settings: N=50, d=64, 2 layers, 1 head, batch 128,
# BCE with one negative, dropout 0.5, 2 threads), plus the share of the C
# epoch spent in OpenBLAS (GEMMs), from perf's CPU-clock samples.
# CSV lines "bench,metric,value". TORCH_PYTHON picks the interpreter with
# torch (default: the first python3 that imports it).
set -eu
BIN=$1 CSV=$2 SPLIT=$3
EPOCHS=${EPOCHS:-3} THREADS=${THREADS:-2}
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ARGS="--model sasrec --loss bce --neg 1 --max-len 50 --dim 64 --ffn 64 --layers 2 --heads 1 --dropout 0.5 --batch 128 --seed 1 --threads $THREADS"

# C: one line per epoch; seq_per_s counts training sequences over the
# training steps only (validation excluded); an epoch's seconds include
# validation only in the last epoch (--eval-every 1000).
"$BIN/seqrec-train" $ARGS --epochs "$EPOCHS" --eval-every 1000 --patience 0 --log "$tmp/c.log" -o "$tmp/m.sqm" "$SPLIT"
c_sps=$(sed -n 's/.*"seq_per_s":\([0-9.]*\).*/\1/p' "$tmp/c.log" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
c_sec=$(sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p' "$tmp/c.log" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "sasrec,c_seq_per_s_median,$c_sps" | tee -a "$CSV"
echo "sasrec,c_epoch_seconds_median,$c_sec" | tee -a "$CSV"

# GEMM share: CPU-clock samples in libopenblas over all samples of one epoch.
if command -v perf >/dev/null 2>&1 && perf record -q -e cpu-clock -o "$tmp/probe.data" true >/dev/null 2>&1; then
  perf record -q -e cpu-clock -F 499 -o "$tmp/perf.data" \
    "$BIN/seqrec-train" $ARGS --epochs 1 --eval-every 1000 --patience 0 --log /dev/null -o "$tmp/p.sqm" "$SPLIT" 2>/dev/null
  perf report -i "$tmp/perf.data" --stdio --sort dso 2>/dev/null > "$tmp/dso.txt" || true
  share=$(awk '/%/ && /openblas/ {gsub("%","",$1); s+=$1} END {printf "%.1f", s}' "$tmp/dso.txt")
  echo "sasrec,c_openblas_share_percent,$share" | tee -a "$CSV"
  perf report -i "$tmp/perf.data" --stdio --sort sym 2>/dev/null | grep '%' | head -n 12 > "$here/out/sasrec_profile.txt" || true
else
  echo "sasrec,c_openblas_share_percent,perf unavailable" | tee -a "$CSV"
fi

# PyTorch: the same model (tests/reference/sasrec_ref.py + dropout).
PY=${TORCH_PYTHON:-}
if [ -z "$PY" ]; then
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import torch' 2>/dev/null; then PY=$p; break; fi
  done
fi
if [ -z "$PY" ]; then
  echo "sasrec,torch,skipped: no python3 with torch (apt-get install python3-torch)" | tee -a "$CSV"
  exit 0
fi
tv=$("$PY" -c 'import torch; print(torch.__version__)')
echo "sasrec,torch_version,$tv" | tee -a "$CSV"
"$BIN/seqrec-cat" "$SPLIT" | "$PY" "$here/sasrec_torch.py" --epochs "$EPOCHS" --threads "$THREADS" > "$tmp/t.csv"
t_sps=$(grep seq_per_s "$tmp/t.csv" | cut -d, -f3 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
t_sec=$(grep epoch_seconds "$tmp/t.csv" | cut -d, -f3 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "sasrec,torch_seq_per_s_median,$t_sps" | tee -a "$CSV"
echo "sasrec,torch_epoch_seconds_median,$t_sec" | tee -a "$CSV"
echo "sasrec,speedup_c_over_torch,$(echo "$c_sps $t_sps" | awk '{printf "%.2f", $1 / $2}')" | tee -a "$CSV"
