#!/bin/sh
# bench/bench-stream.sh BIN OUT.csv - stream throughput of seqrec-cat --verify
# and seqrec-pad on a large synthetic stream (page-cached file input), as
# CSV lines "bench,metric,value". Best of 3 runs.
set -eu
BIN=$1 CSV=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$BIN/seqrec-synth" --users 500000 --mean-len 20 --seed 3 --format stream -o "$tmp/seq.sqr"
"$BIN/seqrec-split" --leave-one-out "$tmp/seq.sqr" -o "$tmp/split.sqr" 2>/dev/null
. "$(dirname "$0")/timing.sh"
mb() { echo "$1 $2" | awk '{printf "%.1f", $1 / 1e6 / $2}'; }
size=$(stat -c %s "$tmp/seq.sqr")
ssize=$(stat -c %s "$tmp/split.sqr")
t=$(best sh -c "'$BIN/seqrec-cat' --verify '$tmp/seq.sqr'")
echo "stream,cat_verify_MBps,$(mb "$size" "$t")" | tee -a "$CSV"
t=$(best sh -c "cat '$tmp/seq.sqr' | '$BIN/seqrec-cat' --verify")
echo "stream,cat_verify_pipe_MBps,$(mb "$size" "$t")" | tee -a "$CSV"
t=$(best sh -c "'$BIN/seqrec-pad' --len 50 '$tmp/split.sqr' > /dev/null")
echo "stream,pad_zero_MBps_in,$(mb "$ssize" "$t")" | tee -a "$CSV"
t=$(best sh -c "'$BIN/seqrec-pad' --len 50 --mode randompad --seed 1 '$tmp/split.sqr' > /dev/null")
echo "stream,pad_randompad_MBps_in,$(mb "$ssize" "$t")" | tee -a "$CSV"
echo "stream,stream_bytes,$size" | tee -a "$CSV"
