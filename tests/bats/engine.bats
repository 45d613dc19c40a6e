#!/usr/bin/env bats
# The engine's reference runs (tests/golden/engine/runs.sh): the numbers
# the programs printed before the engine was made model-generic must stay
# the same to the last printed digit, and the model files written then
# must still load and score to the same bytes.

load helper

setup() {
  common_setup
  E="$GOLD/engine"
}

@test "engine: seeded runs of every backbone print the recorded losses, NDCG and top-5" {
  sh "$E/runs.sh" "$T/now"
  for f in "$E"/*.log "$E"/*.top; do
    diff -u "$f" "$T/now/${f##*/}" || { echo "differs: ${f##*/}"; false; }
  done
}

@test "engine: model files written before the refactor score to the same bytes" {
  seqrec-synth --users 120 --items 50 --seed 3 --format stream | seqrec-split 2>/dev/null > "$T/data.sqr"
  for m in "$E"/*.sqm; do
    name=${m##*/}
    seqrec-score -m "$m" --topk 5 "$T/data.sqr" > "$T/${name%.sqm}.top"
    cmp "$E/${name%.sqm}.top" "$T/${name%.sqm}.top"
  done
}
