#!/usr/bin/env bats
# Id maps have an identity (issue 31): the fingerprint that
# seqrec-preprocess writes into every stream and seqrec-train copies into
# the model, the map a model carries (seqrec-train --map), and the checks of
# seqrec-score, seqrec-export, seqrec-preprocess --model and seqrec-train.

load helper

# train OUT STREAM [OPTIONS...]: a tiny SASRec
train() {
  local out=$1 in=$2
  shift 2
  seqrec-train --dim 8 --ffn 8 --max-len 12 --epochs 1 --threads 1 --log /dev/null \
    "$@" -o "$out" "$in"
}

setup() {
  common_setup
  # a synthetic log with string ids (numeric ids are ordered by value, so
  # every reading order would give the same map)
  seqrec-synth --users 60 --items 30 --seed 5 |
    awk -F'\t' -v OFS='\t' '{ print "u" $1, "i" $2, $3, $4 }' > "$T/log.tsv"
  P=(--format tsv --time-col 4 -d shop)
  seqrec-preprocess "${P[@]}" --map "$T/a.map" -o "$T/a.sqr" "$T/log.tsv"
  seqrec-split -o "$T/a.split" "$T/a.sqr" 2>/dev/null
  # the same log in reverse order: the same counts, other ids
  tac "$T/log.tsv" > "$T/rev.tsv"
  seqrec-preprocess "${P[@]}" --map "$T/b.map" -o "$T/b.sqr" "$T/rev.tsv"
  seqrec-split -o "$T/b.split" "$T/b.sqr" 2>/dev/null
  # a later log: new users and items, ids through a.map (an extension)
  { cat "$T/log.tsv"; printf 'unew\tinew\t5\t2000000000\nunew\ti1\t5\t2000000001\n'; } > "$T/day2.tsv"
  seqrec-preprocess "${P[@]}" --map-in "$T/a.map" --new-items append --map "$T/ext.map" \
    -o "$T/ext.sqr" "$T/day2.tsv"
  mkdir -p "$T/out"
}

@test "every preprocessed stream, and the model trained on it, has the fingerprint" {
  run -0 seqrec-cat --header "$T/a.sqr"
  [[ "$output" == *$'meta\tpreprocess.map_users=60:'* ]]
  [[ "$output" =~ $'meta\tpreprocess.map_items=30:'[0-9a-f]{16} ]]
  # without --map too: the same fingerprint
  seqrec-preprocess "${P[@]}" -o "$T/nomap.sqr" "$T/log.tsv"
  [ "$(seqrec-cat --header "$T/nomap.sqr" | grep map_)" = "$(seqrec-cat --header "$T/a.sqr" | grep map_)" ]
  # the reversed log's ids differ, its counts do not
  a=$(seqrec-cat --header "$T/a.sqr" | sed -n 's/.*map_items=//p')
  b=$(seqrec-cat --header "$T/b.sqr" | sed -n 's/.*map_items=//p')
  [ "${a%%:*}" = "${b%%:*}" ] && [ "$a" != "$b" ]
  # the extension's counts grew
  seqrec-cat --header "$T/ext.sqr" | grep -q $'meta\tpreprocess.map_items=31:'
  seqrec-train --model pop -o "$T/p.sqm" "$T/a.split" 2>/dev/null
  run -0 seqrec-cat --header "$T/p.sqm"
  [[ "$output" == *$'config\tdata.preprocess.map_items='"$a"* ]]
}

@test "the issue's silent failure: a stream of another map with the same item count is refused (65)" {
  train "$T/m.sqm" "$T/a.split"
  seqrec-score -m "$T/m.sqm" -o "$T/out/ok.sqr" "$T/a.split"
  run -65 seqrec-score -m "$T/m.sqm" -o "$T/out/r.sqr" "$T/b.split"
  [[ "$output" == "seqrec-score: $T/b.split was preprocessed with another id map than $T/m.sqm: its items differ (model: 30:"* ]]
  run -65 seqrec-score -m "$T/m.sqm" -k 5 -o "$T/out/t.tsv" "$T/b.split"
  no_leftovers "$T/out" ok.sqr
  # fine-tuning on it is refused too
  run -65 train "$T/m2.sqm" "$T/b.split" --init "$T/m.sqm"
  [[ "$output" == *"was preprocessed with another id map than $T/m.sqm"* ]]
}

@test "score --map: a foreign map is refused naming both files; an extension is accepted" {
  train "$T/m.sqm" "$T/a.split"
  run -65 seqrec-score -m "$T/m.sqm" -k 3 --map "$T/b.map" -o "$T/out/t.tsv" "$T/a.split"
  [[ "$output" == "seqrec-score: $T/b.map is not the id map of $T/m.sqm, nor an extension of it: its first 30 items differ (model: 30:"*", map: 30:"* ]]
  no_leftovers "$T/out"
  run -0 seqrec-score -m "$T/m.sqm" -k 3 --map "$T/a.map" -o "$T/out/a.tsv" "$T/a.split"
  [ -z "$output" ]
  run -0 seqrec-score -m "$T/m.sqm" -k 3 --map "$T/ext.map" -o "$T/out/e.tsv" "$T/a.split"
  [ -z "$output" ]
  cmp "$T/out/a.tsv" "$T/out/e.tsv"
  # the users are the stream's: a map of fewer users is refused
  grep -v $'^user\t60\t' "$T/a.map" > "$T/short.map"
  run -65 seqrec-score -m "$T/m.sqm" -k 3 --map "$T/short.map" "$T/a.split"
  [[ "$output" == *"short.map is not the id map of $T/a.split, nor an extension of it: it has 59 users, the stream 60"* ]]
}

@test "a model without fingerprint: score --map warns and goes on" {
  seqrec-synth --users 20 --items 30 --seed 2 --format stream | seqrec-split -o "$T/s.split" 2>/dev/null
  seqrec-train --model pop -o "$T/old.sqm" "$T/s.split" 2>/dev/null
  { for u in $(seq 20); do printf 'user\t%s\tu%s\n' "$u" "$u"; done
    for i in $(seq 30); do printf 'item\t%s\ti%s\n' "$i" "$i"; done; } > "$T/s.map"
  run -0 seqrec-score -m "$T/old.sqm" -k 2 --map "$T/s.map" -o "$T/out/t.tsv" "$T/s.split"
  [[ "$output" == *"warning: cannot check that $T/s.map is the id map of $T/old.sqm (or an extension of it): $T/old.sqm has no id-map fingerprint (made before seqrec 0.2?)"* ]]
  [ -s "$T/out/t.tsv" ]
}

@test "export --map: a foreign map is refused, an extension accepted; --id-map gives the map back" {
  train "$T/m.sqm" "$T/a.split" --map "$T/a.map"
  run -65 seqrec-export -m "$T/m.sqm" --map "$T/b.map" -o "$T/out/x.tsv"
  [[ "$output" == "seqrec-export: $T/b.map is not the id map of $T/m.sqm, nor an extension of it: its first 30 items differ"* ]]
  no_leftovers "$T/out"
  seqrec-export -m "$T/m.sqm" --map "$T/ext.map" -o "$T/out/x.tsv"
  [ "$(wc -l < "$T/out/x.tsv")" = 30 ]
  # the map inside the model, byte for byte
  seqrec-export -m "$T/m.sqm" --id-map -o "$T/out/back.map"
  cmp "$T/a.map" "$T/out/back.map"
  seqrec-export -m "$T/m.sqm" -l | grep -q $'^id_map\tu8\t'"$(wc -c < "$T/a.map")"'$'
  run -64 seqrec-export -m "$T/m.sqm" --id-map -t item_emb
  run -64 seqrec-export -m "$T/m.sqm" --id-map --list
  train "$T/nomap.sqm" "$T/a.split"
  run -65 seqrec-export -m "$T/nomap.sqm" --id-map -o "$T/out/none.map"
  [ "$output" = "seqrec-export: $T/nomap.sqm carries no id map (train it with seqrec-train --map FILE)" ]
  no_leftovers "$T/out" x.tsv back.map
}

@test "train --map: the stream's map is carried, another one is refused (65)" {
  run -65 train "$T/m.sqm" "$T/a.split" --map "$T/b.map"
  [ "$output" = "seqrec-train: $T/b.map is not the id map of $T/a.split: its users differ (stream: $(seqrec-cat --header "$T/a.sqr" | sed -n 's/.*map_users=//p'), map: $(seqrec-cat --header "$T/b.sqr" | sed -n 's/.*map_users=//p'))" ]
  [ ! -e "$T/m.sqm" ]
  run -65 train "$T/m.sqm" "$T/a.split" --map "$T/ext.map"
  # a one-pass model carries it too
  seqrec-train --model pop --map "$T/a.map" -o "$T/p.sqm" "$T/a.split" 2>/dev/null
  seqrec-export -m "$T/p.sqm" --id-map | cmp - "$T/a.map"
}

@test "train --init carries the model's map when it is the stream's; else a note and none" {
  train "$T/m.sqm" "$T/a.split" --map "$T/a.map"
  run -0 train "$T/m2.sqm" "$T/a.split" --init "$T/m.sqm"
  [ -z "$output" ]
  seqrec-export -m "$T/m2.sqm" --id-map | cmp - "$T/a.map"
  # the extended stream (more items): the old map is not its map
  seqrec-split -o "$T/ext.split" "$T/ext.sqr" 2>/dev/null
  run -0 train "$T/m3.sqm" "$T/ext.split" --init "$T/m.sqm"
  [[ "$output" == "seqrec-train: note: the id map that $T/m.sqm carries is not the stream's"*"the new model carries none (give --map FILE)" ]]
  run -65 seqrec-export -m "$T/m3.sqm" --id-map
  # with --map: the extension is carried (it extends the model's map)
  train "$T/m4.sqm" "$T/ext.split" --init "$T/m.sqm" --map "$T/ext.map"
  seqrec-export -m "$T/m4.sqm" --id-map | cmp - "$T/ext.map"
  # --resume keeps it
  seqrec-train --resume "$T/m.sqm.ckpt" --epochs 2 --log /dev/null "$T/a.split"
  seqrec-export -m "$T/m.sqm" --id-map | cmp - "$T/a.map"
}

@test "preprocess --model: the model's map and dataset; --map-in must extend it" {
  train "$T/m.sqm" "$T/a.split" --map "$T/a.map"
  # no -d: the dataset is the model's; no map file: the model's map
  seqrec-preprocess --format tsv --time-col 4 --model "$T/m.sqm" --map "$T/c.map" \
    -o "$T/c.sqr" "$T/day2.tsv"
  # the map's ids kept, the new user appended, the new item dropped
  grep -v $'^user\t61\tunew$' "$T/c.map" | cmp - "$T/a.map"
  grep -q $'^user\t61\tunew$' "$T/c.map"
  seqrec-cat --header "$T/c.sqr" | grep -q $'meta\tdataset=shop$'
  seqrec-cat --header "$T/c.sqr" | grep -q $'meta\tpreprocess.model=m.sqm$'
  # its stream scores with the model (the new user's item ids kept)
  seqrec-split -o "$T/c.split" "$T/c.sqr" 2>/dev/null
  seqrec-score -m "$T/m.sqm" -k 2 --map "$T/c.map" -o "$T/out/t.tsv" "$T/c.split"
  # --new-items append extends the model's map
  seqrec-preprocess --format tsv --time-col 4 --model "$T/m.sqm" --new-items append \
    --map "$T/d.map" -o "$T/d.sqr" "$T/day2.tsv"
  cmp "$T/ext.map" "$T/d.map"
  # --map-in: an extension is taken, a foreign map refused
  seqrec-preprocess --format tsv --time-col 4 --model "$T/m.sqm" --map-in "$T/ext.map" \
    -o "$T/e.sqr" "$T/day2.tsv"
  run -65 seqrec-preprocess --format tsv --time-col 4 --model "$T/m.sqm" --map-in "$T/b.map" \
    -o "$T/out/f.sqr" "$T/day2.tsv"
  [[ "$output" == "seqrec-preprocess: $T/b.map is not the id map of $T/m.sqm, nor an extension of it: its first 60 users differ"* ]]
  run -64 seqrec-preprocess --format tsv --model "$T/m.sqm" -d other "$T/day2.tsv"
  [[ "$output" == *"--dataset other: the model $T/m.sqm was trained on dataset 'shop'"* ]]
  no_leftovers "$T/out" t.tsv
}

@test "preprocess --model with a model that carries no map: 65" {
  train "$T/m.sqm" "$T/a.split"
  run -65 seqrec-preprocess --format tsv --time-col 4 --model "$T/m.sqm" -o "$T/out/x.sqr" "$T/day2.tsv"
  [ "$output" = "seqrec-preprocess: $T/m.sqm carries no id map (train it with seqrec-train --map FILE, or give --map-in)" ]
  no_leftovers "$T/out"
  # its fingerprint still checks a --map-in
  seqrec-preprocess --format tsv --time-col 4 --model "$T/m.sqm" --map-in "$T/a.map" -o "$T/out/x.sqr" "$T/day2.tsv"
  run -65 seqrec-preprocess --format tsv --time-col 4 --model "$T/m.sqm" --map-in "$T/b.map" "$T/day2.tsv"
  run -66 seqrec-preprocess --format tsv --model "$T/missing.sqm" "$T/day2.tsv"
}

@test "topk tsv: ids with ':' or ',' give one warning naming the first (the output is unchanged)" {
  printf 'ann\tbook:1\nann\tpen,red\nann\tcup\nbob\tcup\nbob\tbook:1\nbob\tink\ncid\tink\ncid\tpen,red\ncid\tcup\n' > "$T/shop.tsv"
  seqrec-preprocess --format tsv -d shop --map "$T/shop.map" "$T/shop.tsv" | seqrec-split -o "$T/shop.split" 2>/dev/null
  seqrec-train --model pop --map "$T/shop.map" -o "$T/p.sqm" "$T/shop.split" 2>/dev/null
  run -0 --separate-stderr seqrec-score -m "$T/p.sqm" -k 4 --include-history --map "$T/shop.map" "$T/shop.split"
  [ "${#lines[@]}" = 3 ]
  [[ "${lines[0]}" == $'ann\t'*'book:1:'* ]]
  [ "$stderr" = "seqrec-score: warning: item id 'book:1' of $T/shop.map holds ':' or ',': the lines item:score,... are ambiguous (use --format long or jsonl)" ]
  run -0 --separate-stderr seqrec-score -m "$T/p.sqm" -k 4 --map "$T/shop.map" -f long "$T/shop.split"
  [ -z "$stderr" ]
  run -0 --separate-stderr seqrec-score -m "$T/p.sqm" -k 4 --map "$T/shop.map" -f jsonl "$T/shop.split"
  [ -z "$stderr" ]
  # ids without them: no warning
  run -0 --separate-stderr seqrec-score -m "$T/p.sqm" -k 2 "$T/shop.split"
  [ -z "$stderr" ]
}
