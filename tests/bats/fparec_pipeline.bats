#!/usr/bin/env bats
# make reproduce-fparec-attn / reproduce-fparec-sasrec (pipelines/fparec.mk):
# fparec_table.sh writes doc/repro/fparec.md's table from fixed .json files,
# and `make -n` shows both targets writing their table before the report's
# refresh.

load helper

setup() {
  common_setup
  P="$SEQREC_ROOT/pipelines"
  mkdir "$T/r"
}

# table_cmd: the fparec_table.sh command in $output (make -n), its
# continuation lines joined
table_cmd() {
  sed -e ':a' -e '/\\$/{N; s/\\\n[[:space:]]*/ /; ta' -e '}' <<< "$output" | grep -F "pipelines/fparec_table.sh"
}

# metrics RUN HR10 NDCG10: RUN.json as seqrec-metrics -k 10 --json writes it
metrics() {
  printf '{"records": 100, "users": 100, "mrr": 0.020000, "hr@10": %s, "recall@10": %s, "ndcg@10": %s, "mrr@10": 0.010000, "precision@10": 0.008000}\n' \
    "$2" "$2" "$3" > "$T/r/$1.json"
}

@test "fparec: fparec_table.sh tables HR@10 / NDCG@10 of both data sets beside the paper's cells" {
  metrics attn-Beauty-softmax 0.082812 0.040655
  metrics attn-Sports_and_Outdoors-softmax 0.048700 0.023349
  metrics attn-Beauty-linrec 0.081500 0.040200
  metrics attn-Sports_and_Outdoors-linrec 0.046249 0.023151
  metrics attn-Beauty-b4r-hydra 0.052900 0.026400
  # a run that did not finish: an empty .json, and none at all
  : > "$T/r/attn-Sports_and_Outdoors-b4r-hydra.json"
  run -0 sh "$P/fparec_table.sh" "FPARec Table 3: test" "$T/r" attn- \
    "Beauty-softmax:0.0813/0.0405 Sports_and_Outdoors-softmax:0.0460/0.0233 Beauty-linear:0.0785/0.0379" \
    'softmax:SASRec, softmax' 'linrec:SASRec, linrec' 'b4r-hydra:BERT4Rec, hydra' 'linear:SASRec, linear'
  want='### FPARec Table 3: test

| model, attention | Beauty HR@10 / NDCG@10 | paper | Sports HR@10 / NDCG@10 | paper | device | budget |
| --- | --- | --- | --- | --- | --- | --- |
| SASRec, softmax | 0.0828 / 0.0407 | 0.0813 / 0.0405 | 0.0487 / 0.0233 | 0.0460 / 0.0233 | - | - |
| SASRec, linrec | 0.0815 / 0.0402 | - | 0.0462 / 0.0232 | - | - | - |
| BERT4Rec, hydra | 0.0529 / 0.0264 | - | (not run) | - | - | - |
| SASRec, linear | (not run) | 0.0785 / 0.0379 | (not run) | - | - | - |'
  [ "$output" = "$want" ] || { diff <(echo "$want") <(echo "$output"); false; }
  # the file ends with one blank line, as paper_table.sh
  sh "$P/fparec_table.sh" t "$T/r" attn- "" 'softmax:x' > "$T/t.md"
  [ "$(tail -c 2 "$T/t.md" | od -An -c | tr -d ' ')" = '\n\n' ]
}

@test "fparec: fparec_table.sh with no prefix reads DATA-KIND.json (reproduce-fparec-sasrec's runs)" {
  metrics Beauty-ce 0.082800 0.040700
  metrics Beauty-bce 0.070049 0.034951
  metrics Sports_and_Outdoors-ce 0.048690 0.023310
  metrics Sports_and_Outdoors-bce 0.040000 0.020000
  run -0 sh "$P/fparec_table.sh" "SASRec" "$T/r" '' \
    "Beauty-ce:0.0813/0.0405 Sports_and_Outdoors-ce:0.0460/0.0233" 'ce:SASRec, softmax (full CE)' 'bce:SASRec, softmax (BCE, 1 negative)'
  [ "${lines[3]}" = "| SASRec, softmax (full CE) | 0.0828 / 0.0407 | 0.0813 / 0.0405 | 0.0487 / 0.0233 | 0.0460 / 0.0233 | - | - |" ]
  [ "${lines[4]}" = "| SASRec, softmax (BCE, 1 negative) | 0.0700 / 0.0350 | - | 0.0400 / 0.0200 | - | - | - |" ]
  [ "${#lines[@]}" -eq 5 ]
}

@test "fparec: fparec_table.sh --budget: each data set's device and budget from the runs' records" {
  metrics Beauty-ce 0.082800 0.040700
  metrics Sports_and_Outdoors-ce 0.048690 0.023310
  metrics Beauty-bce 0.070049 0.034951
  printf 'device: cuda\nargs: --model sasrec --epochs 201 --batch 128 -o x.sqm x.split\n' > "$T/r/Beauty-ce.run"
  printf 'device: cpu\nargs: --model sasrec --epochs 20 --batch 128 -o y.sqm y.split\n' > "$T/r/Sports_and_Outdoors-ce.run"
  run -0 sh "$P/fparec_table.sh" --budget "--epochs>=201 --batch=128" "SASRec" "$T/r" '' "" \
    'ce:SASRec, softmax (full CE)' 'bce:SASRec, softmax (BCE, 1 negative)'
  [[ "${lines[1]}" == *" | device | budget |" ]]
  [ "${lines[3]}" = "| SASRec, softmax (full CE) | 0.0828 / 0.0407 | - | 0.0487 / 0.0233 | - | cuda / cpu | paper / epochs 20 of 201 |" ]
  # a run without a record: "-" on its side
  [ "${lines[4]}" = "| SASRec, softmax (BCE, 1 negative) | 0.0700 / 0.0350 | - | (not run) | - | - | - |" ]
  # a bad SPEC is refused before any output
  run -65 sh "$P/fparec_table.sh" --budget "epochs>=201" "SASRec" "$T/r" '' "" 'ce:x'
  [[ "$output" == *'bad budget word "epochs>=201"'* ]]
  [[ "$output" != *"###"* ]]
}

@test "fparec: the report's table is the one reproduce-fparec-attn writes, row for row" {
  # every row label and paper cell of fparec.mk, in doc/repro/fparec.md's order
  doc="$SEQREC_ROOT/doc/repro/fparec.md"
  run -0 mk -n reproduce-fparec-attn FPAREC_OUT="$T/out"
  line=$(table_cmd)
  [[ "$line" == *" $T/out attn- "* ]]
  [[ "$line" == *"> $T/out/table3.md.tmp && mv $T/out/table3.md.tmp $T/out/table3.md"* ]]
  [ "$(tail -n 1 <<< "$output")" = "sh pipelines/repro_docs.sh doc/repro/fparec.md" ]
  # fparec-attn-tables alone: the same table, from the runs there are, training nothing
  run -0 mk -n fparec-attn-tables FPAREC_OUT="$T/out"
  [ "$(table_cmd)" = "$line" ]
  [[ "$output" != *seqrec-train* ]]
  run -0 mk -n fparec-sasrec-tables FPAREC_OUT="$T/out"
  [[ "$(table_cmd)" == *"> $T/out/sasrec.md.tmp"* ]]
  [[ "$output" != *seqrec-train* ]]
  # the command on .json files holding the report's own numbers gives the report's block
  sed -n '/^<!-- include repro\/fparec\/table3.md -->$/,/^<!-- end include -->$/p' "$doc" | sed '1d;$d' > "$T/block"
  [ -s "$T/block" ]
  mkdir "$T/out"
  kinds=(softmax linear mixing positional fpositional linrec efficient hydra b4r-softmax b4r-hydra)
  i=0
  # a cell's run, its .json and its record (device, and the budget's
  # options for "paper"; "-": none): DATA CELL DEVICE BUDGET
  cell() {
    local f=$T/out/attn-$1-${kinds[i]} h n
    read -r h _ n <<< "$2"
    [ "$h" = "(not" ] || printf '{"hr@10": %s, "ndcg@10": %s}\n' "$h" "$n" > "$f.json"
    case $3:$4 in
      -:-) ;;
      *:paper) printf 'device: %s\nargs: --epochs 201 --batch 128\n' "$3" > "$f.run" ;;
      *) echo "a budget cell this test cannot make again: $3 $4"; return 1 ;;
    esac
  }
  while IFS='|' read -r _ _ b _ s _ dev bud _; do
    read -r dev <<< "$dev"
    read -r bud <<< "$bud"
    [ "$dev" = - ] && dev="- / -"
    [ "$bud" = - ] && bud="- / -"
    cell Beauty "$b" "${dev%% / *}" "${bud%% / *}"
    cell Sports_and_Outdoors "$s" "${dev#* / }" "${bud#* / }"
    i=$((i + 1))
  done < <(sed -n '5,$p' "$T/block" | grep '^| ')
  [ "$i" -eq 10 ]
  (cd "$SEQREC_ROOT" && eval "${line#@}")
  diff "$T/block" "$T/out/table3.md"
}

@test "fparec: make -n reproduce-fparec-sasrec writes sasrec.md before the report's refresh" {
  run -0 mk -n reproduce-fparec-sasrec FPAREC_OUT="$T/out"
  # its four runs are rules of their own through repro_run.sh (DEVICE=, GPU_MINUTES=)
  run -0 mk -n fparec-sasrec-runs FPAREC_OUT="$T/out" DEVICE=cuda
  [ "$(grep -c 'repro_run.sh .*seqrec-train .*--batch 128 .*--epochs 201' <<< "$output")" -eq 4 ]
  [ "$(grep -c 'repro_run.sh --score .*seqrec-score' <<< "$output")" -eq 4 ]
  for r in Beauty-ce Beauty-bce Sports_and_Outdoors-ce Sports_and_Outdoors-bce; do
    grep -q -- "--loss ${r##*-} --neg 1 .*-o $T/out/$r.sqm $T/out/${r%-*}.split" <<< "$output"
  done
  run -0 mk -n reproduce-fparec-sasrec FPAREC_OUT="$T/out"
  line=$(table_cmd)
  [[ "$line" == *" $T/out '' \"Beauty-ce:0.0813/0.0405 Sports_and_Outdoors-ce:0.0460/0.0233\" 'ce:SASRec, softmax (full CE)' 'bce:SASRec, softmax (BCE, 1 negative)' > $T/out/sasrec.md.tmp"* ]]
  [[ "$line" == *"mv $T/out/sasrec.md.tmp $T/out/sasrec.md" ]]
  [ "$(tail -n 1 <<< "$output")" = "sh pipelines/repro_docs.sh doc/repro/fparec.md" ]
}
