#!/bin/sh
# len_cost.sh DIR - the cost of two models as the maximum sequence length N
# grows: ELASTIC Figure 3 (elastic.txt; the defaults: ELASTIC against
# SASRec, the paper's XLong, avg length 958.8, N in {64, 128, 256, 512,
# 1024}, GPU memory in training and inference latency) and LinRec Figure 3
# (linrec.mk sets the knobs). Here, on this machine's CPU (or its GPU: the
# device below) and on seqrec-synth sequences of about the same average length as the paper's
# data, one model after the other (never side by side, so that the timings
# are alone), for every N:
#
#   step time   seconds of training of the last epoch / its steps, where
#               the seconds are samples / seq_per_s of the training log
#               (training only, validation excluded) and the steps
#               ceil(samples / batch), samples = users (one sample a user
#               an epoch with --target random, ELASTIC's default, for
#               both models, so that they see the same prefixes and the
#               step time compares the models on the same inputs; with
#               --target all samples = users too: every position of a
#               user's sequence is one sample)
#   peak memory the training process's maximum RSS, from GNU time's %M
#               (/usr/bin/time); without it, a "...rss..." field of the
#               training log if it has one (KiB, or MiB for a _mb key),
#               else "-"; on a GPU the log's device_mib (the device
#               memory the run's allocations held at once, as the papers'
#               GPU memory)
#   inference   seqrec-score's wall seconds (full ranking of the test
#               targets) / users
#
# Writes DIR/synth.split, DIR/MODEL-N.{log,sqm,time,score.time},
# DIR/fig3.tsv (model N ms_per_step peak_mib score_ms_per_user epoch_s),
# DIR/fig3.md (the table, with B/A ratios) and DIR/fig3.png (gnuplot;
# skipped with a message when it is absent).
#
# Knobs (environment): SEQREC_BIN (programs, default build/bin), FIG3_NS
# (default "64 128 256 512 1024"), FIG3_USERS (256), FIG3_ITEMS (1000),
# FIG3_MEAN_LEN (959) and FIG3_MAX_SEQ (2000: seqrec-synth --mean-len and
# --max-len; the average comes out near 960-980), FIG3_BATCH (64),
# FIG3_EPOCHS (1), FIG3_THREADS (1), FIG3_COMMON (the options of both
# models), FIG3_A and FIG3_B (each model's own; the defaults SASRec and
# ELASTIC with the paper's XLong setting, pool 32x32 and top-16), FIG3_KEYS
# (file names of A and B, "sasrec elastic"), FIG3_LABELS ("SASRec
# ELASTIC"), FIG3_TITLE, FIG3_PAPER (the line under the table: what the
# paper found), FIG3_LOG2 (1: N on a log2 axis), FIG3_DEVICE (--device of
# both programs; default REPRO_DEVICE, the Makefile's DEVICE=, else the CPU).
set -eu
dir=$1
bin=${SEQREC_BIN:-build/bin}
ns=${FIG3_NS:-64 128 256 512 1024}
users=${FIG3_USERS:-256}
items=${FIG3_ITEMS:-1000}
mean=${FIG3_MEAN_LEN:-959}
maxseq=${FIG3_MAX_SEQ:-2000}
batch=${FIG3_BATCH:-64}
epochs=${FIG3_EPOCHS:-1}
threads=${FIG3_THREADS:-1}
common=${FIG3_COMMON:---loss ce --dim 64 --ffn 256 --layers 2 --heads 2 --dropout 0.5 --lr 1e-3 --seed 1}
args_a=${FIG3_A:-${FIG3_SASREC:---model sasrec --attn softmax --target random}}
args_b=${FIG3_B:-${FIG3_ELASTIC:---model elastic --pool 32x32 --topk-experts 16}}
set -- ${FIG3_KEYS:-sasrec elastic}
ka=$1 kb=$2
set -- ${FIG3_LABELS:-SASRec ELASTIC}
la=$1 lb=$2
title=${FIG3_TITLE:-ELASTIC Figure 3: ELASTIC against SASRec by maximum length N}
dev=${FIG3_DEVICE:-${REPRO_DEVICE:-}}
devopt='' where=CPU memlabel='max RSS (MiB)'
case $dev in
  '' | cpu) ;;
  *) devopt="--device $dev" where=GPU memlabel='device memory (MiB)' ;;
esac
paper=${FIG3_PAPER:-The paper (XLong, GPU, N = 1024): about 90% less training memory (ratio ~0.10) and 2.68x faster inference (ratio ~0.37).}
logx='set logscale x 2'
[ "${FIG3_LOG2:-1}" = 1 ] || logx='unset logscale x' 
mkdir -p "$dir"

split=$dir/synth.split
if [ ! -s "$split" ]; then
  "$bin/seqrec-synth" --users "$users" --items "$items" --mean-len "$mean" --max-len "$maxseq" \
    --seed 1 --format stream | "$bin/seqrec-split" --leave-one-out -o "$split"
fi
samples=$("$bin/seqrec-cat" --header "$split" | awk '$1 == "records" { print $2 }')
avg=$("$bin/seqrec-cat" --header "$split" | awk '
  $1 == "records" { r = $2 } $1 == "interactions" { n = $2 } END { printf "%.1f", r ? n / r : 0 }')

gnutime=0
if /usr/bin/time -f %M -o "$dir/probe.time" true 2> /dev/null; then gnutime=1; fi
rm -f "$dir/probe.time"

# measure OUT CMD...: run CMD, then write "SECONDS MAXRSS_KIB" (or "SECONDS -")
# to OUT; CMD's failure is ours
measure() {
  out=$1
  shift
  if [ "$gnutime" = 1 ]; then
    /usr/bin/time -f '%e %M' -o "$out" "$@"
    tail -n 1 "$out" > "$out.tmp" && mv "$out.tmp" "$out"
  else
    t0=$(date +%s)
    "$@"
    t1=$(date +%s)
    printf '%s -\n' $((t1 - t0)) > "$out"
  fi
}

tsv=$dir/fig3.tsv
printf 'model\tN\tms_per_step\tpeak_mib\tscore_ms_per_user\tepoch_s\n' > "$tsv"
for n in $ns; do
  for m in "$ka" "$kb"; do
    if [ "$m" = "$ka" ]; then args=$args_a; else args=$args_b; fi
    echo "len_cost.sh: $m N=$n" >&2
    # shellcheck disable=SC2086
    measure "$dir/$m-$n.time" "$bin/seqrec-train" $args $common --max-len "$n" \
      --batch "$batch" --epochs "$epochs" --patience 0 --threads "$threads" \
      --log "$dir/$m-$n.log" -o "$dir/$m-$n.sqm" $devopt "$split"
    # shellcheck disable=SC2086
    measure "$dir/$m-$n.score.time" "$bin/seqrec-score" -m "$dir/$m-$n.sqm" --target test \
      --candidates full --threads "$threads" -o "$dir/$m-$n.ranks" $devopt "$split"
    awk -v m="$m" -v n="$n" -v samples="$samples" -v batch="$batch" -v gnutime="$gnutime" -v where="$where" \
        -v tf="$dir/$m-$n.time" -v sf="$dir/$m-$n.score.time" '
      function get(s, key,   v) {
        if (match(s, "\"" key "\": *[0-9.e+-]+")) {
          v = substr(s, RSTART, RLENGTH); sub(/.*: */, "", v); return v + 0
        }
        return -1
      }
      { last = $0 }
      END {
        sps = get(last, "seq_per_s"); secs = get(last, "seconds")
        steps = int((samples + batch - 1) / batch)
        step = sps > 0 && steps > 0 ? sprintf("%.2f", 1000 * samples / sps / steps) : "-"
        mem = "-"
        if (where == "GPU") {
          d = get(last, "device_mib"); if (d >= 0) mem = sprintf("%.1f", d)
        } else if (gnutime == 1) {
          getline tl < tf; split(tl, t, " "); mem = sprintf("%.1f", t[2] / 1024)
        } else if (match(last, "\"[a-z_]*rss[a-z_]*\": *[0-9.]+")) {
          kv = substr(last, RSTART, RLENGTH); v = kv; sub(/.*: */, "", v)
          mem = sprintf("%.1f", (kv ~ /_mb/) ? v + 0 : v / 1024)
        }
        getline sl < sf; split(sl, sc, " ")
        score = samples > 0 ? sprintf("%.3f", 1000 * sc[1] / samples) : "-"
        printf "%s\t%s\t%s\t%s\t%s\t%s\n", m, n, step, mem, score, (secs >= 0 ? secs : "-")
      }' "$dir/$m-$n.log" >> "$tsv"
  done
done

md=$dir/fig3.md
awk -v users="$samples" -v avg="$avg" -v items="$items" -v batch="$batch" -v threads="$threads" \
    -v args_a="$args_a" -v args_b="$args_b" -v common="$common" -v ka="$ka" -v kb="$kb" \
    -v la="$la" -v lb="$lb" -v title="$title" -v paper="$paper" -v where="$where" '
  function ratio(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }
  NR > 1 {
    if (!($2 in seen)) { seen[$2] = 1; order[++nn] = $2 }
    step[$1, $2] = $3; mem[$1, $2] = $4; score[$1, $2] = $5
  }
  END {
    print "### " title " (" where ", synthetic)\n"
    printf "%d synthetic users (avg length %s, %d items), batch %d, %d thread(s); ", users, avg, items, batch, threads
    printf "%s `%s`, %s `%s`, both `%s`. ", la, args_a, lb, args_b, common
    print "The training samples are the options'"'"' (--target random: one random prefix a user an epoch, the same prefixes for both models; --target all: every position).\n"
    printf "| N | %s ms/step | %s ms/step | ratio | %s peak MiB | %s peak MiB | ratio | %s score ms/user | %s score ms/user | ratio |\n", la, lb, la, lb, la, lb
    print "|---|---|---|---|---|---|---|---|---|---|"
    for (i = 1; i <= nn; i++) {
      n = order[i]
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n,
        step[ka, n], step[kb, n], ratio(step[kb, n], step[ka, n]),
        mem[ka, n], mem[kb, n], ratio(mem[kb, n], mem[ka, n]),
        score[ka, n], score[kb, n], ratio(score[kb, n], score[ka, n])
    }
    print "\nRatios are " lb " / " la " (below 1: " lb " cheaper). " paper "\n"
  }' "$tsv" > "$md"

if ! command -v gnuplot > /dev/null; then
  echo "len_cost.sh: gnuplot not found: $md and $tsv written, no PNG" >&2
  exit 0
fi
for m in "$ka" "$kb"; do
  awk -v m="$m" '$1 == m { print $2, $3, $4, $5 }' "$tsv" > "$dir/fig3-$m.dat"
done
gnuplot <<GP
call '$(dirname "$0")/png.gp' '1200' '420'
set output '$dir/fig3.png'
set multiplot layout 1,3 title '$title ($where, synthetic, $samples users)'
set grid
set datafile missing '-'
$logx
set xlabel 'N (--max-len)'
set key top left
set title 'training step'
set ylabel 'ms per step'
plot '$dir/fig3-$ka.dat' using 1:2 with linespoints lw 2 title '$la', \
     '$dir/fig3-$kb.dat' using 1:2 with linespoints lw 2 title '$lb'
set title 'training peak memory'
set ylabel '$memlabel'
plot '$dir/fig3-$ka.dat' using 1:3 with linespoints lw 2 title '$la', \
     '$dir/fig3-$kb.dat' using 1:3 with linespoints lw 2 title '$lb'
set title 'inference'
set ylabel 'ms per user (seqrec-score)'
plot '$dir/fig3-$ka.dat' using 1:4 with linespoints lw 2 title '$la', \
     '$dir/fig3-$kb.dat' using 1:4 with linespoints lw 2 title '$lb'
unset multiplot
GP
