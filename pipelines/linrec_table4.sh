#!/bin/sh
# linrec_table4.sh DIR "RUN:GB/TRAIN_S/EVAL_S ..." - LinRec Table 4: the
# cost of SASRec, BERT4Rec and CORE without and with LinRec, from the
# training logs DIR/RUN.log (seqrec-train's epoch lines): peak memory (the
# largest device_mib on a GPU run: the device memory its allocations held,
# as the paper's GPU memory; else the largest max_rss_mib, the process's
# on the CPU), mean train_seconds and mean eval_seconds an epoch, each with
# the with/without ratio beside the paper's (GPU memory in GB and seconds on
# its GPU: only the ratios compare; a pair of runs, one on each device, has
# no memory ratio). A run without a log is "not run".
set -eu
dir=$1 paper=$2
# stats RUN: "PEAK_MIB TRAIN_S EVAL_S EPOCHS WHERE" of DIR/RUN.log (WHERE:
# gpu or cpu, what the peak is of), or "-"
stats() {
  f=$dir/$1.log
  if [ ! -s "$f" ]; then echo -; return; fi
  awk '
    function get(s, key,   v) {
      if (match(s, "\"" key "\": *[0-9.e+-]+")) {
        v = substr(s, RSTART, RLENGTH); sub(/.*: */, "", v); return v + 0
      }
      return -1
    }
    /"epoch"/ {
      n++; r = get($0, "max_rss_mib"); if (r > peak) peak = r
      d = get($0, "device_mib"); if (d > dpeak) dpeak = d
      t = get($0, "train_seconds"); if (t >= 0) { ts += t; tn++ }
      e = get($0, "eval_seconds"); if (e >= 0) { es += e; en++ }
    }
    END {
      if (dpeak > 0) peak = dpeak
      p = (peak > 0) ? sprintf("%.1f", peak) : "-"
      t = tn ? sprintf("%.1f", ts / tn) : "-"
      e = en ? sprintf("%.1f", es / en) : "-"
      printf "%s %s %s %d %s\n", p, t, e, n, (dpeak > 0 ? "gpu" : "cpu")
    }' "$f"
}
cell() { for c in $paper; do [ "${c%%:*}" = "$1" ] && { echo "${c#*:}" | cut -d/ -f"$2"; return; }; done; echo -; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
printf '### LinRec Table 4: cost without (w/o) and with (w) LinRec\n\n'
printf '| model | peak MiB w/o | w | ratio | paper ratio | train s/epoch w/o | w | ratio | paper ratio | eval s/epoch w/o | w | ratio | paper ratio | epochs w/o, w |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n'
wheres=
for m in sasrec bert4rec core; do
  a=$(stats "$m") b=$(stats "$m-linrec")
  if [ "$a" = - ] && [ "$b" = - ]; then printf '| %s | (not run) |\n' "$m"; continue; fi
  [ "$a" = - ] && a="- - - 0 -"
  [ "$b" = - ] && b="- - - 0 -"
  set -- $a $b
  wheres="$wheres $5 ${10}"
  line="| $m"
  for i in 1 2 3; do
    eval "x=\${$i} y=\${$((i + 5))}"
    r=$(ratio "$y" "$x")
    # a CPU's resident set against a GPU's device memory is no ratio
    [ "$i" = 1 ] && [ "$5" != "${10}" ] && r=-
    line="$line | $x | $y | $r | $(ratio "$(cell "$m-linrec" "$i")" "$(cell "$m" "$i")")"
  done
  printf '%s | %s, %s |\n' "$line" "$4" "$9"
done
case $wheres in
  *gpu*cpu* | *cpu*gpu*) ours='Ours: one process each, on the GPU or the CPU (peak = the device memory the run'"'"'s allocations held on a GPU, the maximum resident set on the CPU: no ratio across the two; seconds on this machine)' ;;
  *gpu*) ours='Ours: one process each on the GPU (peak = the device memory the run'"'"'s allocations held, as PyTorch'"'"'s max_memory_allocated; seconds on this machine'"'"'s GPU)' ;;
  *) ours='Ours: one CPU process each (peak = maximum resident set, data and model included; seconds on this machine, LINREC_THREADS threads)' ;;
esac
printf '\n%s. The paper: GPU memory and seconds on one GPU (its Table 4: SASRec 21.07 GB -> 8.72 GB, 121 -> 44 s training). Only the ratios compare.\n\n' "$ours"
