#!/bin/bash
# check.sh - `make gpu-check`'s one command on a GPU machine, sized for a
# borrowed GPU: under 7 minutes, and attn's 2.5 more. Runs from the unpacked pack (pack.sh):
#
#   tar -xJf .gpu/pack.tar.xz -C /tmp && /tmp/pack/check.sh [PART...]
#
# PART (default: all) picks what runs: parity, sanitize, train, nccl,
# score, bench, bf16, attn, graphs, profile. Each part writes PASS/FAIL lines into summary.txt; it and the logs
# (logs.tar.gz) go to $OUT when that is set (the device tool brings $OUT
# back), else stay in the pack's out/. The exit status is 1 when a part
# failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$here/out
mkdir -p "$out"
sum="$out/summary.txt"
finish() {
  if [ -n "${OUT:-}" ]; then
    cp "$sum" "$OUT/summary.txt"
    tar -C "$here" -czf "$OUT/logs.tar.gz" --exclude='*.sqm' --exclude='*.ckpt' out
  fi
}
trap finish EXIT
: > "$sum"
parts=${*:-parity sanitize train nccl score bench bf16 attn graphs profile}
fails=0
say() { echo "$*" | tee -a "$sum"; }
pass() { say "PASS $*"; }
fail() { say "FAIL $*"; fails=$((fails + 1)); }
# whether part $1 runs; when it does, the seconds since the start (the
# parts' times, for sizing the next borrowed GPU's calls)
want() { [[ " $parts " == *" $1 "* ]] && say "# +${SECONDS}s: part $1"; }

# shellcheck source=tests/gpu/cudalibs.sh
. "$here/cudalibs.sh" # the CUDA libraries, the pack's lib/ and bin/
export PYTHONPATH="$here/reference${PYTHONPATH:+:$PYTHONPATH}" # the twin imports sasrec_ref
say "# seqrec gpu-check $(date -u +%FT%TZ)"
if [ "${GPU_CHECK_DRY:-}" = 1 ]; then # tests/gpu/dry.sh: the check's own logic
  export SEQREC_SIMULATED_DEVICE=1
  say "# DRY RUN on the simulated device (make gpu-check-dry): no GPU's numbers"
else
  unset SEQREC_SIMULATED_DEVICE
fi
[ -z "${SEQREC_GPU_PLAIN:-}" ] || say "# SEQREC_GPU_PLAIN=$SEQREC_GPU_PLAIN: those fast paths off (seqrec-train(1))"
say "# device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
say "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) threads"
if ! ldd "$SEQREC_CUDA_LIB" > "$out/ldd.txt" 2>&1 || grep -q 'not found' "$out/ldd.txt"; then
  fail "backend loads: $(grep 'not found' "$out/ldd.txt" | tr '\n' ' ')"
fi

# 1. Every GPU op against its CPU twin (forward, backward, odd shapes, two
# runs for determinism): the unit runner's GPU tests, on the real device.
if want parity; then
  for f in gpu cuda; do
    if timeout 120 "$here/unit_tests" "$f" > "$out/parity-$f.log" 2>&1; then
      pass "parity ($f): $(tail -qn 1 "$out/parity-$f.log")"
    else
      fail "parity ($f): $(tail -qn 1 "$out/parity-$f.log"); $(grep -c '^FAIL' "$out/parity-$f.log") failing:"
      grep '^FAIL' "$out/parity-$f.log" | head -20 | tee -a "$sum"
    fi
    if grep -q '^SKIP' "$out/parity-$f.log"; then
      fail "parity ($f): skipped tests on a GPU machine: $(grep '^SKIP' "$out/parity-$f.log" | head -3 | tr '\n' ' ')"
    fi
  done
fi

# 2. compute-sanitizer memcheck and racecheck on the parity tests' small
# shapes, NCCL's test left out: NCCL probes its kernels for every
# architecture with cudaFuncGetAttributes, and memcheck counts each
# cudaErrorNoKernelImageForDevice it gets back (4 on an H200, stop 27).
# racecheck took 60 s for 45 of the 50 tests there. The allocation cache
# off (SEQREC_GPU_PLAIN=cache, cuda/alloc.cu): every block its exact size,
# freed when freed, so memcheck sees an overrun or a stale pointer.
if want sanitize; then
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
  if [ -z "$cs" ]; then
    fail "sanitize: no compute-sanitizer on this machine"
  else
    for tool in memcheck racecheck; do
      limit=90; [ $tool = racecheck ] && limit=180
      if SEQREC_GPU_PLAIN=${SEQREC_GPU_PLAIN:+$SEQREC_GPU_PLAIN,}cache \
         timeout $limit "$cs" --tool $tool --error-exitcode 99 "$here/unit_tests" cuda -cuda_nccl \
           > "$out/sanitize-$tool.log" 2>&1; then
        pass "compute-sanitizer $tool: $(grep -m1 'ERROR SUMMARY' "$out/sanitize-$tool.log")"
      else
        fail "compute-sanitizer $tool (rc $?): $(grep -m1 'ERROR SUMMARY' "$out/sanitize-$tool.log")"
        grep -m5 -B2 -A8 '========= ' "$out/sanitize-$tool.log" | head -40 >> "$sum"
      fi
    done
  fi
fi

# One program's run in the train, nccl and score parts: a hang costs this
# many seconds, not the borrowed GPU's call (RUN_TIMEOUT; the dry run's
# simulated device is slower).
run_limit=${RUN_TIMEOUT:-120}

# The last epoch's training loss of a JSON log line.
loss_of() { grep -o '"loss":[-0-9.eE+]*' "$1" | tail -qn 1 | cut -d: -f2; }
# The first epoch's mean loss of a log.
first_loss_of() { grep -o '"loss":[-0-9.eE+]*' "$1" | head -n 1 | cut -d: -f2; }
# The least train_seconds an epoch of a log.
least_train() { grep -o '"train_seconds":[0-9.eE+-]*' "$1" | cut -d: -f2 | sort -g | head -1; }
relerr() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; print (m > 0 ? d / m : d) }'; }

# 3. One epoch of every model on the GPU against the CPU: SASRec and
# BERT4Rec (softmax and linrec; SASRec on efficient-dwc, the convolution's
# kernels), HSTU (k_silu.cu, k_hstu.cu, flat.c), Blin (k_bkl.cu), ELASTIC
# (k_elastic.cu), CL4SRec (k_nce.cu), CORE (k_core.cu), GRU4Rec (k_gru.cu),
# Caser (k_conv.cu) and FPMC, and SASRec on the sampled losses
# (k_sampled.cu: sampled softmax a set a position, gBCE one set a batch,
# sampled softmax a set a sequence with lazy Adam, k_adam.cu's rows), Blin
# on its sampled softmax (k_bkl.cu's sampled mode):
# the loss within 1e-3 relative; two GPU runs the same bits (the model
# files compared byte for byte).
if want train; then
  data="$here/data/synth.split"
  base="--epochs 1 --dim 64 --batch 128 --seed 3 --eval-every 1"
  cfgs=("sasrec softmax" "sasrec linrec" "bert4rec softmax" "bert4rec linrec"
        "sasrec efficient-dwc" "hstu" "blin" "elastic" "cl4srec" "core" "gru4rec" "caser"
        "fpmc" "sasrec softmax ssm" "sasrec softmax gbce-batch" "sasrec softmax lazy"
        "blin efficient-dwc bsm")
  # NAME and OPTS of configuration $1
  train_cfg() {
    set -- $1
    name="$1${2:+-$2}${3:+-$3}"
    case ${3:-} in
      ssm) loss="--loss sampled-softmax --neg 64" ;;
      gbce-batch) loss="--loss gbce --neg 64 --neg-share batch" ;;
      lazy) loss="--loss sampled-softmax --neg 64 --neg-share sequence --lazy-adam" ;;
      bsm) loss="--loss ce --softmax sampled --neg 64" ;;
      *) loss="--loss ce" ;;
    esac
    case $1 in
      caser|fpmc) common="$base" ;; # their own windows (5, 1)
      # one prefix a user (their default, last, trains every prefix: minutes
      # on the CPU's one thread)
      core|cl4srec) common="$base --max-len 50 --layers 2 --target random" ;;
      *) common="$base --max-len 50 --layers 2" ;;
    esac
    opts="--model $1 ${2:+--attn $2} $loss $common"
  }
  # The CPU runs first, all at once, a core each (the part took 265 s with
  # each CPU run before its GPU runs on an H200's 16-thread host): one thread
  # each, as the GPU trains each batch whole (on more threads the CPU
  # trains micro-batches with their own dropout draws).
  for cfg in "${cfgs[@]}"; do
    train_cfg "$cfg"
    { timeout "$((2 * run_limit))" seqrec-train $opts --device cpu --threads 1 -o "$out/$name.cpu.sqm" --log "$out/$name.cpu.log" \
        "$data" > "$out/$name.cpu.out" 2>&1; echo $? > "$out/$name.cpu.rc"; } &
  done
  wait
  for cfg in "${cfgs[@]}"; do
    train_cfg "$cfg"
    [ "$(cat "$out/$name.cpu.rc")" = 0 ] || { fail "train $name cpu: $(tail -qn 2 "$out/$name.cpu.out")"; continue; }
    ok=1
    for r in 1 2; do
      if ! timeout "$run_limit" seqrec-train $opts --device cuda -o "$out/$name.gpu$r.sqm" --log "$out/$name.gpu$r.log" \
           "$data" > "$out/$name.gpu$r.out" 2>&1; then
        fail "train $name gpu run $r: $(tail -qn 2 "$out/$name.gpu$r.out")"; ok=0; break
      fi
    done
    [ $ok = 1 ] || continue
    lc=$(loss_of "$out/$name.cpu.log"); lg=$(loss_of "$out/$name.gpu1.log")
    e=$(relerr "$lg" "$lc")
    if awk -v e="$e" 'BEGIN { exit !(e <= 1e-3) }'; then
      pass "train $name: loss gpu $lg cpu $lc (rel $e)"
    else
      fail "train $name: loss gpu $lg cpu $lc (rel $e > 1e-3)"
    fi
    if cmp -s "$out/$name.gpu1.sqm" "$out/$name.gpu2.sqm"; then
      pass "train $name: two GPU runs, the same bits"
    else
      fail "train $name: two GPU runs differ"
    fi
  done
fi

# 3b. Ranks on GPUs (issue 36): a job of one rank (WORLD_SIZE=1 with
# SEQREC_NCCL_ID: two ranks cannot share one GPU) trains through NCCL's
# id, communicator and all-reduce, and must write the plain GPU run's
# bytes, twice: the full softmax's dense sum, and BCE's row-sparse one
# (micro.c gpu_sum: the step's rows of the item table packed, summed, put
# back). NCCL from this machine's CUDA or PyTorch (SEQREC_NCCL_LIB).
nccl_case() { # NAME OPTS
  local name=$1 opts=$2 data="$here/data/synth.split" r
  # shellcheck disable=SC2086
  if ! timeout "$run_limit" seqrec-train $opts --device cuda -o "$out/nccl-$name.sqm" --log /dev/null "$data" \
       > "$out/nccl-$name.out" 2>&1; then
    fail "nccl $name: the plain GPU run: $(tail -qn 2 "$out/nccl-$name.out" | tr '\n' ' ')"
    return
  fi
  for r in 1 2; do
    rm -f "$out/nccl.id"
    # shellcheck disable=SC2086
    if env WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 SEQREC_NCCL_ID="$out/nccl.id" \
         timeout "$run_limit" seqrec-train $opts --device cuda -o "$out/nccl-$name$r.sqm" --log /dev/null "$data" \
         > "$out/nccl-$name$r.out" 2>&1; then
      if cmp -s "$out/nccl-$name.sqm" "$out/nccl-$name$r.sqm"; then
        pass "nccl $name: one rank through NCCL, run $r: the plain GPU run's bytes"
      else
        fail "nccl $name: one rank through NCCL, run $r: not the plain GPU run's bytes"
      fi
    else
      fail "nccl $name run $r: $(tail -qn 2 "$out/nccl-$name$r.out" | tr '\n' ' ')"
    fi
  done
}
if want nccl; then
  if [ -z "${SEQREC_NCCL_LIB:-}" ]; then
    for d in ${cudalib//:/ } /usr/local/cuda*/lib /usr/local/cuda*/lib64 /usr/lib/x86_64-linux-gnu \
             /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib; do
      [ -e "$d/libnccl.so.2" ] && { export SEQREC_NCCL_LIB="$d/libnccl.so.2"; break; }
    done
  fi
  say "     nccl: ${SEQREC_NCCL_LIB:-libnccl.so.2 (not found in the usual places)}"
  base="--model sasrec --attn softmax --epochs 1 --max-len 50 --dim 64 --batch 128 --seed 3"
  nccl_case dense "$base --loss ce"
  nccl_case rows "$base --loss bce --neg 4"
  nccl_case rows-lazy "$base --loss bce --neg 4 --lazy-adam"
fi

# 4. A model trained on the GPU scores on the CPU and back: the metrics of
# both within float rounding; on the GPU a user's scores do not depend on
# the batch (the top 10 with scores, batches of 1 and 256: the same), the
# device's top-K selection gives the host's lists, and its ranks (k_rank.cu)
# the host's ranks.
# same_or_fail A B PASS FAIL: PASS when A is not empty and B has its bytes
same_or_fail() {
  if [ -s "$1" ] && cmp -s "$1" "$2"; then pass "$3"; else fail "$4"; fi
}
if want score; then
  data="$here/data/synth.split"
  for name in sasrec-softmax bert4rec-linrec hstu core gru4rec caser; do
    m="$out/$name.gpu1.sqm"
    [ -f "$m" ] || { fail "score $name: no GPU model (train part)"; continue; }
    for d in cpu cuda; do
      timeout "$run_limit" seqrec-score --device $d -m "$m" --target test "$data" 2> "$out/score-$name-$d.err" \
        | seqrec-metrics -k 10 > "$out/score-$name-$d.txt" 2>> "$out/score-$name-$d.err" \
        || fail "score $name on $d: $(tail -qn 1 "$out/score-$name-$d.err")"
    done
    if [ -s "$out/score-$name-cpu.txt" ] && [ -s "$out/score-$name-cuda.txt" ]; then
      say "     $name cpu: $(tr '\n' ' ' < "$out/score-$name-cpu.txt")"
      say "     $name gpu: $(tr '\n' ' ' < "$out/score-$name-cuda.txt")"
      if paste "$out/score-$name-cpu.txt" "$out/score-$name-cuda.txt" | awk '
           { for (i = 1; i <= NF / 2; i++) { a = $i; b = $(i + NF / 2);
               if (a ~ /^[0-9.]+$/ && (a - b > 0.002 || b - a > 0.002)) bad = 1 } }
           END { exit bad }'; then
        pass "score $name: GPU model on the CPU and the GPU agree (0.002)"
      else
        fail "score $name: CPU and GPU metrics differ by more than 0.002"
      fi
    fi
    # batch invariance on the GPU (k_gemm.cu): the top 10 and their scores
    # of every user, 1 and 256 histories a batch, the same text
    for b in 1 256; do
      timeout "$run_limit" seqrec-score --device cuda -b $b -m "$m" --topk 10 "$data" \
        > "$out/score-$name-top-$b.txt" 2> "$out/score-$name-top-$b.err" ||
        fail "score $name --topk -b $b: $(tail -qn 1 "$out/score-$name-top-$b.err")"
    done
    same_or_fail "$out/score-$name-top-1.txt" "$out/score-$name-top-256.txt" \
      "score $name: a user's GPU scores are the same bits in batches of 1 and 256" \
      "score $name: GPU scores differ between batches of 1 and 256"
    # the device's top-K selection (k_topk.cu) against the host's
    SEQREC_GPU_TOPK=host timeout "$run_limit" seqrec-score --device cuda -b 256 -m "$m" \
      --topk 10 "$data" > "$out/score-$name-top-host.txt" 2>> "$out/score-$name-top-256.err" ||
      rm -f "$out/score-$name-top-host.txt"
    same_or_fail "$out/score-$name-top-host.txt" "$out/score-$name-top-256.txt" \
      "score $name: the GPU's top-10 lists are the host selection's" \
      "score $name: the GPU's top-10 lists differ from the host selection's"
    # the device's ranks (k_rank.cu) against the host's from the same
    # scores, history excluded (the ranks stream's records as text)
    for r in gpu host; do
      v=; [ $r = host ] && v=host
      SEQREC_GPU_RANKS=$v timeout "$run_limit" seqrec-score --device cuda -x -m "$m" --target test \
        "$data" 2> "$out/score-$name-ranks-$r.err" | seqrec-cat > "$out/score-$name-ranks-$r.txt" ||
        fail "score $name ranks ($r): $(tail -qn 1 "$out/score-$name-ranks-$r.err")"
    done
    same_or_fail "$out/score-$name-ranks-gpu.txt" "$out/score-$name-ranks-host.txt" \
      "score $name: the GPU's ranks are the host's" \
      "score $name: the GPU's ranks differ from the host's"
  done
fi

# 5. The short form of bench-gpu: s/epoch of seqrec on the GPU, of the
# PyTorch twin (eager, on the same GPU in the same run: bench/sasrec_torch.py
# for SASRec, bench/bert4rec_torch.py for BERT4Rec), and of seqrec on this
# machine's CPU threads. (a) Beauty N 50, d 64, batch 128, full CE; (b)
# ml-1m-part N 200, d 128, ffn 256, 2 heads, batch 128 and 2048; SASRec
# and BERT4Rec (issue 37's target) at batch 2048. Epoch 2 of 2 is timed
# (the first pays start-up).
bench_one() { # NAME DATA [--model M] OPTS...: seqrec cuda, torch cuda, seqrec cpu
  local name=$1 data="$here/data/$2.split" model=sasrec; shift 2
  [ "$1" = --model ] && { model=$2; shift 2; }
  [ -f "$data" ] || { say "     bench $name: no data"; return; }
  local v; v=$(seqrec-cat -H "$data" | awk '$1 == "n_items" { print $2 }')
  local nl=$(($#)) opts=("$@")
  for d in cuda cpu; do
    [ $d = cpu ] && [ "$name" != a ] && continue # the CPU on (a) only: minutes otherwise
    if timeout 90 seqrec-train --model $model --attn softmax --loss ce --epochs 2 --eval-every 100 \
         --seed 1 "${opts[@]}" --device $d -o "$out/bench-$name-$d.sqm" --log "$out/bench-$name-$d.log" \
         "$data" > "$out/bench-$name-$d.out" 2>&1; then
      local s q pk
      s=$(grep -o '"train_seconds":[0-9.eE+-]*' "$out/bench-$name-$d.log" | tail -qn 1 | cut -d: -f2)
      q=$(grep -o '"seq_per_s":[0-9.eE+-]*' "$out/bench-$name-$d.log" | tail -qn 1 | cut -d: -f2)
      # the device memory the run's allocations held (seqrec-train's
      # device_mib), beside the twin's max_memory_allocated
      pk=$(grep -o '"device_mib":[0-9.]*' "$out/bench-$name-$d.log" | tail -qn 1 | cut -d: -f2)
      echo "seqrec,$name,$d,$s,$q,${pk:+peak $pk MiB}" >> "$bench"
    else
      echo "seqrec,$name,$d,fail,,$(tail -qn 1 "$out/bench-$name-$d.out" | tr , ' ')" >> "$bench"
    fi
  done
  case $name in *-graphs) return;; esac # seqrec's own option: the twin ran for the config
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    # the twins take --max-len, --dim, --ffn, --layers, --heads, --batch,
    # --dropout, --precision; SASRec's --loss, BERT4Rec's --mask-prob
    local t=() i=0 twin=("$here/sasrec_torch.py" --loss ce)
    [ $model = bert4rec ] && twin=("$here/bert4rec_torch.py")
    while [ $i -lt $nl ]; do
      case ${opts[$i]} in --max-len|--dim|--ffn|--layers|--heads|--batch|--dropout|--precision|--mask-prob)
        t+=("${opts[$i]}" "${opts[$((i + 1))]}");; esac
      i=$((i + 1))
    done
    if seqrec-cat "$data" | timeout 90 python3 "${twin[@]}" --device cuda \
         --epochs 2 --n-items "$v" "${t[@]}" > "$out/bench-$name-torch.out" 2>&1; then
      local s q pk
      s=$(grep '^torch,epoch_seconds' "$out/bench-$name-torch.out" | tail -qn 1 | cut -d, -f3)
      q=$(grep '^torch,seq_per_s' "$out/bench-$name-torch.out" | tail -qn 1 | cut -d, -f3)
      pk=$(grep '^torch,peak_mib' "$out/bench-$name-torch.out" | tail -qn 1 | cut -d, -f3)
      echo "torch,$name,cuda,$s,$q,peak $pk MiB" >> "$bench"
    else
      echo "torch,$name,cuda,fail,,$(tail -qn 1 "$out/bench-$name-torch.out" | tr , ' ')" >> "$bench"
    fi
  fi
}
if want bench; then
  bench="$out/bench.csv"
  echo "what,config,device,seconds_per_epoch,seq_per_s,note" > "$bench"
  bench_one a beauty --max-len 50 --dim 64 --ffn 64 --layers 2 --heads 1 --batch 128 --dropout 0.5
  bench_one b ml1m --max-len 200 --dim 128 --ffn 256 --layers 2 --heads 2 --batch 128 --dropout 0.2
  # (a) and (b) as CUDA graphs (--cuda-graphs): the launch-bound configs
  bench_one a-graphs beauty --max-len 50 --dim 64 --ffn 64 --layers 2 --heads 1 --batch 128 \
    --dropout 0.5 --cuda-graphs
  bench_one b-graphs ml1m --max-len 200 --dim 128 --ffn 256 --layers 2 --heads 2 --batch 128 \
    --dropout 0.2 --cuda-graphs
  # batch 2048 on ml-1m-part repeated BENCH_REPEAT (20) times, the issue's
  # config (users renumbered, the copies in order): 30 steps an epoch, not
  # 2, so epoch 2 times steps rather than an epoch's start
  if [ -f "$here/data/ml1m.split" ] && [ ! -f "$here/data/ml1m20.split" ]; then
    v=$(seqrec-cat -H "$here/data/ml1m.split" | awk '$1 == "n_items" { print $2 }')
    seqrec-cat "$here/data/ml1m.split" | awk -F '\t' -v OFS='\t' -v k="${BENCH_REPEAT:-20}" '
      { row[NR] = $0 }
      END { for (r = 0; r < k; r++) for (i = 1; i <= NR; i++) {
              n = split(row[i], f, "\t"); s = f[1] + r * NR
              for (j = 2; j <= n; j++) s = s OFS f[j]
              print s } }' |
      seqrec-cat --from-text split --timestamps --n-items "$v" -o "$here/data/ml1m20.split" ||
      say "     bench: ml-1m-part x 20 not made"
  fi
  bench_one b2048 ml1m20 --max-len 200 --dim 128 --ffn 256 --layers 2 --heads 2 --batch 2048 --dropout 0.2
  # the issue's target: 3x PyTorch bf16 at batch 2048 (the twin under autocast)
  bench_one b2048-bf16 ml1m20 --max-len 200 --dim 128 --ffn 256 --layers 2 --heads 2 --batch 2048 \
    --dropout 0.2 --precision bf16
  # BERT4Rec at the same shape (issue 37: 3x PyTorch bf16 too), cloze
  # masking at its default 0.2
  bench_one b2048-bert4rec ml1m20 --model bert4rec --max-len 200 --dim 128 --ffn 256 --layers 2 \
    --heads 2 --batch 2048 --dropout 0.2
  bench_one b2048-bert4rec-bf16 ml1m20 --model bert4rec --max-len 200 --dim 128 --ffn 256 \
    --layers 2 --heads 2 --batch 2048 --dropout 0.2 --precision bf16
  say "     bench (epoch 2 of 2; seqrec-train's train_seconds, the twin's epoch_seconds):"
  sed 's/^/     /' "$bench" | tee -a "$sum"
  pass "bench ran"
fi

# 5b. Every model's epoch on its paper's data (issue 37's bench-gpu: GPU
# against this machine's CPU threads): the least train_seconds of
# MODELS_EPOCHS (2) epochs on the GPU, and of one epoch on the CPU with
# every thread, each under MODELS_TIMEOUT (90) seconds ("timeout" in the
# CSV when cut). Data: MODELS_BEAUTY and MODELS_ML (the pack's Beauty and
# ml-1m-part splits). Reported, not judged: a FAIL only when a run fails.
models_one() { # NAME DATA OPTS...
  local name=$1 data=$2; shift 2
  [ -f "$data" ] || { echo "$name,,,no data" >> "$mcsv"; return; }
  local d s g="" c=""
  for d in cuda cpu; do
    local ep=${MODELS_EPOCHS:-2}
    [ $d = cpu ] && ep=1
    if timeout "${MODELS_TIMEOUT:-90}" seqrec-train "$@" --epochs "$ep" --eval-every 1000 --seed 1 \
         --device $d -o "$out/models-$name-$d.sqm" --log "$out/models-$name-$d.log" "$data" \
         > "$out/models-$name-$d.out" 2>&1; then
      s=$(least_train "$out/models-$name-$d.log")
    elif [ $? = 124 ]; then
      s=timeout
    else
      s=fail
      fail "models $name on $d: $(tail -qn 1 "$out/models-$name-$d.out")"
    fi
    if [ $d = cuda ]; then g=$s; else c=$s; fi
  done
  echo "$name,$g,$c,$(awk -v g="$g" -v c="$c" 'BEGIN { if (g > 0 && c > 0) printf "%.1f", c / g }')" >> "$mcsv"
}
if want models; then
  mcsv="$out/bench-models.csv"
  mb=${MODELS_BEAUTY:-$here/data/beauty.split} mm=${MODELS_ML:-$here/data/ml1m.split}
  echo "model,gpu_seconds_per_epoch,cpu_seconds_per_epoch,cpu_over_gpu" > "$mcsv"
  models_one sasrec-beauty "$mb" --model sasrec --dim 64 --max-len 50 --dropout 0.5
  models_one sasrec-linrec-ml "$mm" --model sasrec --attn linrec --block recbole --dim 128 --ffn 256 \
    --heads 8 --max-len 200 --batch 16 --target windows
  models_one bert4rec-hydra-ml "$mm" --model bert4rec --attn hydra --dim 64 --ffn 256 --max-len 100 \
    --batch 16 --mask-prob 0.1
  models_one sasrec-fpositional-beauty "$mb" --model sasrec --attn fpositional --dim 64 --max-len 50
  models_one blin-beauty "$mb" --model blin --dim 64 --max-len 100 --batch 256 --dropout 0.5
  models_one elastic-ml "$mm" --model elastic --max-len 200 --target last
  models_one core-beauty "$mb" --model core --max-len 50 --target random
  models_one cl4srec-beauty "$mb" --model cl4srec --max-len 50 --target random
  models_one hstu-beauty "$mb" --model hstu --max-len 50
  models_one gru4rec-beauty "$mb" --model gru4rec --max-len 50
  models_one caser-beauty "$mb" --model caser
  models_one fpmc-beauty "$mb" --model fpmc
  say "     models (least train_seconds an epoch; cpu: $(nproc) threads, one epoch):"
  sed 's/^/     /' "$mcsv" | tee -a "$sum"
  pass "models ran"
fi

# 6. --precision bf16 against tf32 on Beauty (issue 37): SASRec at the
# README's settings for BF16_EPOCHS epochs (default 20) each, the best
# validation epoch's model scored on the test targets (full ranking);
# HR@10, NDCG@10 and seconds an epoch of both. Reported, not judged: a
# FAIL only when a run fails.
if want bf16; then
  data="$here/data/beauty.split"
  if [ ! -f "$data" ]; then
    fail "bf16: no Beauty split in the pack (DATA_MIRROR)"
  else
    for p in tf32 bf16; do
      if timeout 200 seqrec-train --model sasrec --dim 64 --ffn 64 --max-len 50 --dropout 0.5 \
           --epochs "${BF16_EPOCHS:-20}" --patience 0 --seed 1 --device cuda --precision $p \
           -o "$out/bf16-$p.sqm" --log "$out/bf16-$p.log" "$data" > "$out/bf16-$p.out" 2>&1 &&
         seqrec-score --device cuda --precision $p -m "$out/bf16-$p.sqm" --target test "$data" \
           2>> "$out/bf16-$p.out" | seqrec-metrics -k 10 > "$out/bf16-$p.txt" 2>> "$out/bf16-$p.out"; then
        s=$(least_train "$out/bf16-$p.log")
        pass "bf16: Beauty SASRec --precision $p: $(tr '\n' ' ' < "$out/bf16-$p.txt")(least $s s an epoch)"
      else
        fail "bf16: Beauty --precision $p: $(tail -qn 2 "$out/bf16-$p.out" | tr '\n' ' ')"
      fi
    done
  fi
fi

# 7. The attention kinds at long sequences (issue 37; `make bench-gpu`):
# attn_bench (bench/attn_bench.c) on the GPU for every kind of its --list
# (or ATTN_KINDS) and PyTorch's fused causal softmax attention
# (attn_torch.py, scaled_dot_product_attention) on the same GPU, at N in
# ATTN_NS (default 256 1024 4096 16384), d 64, 2 heads, B = max(1, 16384 / N)
# sequences (ATTN_TOKENS for 16384): the same tokens at every N, so that a linear kind's step
# stays flat and a quadratic one's grows 4x a size. One sublayer, forward
# and backward, TF32 (ATTN_PRECISION), the median of at least 3 steps over
# 0.3 s after a warm-up step (a step over 2 s: timed once, and no warm-up
# when the last size predicts that). Time: ~50 processes of ~1.5 s (CUDA's
# start-up and cuBLAS's load, 0.3 s timed) plus PyTorch's imports (~4 x
# 4 s), ~100 s when no kind is slow; a slow kind is bounded by the part's
# budget ATTN_BUDGET (default 140 s): each run's timeout is what is left of
# it (at most ATTN_TIMEOUT, default 60 s), and a size whose predicted step
# (4x the kind's last) would not fit is skipped (skipped-budget), as are
# the larger sizes of a kind that timed out (skipped-time). Rows in
# bench-attn-gpu.csv (attn_bench's columns: device_mib is the device memory
# the layer used, PyTorch's is max_memory_allocated) and in summary.txt.
# PASS when it ran; FAIL for a kind that failed or gave a non-finite
# result, never for its time.
attn_part() {
  local csv="$out/bench-attn-gpu.csv" kinds start ntorch=1 N B kind last pred left t line rc
  local prec=${ATTN_PRECISION:-tf32} limit=${ATTN_TIMEOUT:-60} budget=${ATTN_BUDGET:-140}
  local ran=0 skipped=0 bad=0 w tokens=${ATTN_TOKENS:-16384}
  declare -A lastt skip
  kinds=${ATTN_KINDS:-$(attn_bench --list)}
  attn_bench --header --dry softmax 64 64 | head -1 > "$csv"
  python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || {
    ntorch=0; say "     attn: no PyTorch with CUDA here: no torch-sdpa rows"; }
  start=$(date +%s)
  for N in ${ATTN_NS:-256 1024 4096 16384}; do
    B=$((tokens / N)); [ "$B" -ge 1 ] || B=1
    for kind in $([ $ntorch = 1 ] && echo torch-sdpa) $kinds; do
      last=${lastt[$kind]:-} pred=0
      [ -n "$last" ] && pred=$(awk -v t="$last" 'BEGIN { print 4 * t }')
      left=$((budget - ($(date +%s) - start)))
      if [ -z "${skip[$kind]:-}" ] && awk -v p="$pred" -v l="$left" 'BEGIN { exit !(2 * p + 3 > l) }'; then
        skip[$kind]=skipped-budget
      fi
      if [ -n "${skip[$kind]:-}" ]; then
        skipped=$((skipped + 1))
        # attn_bench's buffers_mib where it knows the kind, else none
        line=$(attn_bench --dry --device cuda --precision "$prec" -B "$B" "$kind" "$N" 64 \
                 2> /dev/null) || line="$kind,64,$N,$B,2,,,,,2,0,,cuda,,$prec"
        echo "$line" | awk -F, -v OFS=, -v s="${skip[$kind]}" '{ $1 = "'"$kind"'"; $9 = s; print }' >> "$csv"
        continue
      fi
      t=$((left < limit ? left : limit))
      w=1
      awk -v p="$pred" 'BEGIN { exit !(p > 2) }' && w=0
      if [ "$kind" = torch-sdpa ]; then
        set -- python3 "$here/attn_torch.py" --device cuda --precision "$prec" -B "$B" -w $w -m 0.3 \
          -s 2 "$N" 64
      else
        set -- attn_bench --device cuda --precision "$prec" -B "$B" -w $w -m 0.3 -s 2 "$kind" "$N" 64
      fi
      line=$(timeout "$t" "$@" 2> "$out/attn-$kind-$N.err"); rc=$?
      if [ $rc = 124 ]; then
        skip[$kind]=skipped-time; skipped=$((skipped + 1))
        echo "$kind,64,$N,$B,2,,,,timeout-${t}s,2,0,,cuda,,$prec" >> "$csv"
      elif [ $rc != 0 ] || [ "$(echo "$line" | cut -d, -f9)" != ok ]; then
        bad=$((bad + 1)); skip[$kind]=skipped-failed
        echo "$kind,64,$N,$B,2,,,,failed-rc$rc,2,0,,cuda,,$prec" >> "$csv"
        fail "attn $kind N=$N B=$B: rc $rc $(echo "$line" | cut -d, -f9) $(tail -qn 1 "$out/attn-$kind-$N.err")"
      else
        ran=$((ran + 1)); lastt[$kind]=$(echo "$line" | cut -d, -f6)
        echo "$line" >> "$csv"
      fi
    done
  done
  say "     attn (d 64, 2 heads, B N = $tokens tokens, $prec; $(($(date +%s) - start)) s):"
  sed 's/^/     /' "$csv" | tee -a "$sum"
  if [ $ran = 0 ]; then
    fail "attn: no run finished ($skipped skipped)"
  elif [ $bad = 0 ]; then
    pass "attn ran: $ran runs, $skipped skipped (timeouts, budget)"
  fi
}
if want attn; then
  attn_part
fi

# 8. CUDA graphs (issue 37; seqrec-train --cuda-graphs): on Beauty, SASRec
# (--loss ce, the README's model) at batch 128 and 32, and Blin's two views,
# CL4SRec's three and ELASTIC (its query network on fixed levels,
# elastic.h) at batch 128, for GRAPH_EPOCHS epochs (default 2), eager
# against graphs: the least train_seconds an epoch of each and their ratio
# (reported). PASS when the graphs' model is the same bytes twice and the
# same as the padded steps run without graphs (SEQREC_CUDA_GRAPHS=eager),
# and the graphs' first-epoch loss is the eager run's to 1e-3 (later
# epochs drift apart as any two float orders do: ELASTIC's third epoch on
# the dry run's split, 1.4e-3, its first 2.2e-5). 20 runs of ~10 s.
graph_run() { # NAME BATCH [ENV...] -- OPTS... (the model's in gmodel)
  local name=$1 batch=$2 env=()
  shift 2
  while [ "$1" != -- ]; do env+=("$1"); shift; done
  shift
  local rc=0 limit=${GRAPH_TIMEOUT:-200}
  env "${env[@]}" timeout "$limit" seqrec-train "${gmodel[@]}" --dim 64 --ffn 64 --max-len 50 \
    --dropout 0.5 --loss ce --batch "$batch" --epochs "${GRAPH_EPOCHS:-2}" --patience 0 \
    --seed 1 --device cuda "$@" -o "$out/graphs-$name.sqm" --log "$out/graphs-$name.log" \
    "$data" > "$out/graphs-$name.out" 2>&1 || rc=$?
  # the failure line quotes the .out's tail: say what a timeout left unsaid
  [ $rc = 124 ] && echo "$name: timed out after $limit s" >> "$out/graphs-$name.out"
  return $rc
}
graph_case() { # MODEL BATCH
  local m=$1 b=$2 c=$1-$2
  gmodel=(--model "$m")
  if graph_run eager-$c $b -- && graph_run graphs-$c $b -- --cuda-graphs &&
     graph_run again-$c $b -- --cuda-graphs &&
     graph_run padded-$c $b SEQREC_CUDA_GRAPHS=eager -- --cuda-graphs; then
    e=$(least_train "$out/graphs-eager-$c.log") g=$(least_train "$out/graphs-graphs-$c.log")
    say "     graphs: $m, batch $b: eager $e s an epoch, graphs $g s ($(awk -v a="$e" -v b="$g" \
      'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }')); $(grep -h 'cuda-graphs:' \
      "$out/graphs-graphs-$c.out" | tail -1)"
    r=$(relerr "$(first_loss_of "$out/graphs-graphs-$c.log")" \
      "$(first_loss_of "$out/graphs-eager-$c.log")")
    if cmp -s "$out/graphs-graphs-$c.sqm" "$out/graphs-again-$c.sqm" &&
       cmp -s "$out/graphs-graphs-$c.sqm" "$out/graphs-padded-$c.sqm" &&
       awk -v r="$r" 'BEGIN { exit !(r <= 1e-3) }'; then
      pass "graphs: $m, batch $b: the same bytes twice and as the padded eager steps; epoch 1's loss within $r of eager"
    else
      fail "graphs: $m, batch $b: bytes or loss (relative $r) differ"
    fi
  else
    fail "graphs: $m, batch $b: $(tail -qn 2 "$out"/graphs-*-$c.out | tr '\n' ' ')"
  fi
}
if want graphs; then
  data="$here/data/beauty.split"
  if [ ! -f "$data" ]; then
    fail "graphs: no Beauty split in the pack (DATA_MIRROR)"
  else
    for c in "sasrec 128" "sasrec 32" "blin 128" "cl4srec 128" "elastic 128"; do
      # shellcheck disable=SC2086 # a model and a batch size
      graph_case $c
    done
  fi
fi

# 9. Where the device time goes (SEQREC_GPU_PROFILE, cuda/prof.cu): one
# epoch of bench's configs (a), (b) and (b2048, SASRec and BERT4Rec), of
# (a) with CUDA graphs, of LinRec's SASRec (N 200, d 128, 8 heads, batch
# 16) and of ELASTIC (its pipeline's settings: N 256, pool 16x16, top-8,
# batch 256) on ml-1m-part, each op's device and host time; the busiest
# PROFILE_TOP (12) ops of each into the summary, the whole CSVs in the
# logs. ~7 runs of ~5 s. PASS when every run wrote its profile.
prof_case() { # NAME DATA OPTS... (--model among them)
  local name=$1 data="$here/data/$2.split" csv="$out/profile-$1.csv"
  shift 2
  [ -f "$data" ] || { say "     profile $name: no data"; return; }
  if SEQREC_GPU_PROFILE="$csv" timeout "$run_limit" seqrec-train --epochs 1 \
       --eval-every 100 --seed 1 --device cuda "$@" -o "$out/profile-$name.sqm" \
       --log "$out/profile-$name.log" "$data" > "$out/profile-$name.out" 2>&1 && [ -s "$csv" ]; then
    say "     profile $name ($(least_train "$out/profile-$name.log") s an epoch): $(head -1 "$csv")"
    sed -n "2,$((${PROFILE_TOP:-12} + 2))p" "$csv" | sed 's/^/       /' | tee -a "$sum" > /dev/null
    pass "profile $name"
  else
    fail "profile $name: $(tail -qn 2 "$out/profile-$name.out" | tr '\n' ' ')"
  fi
}
if want profile; then
  prof_case a beauty --model sasrec --attn softmax --loss ce --max-len 50 --dim 64 --ffn 64 \
    --layers 2 --heads 1 --batch 128 --dropout 0.5
  prof_case a-graphs beauty --model sasrec --attn softmax --loss ce --max-len 50 --dim 64 --ffn 64 \
    --layers 2 --heads 1 --batch 128 --dropout 0.5 --cuda-graphs
  prof_case b ml1m --model sasrec --attn softmax --loss ce --max-len 200 --dim 128 --ffn 256 \
    --layers 2 --heads 2 --batch 128 --dropout 0.2
  prof_case b2048 ml1m --model sasrec --attn softmax --loss ce --max-len 200 --dim 128 --ffn 256 \
    --layers 2 --heads 2 --batch 2048 --dropout 0.2
  prof_case b2048-bert4rec ml1m --model bert4rec --attn softmax --loss ce --max-len 200 --dim 128 \
    --ffn 256 --layers 2 --heads 2 --batch 2048 --dropout 0.2
  prof_case linrec-ml ml1m --model sasrec --attn linrec --block recbole --dim 128 --ffn 256 \
    --heads 8 --max-len 200 --batch 16 --target windows
  prof_case elastic-ml ml1m --model elastic --loss ce --dim 64 --ffn 256 --layers 2 --heads 2 \
    --max-len 256 --pool 16x16 --topk-experts 8 --dropout 0.5 --batch 256
fi

say "# +${SECONDS}s: $fails failed"
[ "$fails" = 0 ]
