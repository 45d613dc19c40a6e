#!/bin/sh
# config_keys.sh - the keys of seqrec-train --config, each model's, as the
# roff block of seqrec-train(1) CONFIGURATION FILES, from the option tables
# (seqrec-train --config-keys), so that the page cannot drift from them:
#   config_keys.sh [SEQREC-TRAIN]           print the block
#   config_keys.sh --update PAGE [SEQREC-TRAIN]
#                                           replace the block in PAGE
#                                           (make man-config-keys)
# tests/bats/config.bats compares the page's block with the printed one.
set -eu
update=
if [ "${1:-}" = --update ]; then
  update=$2
  shift 2
fi
train=${1:-build/bin/seqrec-train}

# KEY<TAB>--OPTION lines on stdin -> "key, key, ..." (roff-escaped hyphens)
join() { cut -f1 | sed 's/-/\\-/g' | paste -sd, - | sed 's/,/, /g'; }

block() {
  echo '.\" BEGIN CONFIG KEYS (make man-config-keys writes this block)'
  echo '.TP'
  echo '.B every trained model'
  "$train" --model sasrec --config-keys | grep '^train\.' | join
  "$train" --list-models | cut -f1 | while read -r m; do
    echo '.TP'
    echo ".B $m"
    keys=$("$train" --model "$m" --config-keys | grep -v '^train\.' | join)
    echo "${keys:-(none: nothing to set)}"
  done
  echo '.\" END CONFIG KEYS'
}

if [ -z "$update" ]; then
  block
  exit 0
fi
new=$(mktemp "$update.XXXXXX")
trap 'rm -f "$new" "$new.b"' EXIT
block > "$new.b"
awk -v b="$new.b" '
  /^\.\\" BEGIN CONFIG KEYS/ { while ((getline l < b) > 0) print l; skip = 1; next }
  /^\.\\" END CONFIG KEYS/ { skip = 0; next }
  !skip { print }' "$update" > "$new"
grep -q 'BEGIN CONFIG KEYS' "$new" || { echo "config_keys.sh: $update has no BEGIN CONFIG KEYS line" >&2; exit 65; }
mv "$new" "$update"
trap - EXIT
rm -f "$new.b"
