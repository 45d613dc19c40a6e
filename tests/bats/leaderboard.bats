#!/usr/bin/env bats
# make leaderboard (pipelines/leaderboard.mk, leaderboard.sh): the table
# script on fixed inputs gives the right rows in the right order, and a
# real one-epoch leaderboard of every registered model on a small
# synthetic split fills a row for each.

load helper

setup() {
  common_setup
  P="$SEQREC_ROOT/pipelines"
  mkdir "$T/r"
}


@test "train: --list-models prints every model of --help, NAME<TAB>summary a line" {
  run -0 seqrec-train --list-models
  [ "${#lines[@]}" -ge 11 ]
  for l in "${lines[@]}"; do
    [[ "$l" =~ ^[a-z0-9]+$'\t'.+$ ]] || { echo "bad: $l"; false; }
  done
  help=$(seqrec-train --help)
  for m in $(seqrec-train --list-models | cut -f1); do
    [[ "$help" == *"  $m "* ]] || { echo "$m not in --help"; false; }
  done
  [[ "$output" == *$'sasrec\t'* && "$output" == *$'cl4srec\t'* && "$output" == *$'pop\t'* ]]
}

@test "leaderboard.sh: rows by test NDCG@10, epochs, best epoch, seconds, peak memory; '-' for a model without epochs" {
  printf '{"records": 3, "users": 3, "mrr": 0.5, "hr@10": 0.5, "recall@10": 0.5, "ndcg@10": 0.25, "mrr@10": 0.2, "precision@10": 0.05}\n' > "$T/r/a.json"
  printf '{"records": 3, "users": 3, "mrr": 0.5, "hr@10": 0.6, "recall@10": 0.6, "ndcg@10": 0.35, "mrr@10": 0.3, "precision@10": 0.06}\n' > "$T/r/b.json"
  printf '{"records": 3, "users": 3, "mrr": 0.1, "hr@10": 0.1, "recall@10": 0.1, "ndcg@10": 0.05, "mrr@10": 0.04, "precision@10": 0.01}\n' > "$T/r/pop.json"
  printf '{"epoch":1,"loss":9,"valid":{"hr@10":0.1,"ndcg@10":0.07},"seconds":4.0,"train_seconds":3.0,"max_rss_mib":100.4}\n{"epoch":2,"loss":8,"valid":{"hr@10":0.2,"ndcg@10":0.05},"seconds":6.0,"train_seconds":5.0,"max_rss_mib":120.6}\n' > "$T/r/a.log"
  printf '{"epoch":1,"loss":9,"valid":{"hr@10":0.1,"ndcg@10":0.01},"seconds":1.0,"train_seconds":0.5,"max_rss_mib":50}\n' > "$T/r/b.log"
  printf '{"model":"pop","valid":{"hr@10":0.1,"ndcg@10":0.04}}\n' > "$T/r/pop.log"
  run -0 sh "$P/leaderboard.sh" "$T/r" tiny a pop b
  [[ "$output" == *"| model | HR@10 | NDCG@10 | MRR@10 | epochs | best | s/epoch | train s | peak MiB |"* ]]
  rows=$(grep '^| [a-z]' "$T/r/table.md" | grep -v '^| model' | cut -d' ' -f2 | tr '\n' ' ')
  [ "$rows" = "b a pop " ]
  grep -qx '| a | 0.5000 | 0.2500 | 0.2000 | 2 | 1 | 5.00 | 8.00 | 121 |' "$T/r/table.md"
  grep -qx '| b | 0.6000 | 0.3500 | 0.3000 | 1 | 1 | 1.00 | 0.50 | 50 |' "$T/r/table.md"
  grep -qx '| pop | 0.1000 | 0.0500 | 0.0400 | - | - | - | - | - |' "$T/r/table.md"
  if command -v gnuplot >/dev/null; then [ -s "$T/r/quality.png" ]; fi
  # a missing run is an error that names it
  run sh "$P/leaderboard.sh" "$T/r" tiny a gone
  [ "$status" -eq 1 ]
  [[ "$output" == *"gone.json"* ]]
}

@test "make leaderboard: no DATA is a usage error; an unknown name says what DATA may be" {
  run mk leaderboard BUILD="${SEQREC_BIN%/bin}"
  [ "$status" -ne 0 ]
  [[ "$output" == *"DATA=beauty|ml-1m-part"* ]]
  run mk leaderboard-table DATA=no-such-set BUILD="${SEQREC_BIN%/bin}" MODELS=pop \
    LEADERBOARD_OUT="$T/lb"
  [ "$status" -ne 0 ]
  [[ "$output" == *"neither a file nor beauty"* ]]
}

@test "make leaderboard DATA=FILE EPOCHS=1: every registered model trained, scored and in the table" {
  seqrec-synth --users 150 --items 60 --seed 7 --format stream | seqrec-split -o "$T/lbtest.split"
  out="$T/lb"
  run mk leaderboard-table DATA="$T/lbtest.split" EPOCHS=1 BUILD="${SEQREC_BIN%/bin}" \
    LEADERBOARD_OUT="$out"
  echo "$output" | tail -n 20
  [ "$status" -eq 0 ]
  n=$(seqrec-train --list-models | wc -l)
  [ "$(grep -c '^| [a-z0-9]* | 0\.' "$out/table.md")" -eq "$n" ]
  for m in $(seqrec-train --list-models | cut -f1); do
    grep -q "^| $m | " "$out/table.md" || { echo "no row for $m"; false; }
  done
  # a trained model ran one epoch and has its seconds and memory
  grep -Eq '^\| sasrec \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| 1 \| 1 \| [0-9.]+ \| [0-9.]+ \| [0-9]+ \|$' "$out/table.md"
}
