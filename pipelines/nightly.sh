#!/bin/sh
# nightly.sh - yesterday's model on today's log: the cron job of
# pipelines/nightly.mk (`make nightly`; every knob is documented there and
# in seqrec-score(1)). Configured by environment variables:
#
#   NIGHTLY_LOG        today's raw interaction log (required)
#   NIGHTLY_MODEL      the model file to score with (required); with
#                      NIGHTLY_FINETUNE=1 it is fine-tuned first and the
#                      result replaces it when the run is published
#   NIGHTLY_DIR        the job's directory (required): ids.map, the last
#                      published stream, the publications, the lock, the log
#   NIGHTLY_PREPROCESS options of seqrec-preprocess (e.g. --format tsv)
#   NIGHTLY_TOPK       items per user (default 10)
#   NIGHTLY_SHARDS     shards scored side by side (default 2)
#   NIGHTLY_THREADS    cores in all, divided among the shards (default: all)
#   NIGHTLY_FULL       1: score every user, not only those whose history
#                      changed since the last publication
#   NIGHTLY_FINETUNE   1: seqrec-train --init NIGHTLY_MODEL on today's stream
#                      first (new items get new ids), NIGHTLY_TRAIN its options
#   NIGHTLY_WAIT       seconds to wait for a running job's lock (default 0:
#                      exit 75 at once, publishing nothing)
#   NIGHTLY_DATE       the publication's date stamp (default: today, UTC)
#   NIGHTLY_BIN        where the programs are (default: PATH)
#
# Steps, each logged as one JSON line (stderr and NIGHTLY_DIR/nightly.log):
# lock, preprocess through the map, (fine-tune), the users to score,
# score the shards in parallel, merge, publish. Publishing renames a dated
# file into NIGHTLY_DIR/pub/ and switches the `latest` link; any failure
# (or SIGINT, SIGTERM, SIGHUP) removes the run's work directory, exits
# non-zero and leaves the last publication, map, stream and model as they
# were.
set -eu

die() { echo "nightly: $*" >&2; exit 1; }
: "${NIGHTLY_LOG:?nightly: set NIGHTLY_LOG (today's log)}"
: "${NIGHTLY_MODEL:?nightly: set NIGHTLY_MODEL (the model file)}"
: "${NIGHTLY_DIR:?nightly: set NIGHTLY_DIR (the job's directory)}"
TOPK=${NIGHTLY_TOPK:-10}
SHARDS=${NIGHTLY_SHARDS:-2}
THREADS=${NIGHTLY_THREADS:-$(nproc 2>/dev/null || echo 2)}
FULL=${NIGHTLY_FULL:-0}
FINETUNE=${NIGHTLY_FINETUNE:-0}
WAIT=${NIGHTLY_WAIT:-0}
DATE=${NIGHTLY_DATE:-$(date -u +%Y%m%d)}
BIN=${NIGHTLY_BIN:+$NIGHTLY_BIN/}
case $TOPK$SHARDS$THREADS in *[!0-9]*) die "NIGHTLY_TOPK, _SHARDS, _THREADS must be numbers";; esac
[ "$SHARDS" -ge 1 ] || die "NIGHTLY_SHARDS must be at least 1"
[ -r "$NIGHTLY_LOG" ] || { echo "nightly: $NIGHTLY_LOG: cannot read the log" >&2; exit 66; }
[ -r "$NIGHTLY_MODEL" ] || { echo "nightly: $NIGHTLY_MODEL: cannot read the model" >&2; exit 66; }
mkdir -p "$NIGHTLY_DIR/pub" || exit 73
D=$NIGHTLY_DIR

now() { date +%s.%N; }
# log STEP START KEY=VALUE...: one JSON line (numbers stay numbers; empty
# values are left out)
log() {
    step=$1 t0=$2; shift 2
    line=$(awk -v s="$step" -v t0="$t0" -v t1="$(now)" 'BEGIN {
        printf "{\"step\":\"%s\",\"seconds\":%.3f", s, t1 - t0
        for (i = 1; i < ARGC; i++) { k = ARGV[i]; sub(/=.*/, "", k); v = substr(ARGV[i], length(k) + 2)
            if (v == "") continue
            if (v ~ /^-?[0-9]+(\.[0-9]+)?$/) printf ",\"%s\":%s", k, v; else printf ",\"%s\":\"%s\"", k, v }
        print "}" }' "$@")
    echo "$line" >&2
    echo "$line" >> "$D/nightly.log"
}

# The lock: one run at a time (flock on a descriptor held to the end).
exec 9>"$D/.lock"
t=$(now)
if ! flock -w "$WAIT" 9; then
    log lock "$t" status=busy
    echo "nightly: another run holds $D/.lock; nothing done" >&2
    exit 75
fi
log lock "$t" status=taken

W=$(mktemp -d "$D/.run.XXXXXX")
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    rm -rf "$W"
}
trap 'cleanup' EXIT
trap 'cleanup; trap - EXIT; exit 143' TERM
trap 'cleanup; trap - EXIT; exit 130' INT
trap 'cleanup; trap - EXIT; exit 129' HUP

# 1. today's log through yesterday's map, under the model's dataset name
# (the model refuses a stream of another dataset)
t=$(now)
dataset=$(${BIN}seqrec-cat --header "$NIGHTLY_MODEL" |
    awk -F'\t' '$1 == "config" && $2 ~ /^data\.dataset=/ { sub(/^data\.dataset=/, "", $2); print $2 }')
set -- --dataset "${dataset:-nightly}" --map "$W/ids.map" --stats
if [ -f "$D/ids.map" ]; then
    set -- "$@" --map-in "$D/ids.map" --new-items "$([ "$FINETUNE" = 1 ] && echo append || echo drop)"
fi
# shellcheck disable=SC2086
${BIN}seqrec-preprocess ${NIGHTLY_PREPROCESS:-} "$@" "$NIGHTLY_LOG" 2>"$W/stats.txt" \
    > "$W/seq.sqr" || { cat "$W/stats.txt" >&2; exit 1; }
${BIN}seqrec-split --leave-one-out -o "$W/today.split" "$W/seq.sqr" 2>/dev/null
stat_of() { awk -F'\t' -v k="$1" '$1 == k { print $2 }' "$W/stats.txt"; }
users=$(stat_of users)
log preprocess "$t" users="$users" items="$(stat_of items)" interactions="$(stat_of interactions)" \
    new_users="$(stat_of new_users)" dropped_items="$(stat_of dropped_new_items)" \
    dropped_interactions="$(stat_of dropped_interactions)"

# 2. fine-tune yesterday's model (optional)
model=$NIGHTLY_MODEL
if [ "$FINETUNE" = 1 ]; then
    t=$(now)
    # shellcheck disable=SC2086
    ${BIN}seqrec-train --init "$NIGHTLY_MODEL" ${NIGHTLY_TRAIN:---epochs 1} --threads "$THREADS" \
        --log "$W/train.log" -o "$W/model.sqm" "$W/today.split"
    model=$W/model.sqm
    log finetune "$t" epochs="$(wc -l < "$W/train.log")"
fi

# 3. the users to score: all, or those whose sequence changed (or is new)
t=$(now)
if [ "$FULL" = 1 ] || [ ! -f "$D/last.split" ] || [ ! -e "$D/latest" ]; then
    scope=all
    userarg=""
    n_users=$users
else
    scope=changed
    ${BIN}seqrec-cat "$D/last.split" | cut -f1-4 | LC_ALL=C sort > "$W/old.txt"
    ${BIN}seqrec-cat "$W/today.split" | cut -f1-4 | LC_ALL=C sort > "$W/new.txt"
    # dense ids of changed users -> their original ids (the map's user lines)
    LC_ALL=C comm -13 "$W/old.txt" "$W/new.txt" | cut -f1 > "$W/changed.dense"
    awk -F'\t' 'NR == FNR { want[$1] = 1; next } $1 == "user" && ($2 in want) { print $3 }' \
        "$W/changed.dense" "$W/ids.map" > "$W/users.txt"
    userarg="--users $W/users.txt"
    n_users=$(wc -l < "$W/users.txt")
fi
log users "$t" scope="$scope" users="$n_users"

# 4. the shards, side by side, the cores divided among them
t=$(now)
per=$((THREADS / SHARDS))
[ "$per" -ge 1 ] || per=1
i=0
while [ "$i" -lt "$SHARDS" ]; do
    # shellcheck disable=SC2086
    ${BIN}seqrec-score -m "$model" --topk "$TOPK" --map "$W/ids.map" --shard "$i/$SHARDS" \
        $userarg -j "$per" -o "$W/part.$i" "$W/today.split" 2>"$W/score.$i.err" &
    pids="$pids $!"
    i=$((i + 1))
done
failed=0
for p in $pids; do wait "$p" || failed=$((failed + 1)); done
pids=""
if [ "$failed" -gt 0 ]; then
    cat "$W"/score.*.err >&2
    log score "$t" shards="$SHARDS" failed="$failed"
    echo "nightly: $failed of $SHARDS shards failed; nothing published" >&2
    exit 1
fi
log score "$t" shards="$SHARDS" threads_per_shard="$per"

# 5. merge: today's lines, and the last publication's for users not scored
t=$(now)
cat "$W"/part.* > "$W/new.tsv"
if [ "$scope" = changed ]; then
    awk -F'\t' 'NR == FNR { seen[$1] = 1; print; next } !($1 in seen)' \
        "$W/new.tsv" "$D/latest" > "$W/merged.tsv"
else
    cp "$W/new.tsv" "$W/merged.tsv"
fi
LC_ALL=C sort -t "$(printf '\t')" -k1,1 "$W/merged.tsv" > "$W/top.tsv"
log merge "$t" users="$(wc -l < "$W/top.tsv")" scored="$(wc -l < "$W/new.tsv")"

# 6. publish: the dated file, then the link, then the state
t=$(now)
pub=pub/top$TOPK-$DATE.tsv
mv "$W/top.tsv" "$D/$pub.tmp"
mv "$D/$pub.tmp" "$D/$pub"
ln -sfn "$pub" "$D/.latest.tmp"
mv -T "$D/.latest.tmp" "$D/latest"
mv "$W/ids.map" "$D/ids.map"
mv "$W/today.split" "$D/last.split"
[ "$FINETUNE" = 1 ] && mv "$W/model.sqm" "$NIGHTLY_MODEL"
log publish "$t" file="$pub"
