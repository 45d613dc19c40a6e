#!/bin/sh
# seqrec-plot (pipelines/plot.sh) - training curves of seqrec-train's JSON
# logs (--log files) as one PNG: the training loss and a validation metric,
# each against the epoch and against the seconds of the run, a line per
# log, so that runs compare on one picture (seqrec-plot(1)). Copied to
# build/bin with the version filled in, as seqrec-nightly is.
set -eu

VERSION=@VERSION@
ME=seqrec-plot

usage() {
  cat <<USAGE
Usage: $ME [OPTION]... LOG...
Draw the training loss and a validation metric of seqrec-train logs (one
JSON line per epoch: seqrec-train --log) against the epoch and against the
seconds of the run, a line per LOG, into one PNG (gnuplot).

  -o, --output PNG     the picture (default curves.png), written atomically
  -m, --metric M       the validation metric: ndcg@10 (default), hr@10,
                       mrr@10, or the stop metric a log names (mrr@20)
  -n, --names A,B,...  the legend's names of the LOGs, in order (default:
                       a LOG's file name without .jsonl/.json/.log, or its
                       directory's name when that leaves "log")
  -t, --title TEXT     the picture's title
  -h, --help           show this help and exit
  -V, --version        show the version and exit

Exit status: 0 ok, 64 usage, 65 a LOG that is not a training log (naming
its line), 66 a missing LOG, 69 no gnuplot, 73 cannot create PNG.
USAGE
}

die() { code=$1; shift; echo "$ME: $*" >&2; exit "$code"; }
usage_error() { echo "$ME: $*" >&2; echo "Try '$ME --help' for more information." >&2; exit 64; }

out=curves.png metric=ndcg@10 names= title=
while [ $# -gt 0 ]; do
  case $1 in
    -o|--output|-m|--metric|-n|--names|-t|--title)
      [ $# -ge 2 ] || usage_error "option '$1' requires an argument"
      case $1 in
        -o|--output) out=$2 ;; -m|--metric) metric=$2 ;;
        -n|--names) names=$2 ;; -t|--title) title=$2 ;;
      esac
      shift 2 ;;
    --output=*) out=${1#*=}; shift ;;
    --metric=*) metric=${1#*=}; shift ;;
    --names=*) names=${1#*=}; shift ;;
    --title=*) title=${1#*=}; shift ;;
    -h|--help) usage || exit 74; exit 0 ;; # 74: stdout refused it (a full disk)
    -V|--version) echo "$ME (seqrec) $VERSION" || exit 74; exit 0 ;;
    --) shift; break ;;
    -?*) usage_error "unknown option '$1'" ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage_error "no LOG: give one or more seqrec-train --log files"
case $metric in
  hr@[0-9]*|ndcg@[0-9]*|mrr@[0-9]*|recall@[0-9]*) ;;
  *) usage_error "--metric '$metric': hr@K, ndcg@K, mrr@K or recall@K" ;;
esac
[ -n "$out" ] && [ "$out" != - ] || usage_error "--output: a PNG file, not standard output"
if [ -n "$names" ]; then
  n_names=$(printf '%s\n' "$names" | awk -F, '{ print NF }')
  [ "$n_names" -eq $# ] || usage_error "--names gives $n_names names for $# LOGs"
fi
[ ! -d "$out" ] || die 73 "$out: is a directory"
command -v gnuplot > /dev/null || die 69 "gnuplot not found (apt-get install gnuplot-nox)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/seqrec-plot.XXXXXX")
part="$out.tmp.$$"
trap 'rm -rf "$tmp"; rm -f "$part"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# A LOG's epoch lines as "epoch loss metric seconds-so-far" ("?" for a
# metric the epoch did not validate); 65 naming a line that is no JSON.
i=0
for log in "$@"; do
  i=$((i + 1))
  [ -r "$log" ] && [ -f "$log" ] || die 66 "$log: cannot open"
  awk -v m="$metric" -v f="$log" '
    function num(key,   s) {
      if (!match($0, "\"" key "\":-?[0-9][0-9.eE+-]*")) return ""
      s = substr($0, RSTART, RLENGTH); sub(/^.*:/, "", s); return s
    }
    /^[ \t]*$/ { next }
    !/^\{.*\}[ \t\r]*$/ { printf "%s:%d: not a JSON line of seqrec-train\n", f, NR > "/dev/stderr"; bad = 1; exit 65 }
    !/"epoch":/ { next }
    {
      e = num("epoch"); l = num("loss"); s = num("seconds")
      if (e == "" || l == "" || s == "") { printf "%s:%d: an epoch line without loss or seconds\n", f, NR > "/dev/stderr"; bad = 1; exit 65 }
      v = "?"
      if (match($0, /"valid":\{[^}]*\}/)) {
        obj = substr($0, RSTART, RLENGTH)
        if (match(obj, "\"" m "\":[0-9.eE+-]+")) { v = substr(obj, RSTART, RLENGTH); sub(/^.*:/, "", v) }
      }
      t += s; n++
      printf "%s %s %s %.3f\n", e, l, v, t
    }
    END { if (!bad && !n) { printf "%s: no epoch lines (a seqrec-train --log file)\n", f > "/dev/stderr"; exit 65 } }
  ' "$log" > "$tmp/$i.dat" || exit $?
  if [ -n "$names" ]; then
    name=$(printf '%s\n' "$names" | cut -d, -f"$i")
  else
    base=${log##*/}
    base=${base%.jsonl}; base=${base%.json}; base=${base%.log}
    if [ "$base" = log ] || [ -z "$base" ]; then
      dir=$(dirname "$log")
      base=${dir##*/}
    fi
    name=$base
  fi
  printf '%s\n' "$name" | tr -d '"\\' > "$tmp/$i.name"
done

# the plot commands: a line per LOG in each panel
lines() { # COLUMN-X COLUMN-Y
  j=0 sep=
  while [ $j -lt $i ]; do
    j=$((j + 1))
    printf '%s"%s" using %s:%s with linespoints pt 7 ps 0.6 lc %d title "%s"' "$sep" \
      "$tmp/$j.dat" "$1" "$2" "$j" "$(cat "$tmp/$j.name")"
    sep=', \
  '
  done
}

{
  cat <<GP
set datafile missing "?"
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 1200,800
} else {
  set terminal png noenhanced size 1200,800
}
set output "$part"
set grid
set offsets 0, 0, graph 0.05, graph 0.05
set key bottom right noenhanced
set multiplot layout 2,2 title "$(printf '%s' "${title:-training curves: loss and validation $metric}" | tr -d '"\\')"
set xlabel "epoch"
set ylabel "training loss"
set key top right
plot $(lines 1 2)
set xlabel "seconds"
plot $(lines 4 2)
set key bottom right
set xlabel "epoch"
set ylabel "validation $metric"
plot $(lines 1 3)
set xlabel "seconds"
plot $(lines 4 3)
unset multiplot
GP
} > "$tmp/plot.gp"
gnuplot "$tmp/plot.gp" 2> "$tmp/gp.err" || { cat "$tmp/gp.err" >&2; die 73 "$out: gnuplot failed"; }
[ -s "$part" ] || die 73 "$out: gnuplot wrote nothing"
mv -T "$part" "$out" 2> "$tmp/mv.err" || { cat "$tmp/mv.err" >&2; die 73 "$out: cannot create"; }
