#!/bin/sh
# bench/bench-preprocess.sh BIN [OUT.csv] - seqrec-preprocess throughput on a
# ~1M-interaction "user item rating timestamp" TSV log, 5-core, as CSV lines
# "bench,metric,value" (appended to OUT.csv when given). Best of 3 runs.
#
# Three inputs: the log grouped by user (as seqrec-synth and MovieLens write
# it), the same lines shuffled (users interleaved: every lookup and the sort
# do real work), and the shuffled log gzip-compressed (libarchive's filter).
set -eu
BIN=${1:-build/bin}
CSV=${2:-/dev/null}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -x "$BIN/seqrec-synth" ]; then
  "$BIN/seqrec-synth" --users 50300 --items 20000 --mean-len 20 --seed 1 -o "$tmp/log.tsv"
else # same shape without seqrec-synth: 50300 users, zipf-ish items
  awk 'BEGIN { srand(1); t = 900000000
    for (u = 1; u <= 50300; u++) { n = 5 + int(rand() * 30)
      for (k = 0; k < n; k++) { t += int(rand() * 100)
        printf "%d\t%d\t%d\t%d\n", u, 1 + int(20000 * rand() ^ 3), 1 + int(rand() * 5), t } } }' \
    > "$tmp/log.tsv"
fi
# a fixed "random" source keeps the shuffle identical between runs
yes | head -c 10000000 > "$tmp/rand"
shuf --random-source="$tmp/rand" "$tmp/log.tsv" > "$tmp/shuf.tsv"
gzip -1 -c "$tmp/shuf.tsv" > "$tmp/shuf.tsv.gz"
n=$(wc -l < "$tmp/log.tsv" | tr -d ' ')

. "$(dirname "$0")/timing.sh"
rate() { echo "$1 $2" | awk '{printf "%.0f", $1 / $2}'; }
secs() { echo "$1" | awk '{printf "%.3f", $1}'; }

echo "preprocess,interactions,$n" | tee -a "$CSV"
for input in log shuf; do
  t=$(best "$BIN/seqrec-preprocess" --format movielens --core 5 -o "$tmp/out.sqr" "$tmp/$input.tsv")
  echo "preprocess,${input}_seconds,$(secs "$t")" | tee -a "$CSV"
  echo "preprocess,${input}_inter_per_s,$(rate "$n" "$t")" | tee -a "$CSV"
done
t=$(best "$BIN/seqrec-preprocess" --format movielens --core 5 -o "$tmp/out.sqr" "$tmp/shuf.tsv.gz")
echo "preprocess,shuf_gz_seconds,$(secs "$t")" | tee -a "$CSV"
echo "preprocess,shuf_gz_inter_per_s,$(rate "$n" "$t")" | tee -a "$CSV"
