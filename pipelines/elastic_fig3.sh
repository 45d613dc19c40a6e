#!/bin/sh
# elastic_fig3.sh DIR - ELASTIC Figure 3 (elastic.txt): the cost of ELASTIC
# against SASRec as the maximum sequence length N grows (the paper: XLong,
# avg length 958.8, N in {64, 128, 256, 512, 1024}, GPU memory in training
# and inference latency). Here, on this machine's CPU and on seqrec-synth
# sequences of about the same average length (XLong is not public), one
# model after the other (never side by side, so that the timings are
# alone), for every N:
#
#   step time   seconds of training of the last epoch / its steps, where
#               the seconds are samples / seq_per_s of the training log
#               (training only, validation excluded) and the steps
#               ceil(samples / batch), samples = users (one sample a user
#               an epoch: both models train --target random, ELASTIC's
#               default, so that they see the same prefixes and the step
#               time compares the models on the same inputs)
#   peak memory the training process's maximum RSS, from GNU time's %M
#               (/usr/bin/time); without it, a "...rss..." field of the
#               training log if it has one (KiB, or MiB for a _mb key),
#               else "-"
#   inference   seqrec-score's wall seconds (full ranking of the test
#               targets) / users
#
# Writes DIR/synth.split, DIR/MODEL-N.{log,sqm,time,score.time},
# DIR/fig3.tsv (model N ms_per_step peak_mib score_ms_per_user epoch_s),
# DIR/fig3.md (the table, with ELASTIC/SASRec ratios) and DIR/fig3.png
# (gnuplot; skipped with a message when it is absent).
#
# Knobs (environment): SEQREC_BIN (programs, default build/bin), FIG3_NS
# (default "64 128 256 512 1024"), FIG3_USERS (256), FIG3_ITEMS (1000),
# FIG3_MEAN_LEN (959) and FIG3_MAX_SEQ (2000: seqrec-synth --mean-len and
# --max-len; the average comes out near 960-980), FIG3_BATCH (64),
# FIG3_EPOCHS (1), FIG3_THREADS (1), FIG3_COMMON (the options of both
# models), FIG3_SASREC and FIG3_ELASTIC (each model's own: the paper's
# XLong setting, pool 32x32 and top-16, for ELASTIC).
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
sasrec=${FIG3_SASREC:---model sasrec --attn softmax --target random}
elastic=${FIG3_ELASTIC:---model elastic --pool 32x32 --topk-experts 16}
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
  for m in sasrec elastic; do
    if [ "$m" = sasrec ]; then args=$sasrec; else args=$elastic; fi
    echo "elastic_fig3.sh: $m N=$n" >&2
    # shellcheck disable=SC2086
    measure "$dir/$m-$n.time" "$bin/seqrec-train" $args $common --max-len "$n" \
      --batch "$batch" --epochs "$epochs" --patience 0 --threads "$threads" \
      --log "$dir/$m-$n.log" -o "$dir/$m-$n.sqm" "$split"
    measure "$dir/$m-$n.score.time" "$bin/seqrec-score" -m "$dir/$m-$n.sqm" --target test \
      --candidates full --threads "$threads" -o "$dir/$m-$n.ranks" "$split"
    awk -v m="$m" -v n="$n" -v samples="$samples" -v batch="$batch" -v gnutime="$gnutime" \
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
        if (gnutime == 1) {
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
    -v sasrec="$sasrec" -v elastic="$elastic" -v common="$common" '
  function ratio(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }
  NR > 1 {
    if (!($2 in seen)) { seen[$2] = 1; order[++nn] = $2 }
    step[$1, $2] = $3; mem[$1, $2] = $4; score[$1, $2] = $5
  }
  END {
    print "### ELASTIC Figure 3: ELASTIC against SASRec by maximum length N (CPU, synthetic)\n"
    printf "%d synthetic users (avg length %s, %d items), batch %d, %d thread(s); ", users, avg, items, batch, threads
    printf "SASRec `%s`, ELASTIC `%s`, both `%s`. ", sasrec, elastic, common
    print "The training samples are the options'"'"' (by default both --target random: one random prefix a user an epoch, the same prefixes for both models).\n"
    print "| N | SASRec ms/step | ELASTIC ms/step | ratio | SASRec peak MiB | ELASTIC peak MiB | ratio | SASRec score ms/user | ELASTIC score ms/user | ratio |"
    print "|---|---|---|---|---|---|---|---|---|---|"
    for (i = 1; i <= nn; i++) {
      n = order[i]
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n,
        step["sasrec", n], step["elastic", n], ratio(step["elastic", n], step["sasrec", n]),
        mem["sasrec", n], mem["elastic", n], ratio(mem["elastic", n], mem["sasrec", n]),
        score["sasrec", n], score["elastic", n], ratio(score["elastic", n], score["sasrec", n])
    }
    print "\nRatios are ELASTIC / SASRec (below 1: ELASTIC cheaper). The paper (XLong, GPU, N = 1024): about 90% less training memory (ratio ~0.10) and 2.68x faster inference (ratio ~0.37).\n"
  }' "$tsv" > "$md"

if ! command -v gnuplot > /dev/null; then
  echo "elastic_fig3.sh: gnuplot not found: $md and $tsv written, no PNG" >&2
  exit 0
fi
for m in sasrec elastic; do
  awk -v m="$m" '$1 == m { print $2, $3, $4, $5 }' "$tsv" > "$dir/fig3-$m.dat"
done
gnuplot <<GP
call '$(dirname "$0")/png.gp' '1200' '420'
set output '$dir/fig3.png'
set multiplot layout 1,3 title 'ELASTIC Figure 3: ELASTIC vs SASRec by maximum length N (CPU, synthetic, $samples users)'
set grid
set datafile missing '-'
set logscale x 2
set xlabel 'N (--max-len)'
set key top left
set title 'training step'
set ylabel 'ms per step'
plot '$dir/fig3-sasrec.dat' using 1:2 with linespoints lw 2 title 'SASRec', \
     '$dir/fig3-elastic.dat' using 1:2 with linespoints lw 2 title 'ELASTIC'
set title 'training peak memory'
set ylabel 'max RSS (MiB)'
plot '$dir/fig3-sasrec.dat' using 1:3 with linespoints lw 2 title 'SASRec', \
     '$dir/fig3-elastic.dat' using 1:3 with linespoints lw 2 title 'ELASTIC'
set title 'inference'
set ylabel 'ms per user (seqrec-score)'
plot '$dir/fig3-sasrec.dat' using 1:4 with linespoints lw 2 title 'SASRec', \
     '$dir/fig3-elastic.dat' using 1:4 with linespoints lw 2 title 'ELASTIC'
unset multiplot
GP
