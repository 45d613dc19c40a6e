#!/bin/sh
# sweep.sh - the steps of make sweep (pipelines/sweep.mk; seqrec-train(1)
# SWEEPS):
#   sweep.sh plan OUT MODEL EPOCHS SAMPLES SEED BASECONF GRID
#       the grid's runs: OUT/runs/RUN/run.conf (rewritten only when it
#       changes, so that a finished run stays finished), OUT/runs.mk (the
#       list make includes), OUT/grid.keys; every run.conf checked by
#       seqrec-train (64 naming the file and line of a bad setting)
#   sweep.sh run RUNDIR SPLIT
#       one run: trained (or resumed from its checkpoint), its test targets
#       scored, RUNDIR/result.json
#   sweep.sh table OUT
#       OUT/table.md, OUT/table.tsv (best validation NDCG@10 first),
#       OUT/best.conf, OUT/curves.png
# Environment: SWEEP_BIN (the programs), SWEEP_THREADS, SWEEP_BEST.
set -eu
BIN=${SWEEP_BIN:-build/bin}
ME=sweep

die() { code=$1; shift; echo "$ME: $*" >&2; exit "$code"; }

# replace FILE: the new content on stdin, moved over FILE only when it differs
replace() {
  cat > "$1.tmp.$$"
  if cmp -s "$1.tmp.$$" "$1"; then rm -f "$1.tmp.$$"; else mv "$1.tmp.$$" "$1"; fi
}

# The grid's points, one a line: NAME<TAB>KEY=VALUE<TAB>... (config keys), in
# grid order (the first key slowest), from the words of GRID and the
# KEY<TAB>--OPTION lines of seqrec-train --config-keys (file $2).
points() {
  printf '%s\n' "$1" | tr ' \t' '\n\n' | grep -v '^$' | awk -v keys="$2" -v model="$3" '
    BEGIN {
      while ((getline l < keys) > 0) { split(l, f, "\t"); byopt[f[2]] = f[1]; bykey[f[1]] = f[1] }
    }
    {
      eq = index($0, "=")
      if (eq < 2 || eq == length($0)) { printf "GRID: %s: not KEY=V1,V2,...\n", $0 > "/dev/stderr"; exit 64 }
      user = substr($0, 1, eq - 1); vals = substr($0, eq + 1)
      ck = ("--" user) in byopt ? byopt["--" user] : (user in bykey ? user : "")
      if (ck == "" || ck == "train.epochs") {
        printf "GRID: %s is not a setting of --model %s%s\n", user, model, ck == "" ? " (seqrec-train --model " model " --config-keys)" : " (give EPOCHS=N)" > "/dev/stderr"; exit 64
      }
      if (ck in seen) { printf "GRID: %s given twice\n", user > "/dev/stderr"; exit 64 }
      seen[ck] = 1
      n = split(vals, v, ",")
      for (i = 1; i <= n; i++) if (v[i] == "") { printf "GRID: %s: an empty value\n", $0 > "/dev/stderr"; exit 64 }
      nk++; uk[nk] = user; cfk[nk] = ck; nv[nk] = n
      for (i = 1; i <= n; i++) val[nk, i] = v[i]
    }
    END {
      if (nk == 0) exit
      for (k = 1; k <= nk; k++) idx[k] = 1
      while (1) {
        name = ""; line = ""
        for (k = 1; k <= nk; k++) {
          s = uk[k] val[k, idx[k]]; gsub(/[^A-Za-z0-9.+-]/, "-", s)
          name = name (k > 1 ? "_" : "") s
          line = line "\t" cfk[k] "=" val[k, idx[k]]
        }
        print name line
        for (k = nk; k >= 1 && ++idx[k] > nv[k]; k--) idx[k] = 1
        if (k < 1) break
      }
      for (k = 1; k <= nk; k++) printf "%s\t%s\n", uk[k], cfk[k] > (keys ".grid")
    }'
}

plan() {
  out=$1 model=$2 epochs=$3 samples=$4 seed=$5 base=$6 grid=$7
  [ -n "$grid" ] || die 64 "say GRID='KEY=V1,V2 ...' (e.g. GRID='lr=1e-3,3e-4 dim=64,128')"
  case $samples in ''|[1-9]|[1-9][0-9]|[1-9][0-9][0-9]|[1-9][0-9][0-9][0-9]) ;;
    *) die 64 "SAMPLES=$samples: a number of runs, 1 to 9999" ;; esac
  case $seed in [0-9]|[0-9]*[0-9]) ;; *) die 64 "SWEEP_SEED=$seed: an unsigned integer" ;; esac
  case $epochs in ''|[1-9]|[1-9]*[0-9]) ;; *) die 64 "EPOCHS=$epochs: a number of epochs" ;; esac
  if [ -n "$base" ]; then
    [ -r "$base" ] && [ -f "$base" ] || die 66 "SWEEP_CONFIG=$base: cannot read it"
    if [ "$(head -c 4 "$base")" = SQRM ]; then
      basetext=$("$BIN/seqrec-cat" --header "$base" | sed -n 's/^config\t//p') || exit 65
    else
      basetext=$(cat "$base")
    fi
    # the base's model unless MODEL is given
    [ -n "$model" ] || model=$(printf '%s\n' "$basetext" | sed -n 's/^\(config\t\)\{0,1\}model=//p' | tail -n 1)
  fi
  model=${model:-sasrec}
  mkdir -p "$out/runs"
  keys="$out/keys.tmp.$$"
  trap 'rm -f "$keys" "$keys.grid" "$out/points.tmp.$$" "$out/check.tmp.$$"' EXIT
  "$BIN/seqrec-train" --model "$model" --config-keys > "$keys" || exit $?
  grep -q '^train\.' "$keys" || die 64 "MODEL=$model fits in one pass: it has nothing to sweep"
  points "$grid" "$keys" "$model" > "$out/points.tmp.$$" || exit 64
  total=$(wc -l < "$out/points.tmp.$$")
  # the names must differ once their characters are made safe for make
  dup=$(cut -f1 "$out/points.tmp.$$" | sort | uniq -d | head -n 1)
  [ -z "$dup" ] || die 64 "GRID: two points are both named $dup: use values that differ in letters, digits, '.', '+' or '-'"
  if [ -n "$samples" ] && [ "$samples" -lt "$total" ]; then
    # n points drawn by the seed: the smallest CRCs of SEED:NAME
    cut -f1 "$out/points.tmp.$$" | while read -r name; do
      printf '%s %s\n' "$(printf '%s:%s' "$seed" "$name" | cksum | cut -d' ' -f1)" "$name"
    done | sort -n -k1,1 -k2 | head -n "$samples" | cut -d' ' -f2 > "$out/picked.tmp.$$"
    awk -F'\t' 'NR == FNR { keep[$1] = 1; next } $1 in keep' "$out/picked.tmp.$$" \
      "$out/points.tmp.$$" > "$out/points.tmp.$$.s"
    rm -f "$out/picked.tmp.$$"
    mv "$out/points.tmp.$$.s" "$out/points.tmp.$$"
  fi
  while IFS= read -r line; do
    name=${line%%	*}
    dir="$out/runs/$name"
    mkdir -p "$dir"
    {
      echo "# make sweep: run $name (pipelines/sweep.sh)"
      if [ -n "$base" ]; then echo "# SWEEP_CONFIG=$base"; printf '%s\n' "$basetext"; fi
      echo "# the sweep's settings"
      echo "model=$model"
      [ -z "$epochs" ] || echo "train.epochs=$epochs"
      printf '%s\n' "$line" | cut -f2- | tr '\t' '\n'
    } > "$out/check.tmp.$$"
    "$BIN/seqrec-train" --config "$out/check.tmp.$$" --config-keys > /dev/null 2> "$out/check.tmp.$$.err" || {
      rc=$?; sed "s|$out/check.tmp.$$|$dir/run.conf|" "$out/check.tmp.$$.err" >&2; rm -f "$out/check.tmp.$$.err"; exit $rc; }
    rm -f "$out/check.tmp.$$.err"
    replace "$dir/run.conf" < "$out/check.tmp.$$"
    printf '%s\n' "$line" | cut -f2- | tr '\t' '\n' | sed 's/^[^=]*=//' | paste -sd '\t' - | replace "$dir/point.tsv"
  done < "$out/points.tmp.$$"
  replace "$out/grid.keys" < "$keys.grid"
  cut -f1 "$out/points.tmp.$$" | replace "$out/runs.list"
  { printf 'SWEEP_RUNS :='; cut -f1 "$out/points.tmp.$$" | tr '\n' ' '; echo; } | replace "$out/runs.mk"
  n=$(wc -l < "$out/points.tmp.$$")
  echo "$ME: $n of $total runs of --model $model in $out/runs"
}

# the number after "KEY": in a JSON line (a key the line has once)
jnum() { sed -n "s/.*\"$1\": *\([-0-9.eE+]*\).*/\1/p" | head -n 1; }

six() { awk '{ printf "%.6f", $1 }'; }

run() {
  dir=$1 split=$2
  conf="$dir/run.conf" m="$dir/model.sqm" name=${1##*/}
  t=${SWEEP_THREADS:-1}
  rm -f "$dir/result.json"
  if [ -f "$m" ] && [ "$m" -nt "$conf" ]; then
    echo "$ME: $name: trained"
  elif [ -f "$m.ckpt" ] && [ "$m.ckpt" -nt "$conf" ]; then
    echo "$ME: $name: resuming $m.ckpt"
    "$BIN/seqrec-train" --resume "$m.ckpt" --threads "$t" --log "$dir/log.jsonl" "$split"
  else
    rm -f "$m" "$m.ckpt" "$dir/log.jsonl" "$dir/test.json"
    echo "$ME: $name: seqrec-train --config $conf --threads $t --log $dir/log.jsonl -o $m $split"
    "$BIN/seqrec-train" --config "$conf" --threads "$t" --log "$dir/log.jsonl" -o "$m" "$split"
  fi
  "$BIN/seqrec-score" -m "$m" --target test --threads "$t" -o "$dir/test.ranks" "$split"
  "$BIN/seqrec-metrics" -k 10 --json "$dir/test.ranks" > "$dir/test.json.tmp"
  mv "$dir/test.json.tmp" "$dir/test.json"
  rm -f "$dir/test.ranks"
  hdr=$("$BIN/seqrec-cat" --header "$m" | sed -n 's/^config\t//p')
  get() { printf '%s\n' "$hdr" | sed -n "s/^$1=//p" | tail -n 1; }
  secs=$(sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p' "$dir/log.jsonl" | awk '{ s += $1 } END { printf "%.2f", s }')
  epochs=$(sed -n 's/^{"epoch":\([0-9]*\),.*/\1/p' "$dir/log.jsonl" | tail -n 1)
  printf '{"run":"%s","epochs":%s,"best_epoch":%s,"valid_hr@10":%s,"valid_ndcg@10":%s,"test_hr@10":%s,"test_ndcg@10":%s,"seconds":%s}\n' \
    "$name" "${epochs:-0}" "$(get train.best_epoch)" "$(get 'valid.hr@10' | six)" "$(get 'valid.ndcg@10' | six)" \
    "$(jnum 'hr@10' < "$dir/test.json")" "$(jnum 'ndcg@10' < "$dir/test.json")" "$secs" > "$dir/result.json.tmp"
  mv "$dir/result.json.tmp" "$dir/result.json"
}

table() {
  out=$1
  tsv="$out/table.tsv.tmp.$$"
  {
    printf 'run'; cut -f1 "$out/grid.keys" | while read -r k; do printf '\t%s' "$k"; done
    printf '\tbest_epoch\tepochs\tvalid_hr@10\tvalid_ndcg@10\ttest_hr@10\ttest_ndcg@10\tseconds\n'
    while read -r name; do
      r="$out/runs/$name/result.json"
      [ -f "$r" ] || die 66 "$r: missing (run make sweep again)"
      printf '%s\t%s' "$name" "$(cat "$out/runs/$name/point.tsv")"
      printf '\t%s' "$(jnum best_epoch < "$r")" "$(jnum epochs < "$r")"
      for k in valid_hr@10 valid_ndcg@10 test_hr@10 test_ndcg@10; do printf '\t%s' "$(jnum "$k" < "$r")"; done
      printf '\t%s\n' "$(jnum seconds < "$r")"
    done < "$out/runs.list" | sort -t '	' -k"$(($(wc -l < "$out/grid.keys") + 5))","$(($(wc -l < "$out/grid.keys") + 5))"gr -k1,1
  } > "$tsv"
  mv "$tsv" "$out/table.tsv"
  awk -F'\t' -v n="$(($(wc -l < "$out/runs.list")))" '
    NR == 1 { print "### Sweep: " n " runs, best validation NDCG@10 first\n"
              h = "|"; s = "|"; for (i = 1; i <= NF; i++) { h = h " " $i " |"; s = s (i == 1 ? " --- |" : " ---: |") }
              print h; print s; next }
    { l = "|"; for (i = 1; i <= NF; i++) l = l " " (i == 1 && NR == 2 ? "**" $i "**" : $i) " |"; print l }
  ' "$out/table.tsv" > "$out/table.md.tmp.$$"
  mv "$out/table.md.tmp.$$" "$out/table.md"
  best=$(sed -n '2p' "$out/table.tsv" | cut -f1)
  cp "$out/runs/$best/run.conf" "$out/best.conf.tmp.$$"
  mv "$out/best.conf.tmp.$$" "$out/best.conf"
  logs=$(sed -n "2,$((${SWEEP_BEST:-3} + 1))p" "$out/table.tsv" | cut -f1 | sed "s|.*|$out/runs/&/log.jsonl|")
  # shellcheck disable=SC2086 # run names hold no spaces
  if command -v gnuplot > /dev/null; then
    "$BIN/seqrec-plot" -t "sweep: the ${SWEEP_BEST:-3} best runs" -o "$out/curves.png" $logs
  else
    echo "$ME: gnuplot not found: no curves.png" >&2
  fi
  cat "$out/table.md"
  echo "$ME: best run $best: $out/best.conf (seqrec-train --config $out/best.conf)"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  plan) [ $# -eq 7 ] || die 64 "plan OUT MODEL EPOCHS SAMPLES SEED BASECONF GRID"; plan "$@" ;;
  run) [ $# -eq 2 ] || die 64 "run RUNDIR SPLIT"; run "$@" ;;
  table) [ $# -eq 1 ] || die 64 "table OUT"; table "$@" ;;
  *) die 64 "usage: sweep.sh plan|run|table ..." ;;
esac
