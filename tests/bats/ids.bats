#!/usr/bin/env bats
# Stable ids across days: seqrec-preprocess --map-in / --new-items and
# seqrec-train --init. Day 2's log is day 1's plus new interactions of old
# users (some with new items) and new users: yesterday's model scores
# today's stream through yesterday's map (drop), and fine-tunes on it when
# the new items are appended.

load helper

setup() {
  common_setup
  mkdir -p "$T/out"
  python3 - "$T" <<'PY'
import random, sys
r = random.Random(5)
rows = [(f"u{u}", f"i{r.randint(1, 30)}", u * 100 + k) for u in range(1, 41) for k in range(8)]
more = [(f"u{u}", f"i{r.randint(1, 34)}", u * 100 + 50) for u in range(1, 41, 5)]
more += [(f"u{u}", f"i{r.randint(1, 34)}", u * 100 + k) for u in range(41, 46) for k in range(6)]
more += [("u3", "i33", 399)]  # at least one new item
for name, rs in (("day1.tsv", rows), ("day2.tsv", rows + more)):
    with open(f"{sys.argv[1]}/{name}", "w") as f:
        f.writelines(f"{u}\t{i}\t{t}\n" for u, i, t in rs)
PY
  PRE=(seqrec-preprocess --format tsv --time-col 3 -d shop)
  TRAIN=(--dim 16 --ffn 16 --layers 1 --heads 1 --max-len 10 --batch 16 --threads 2)
}

# day1.sqr, day1.map, the split and yesterday's model y.sqm
day1() {
  "${PRE[@]}" --map "$T/day1.map" -o "$T/day1.sqr" "$T/day1.tsv"
  seqrec-split --leave-one-out -o "$T/day1.split" "$T/day1.sqr"
  seqrec-train --model "${1:-sasrec}" "${TRAIN[@]}" --epochs 2 -o "$T/y.sqm" "$T/day1.split" 2>/dev/null
}

@test "--map-in with drop: same ids and n_items, yesterday's model scores today's stream" {
  day1
  run -0 "${PRE[@]}" --map-in "$T/day1.map" --map "$T/day2.map" --stats -o "$T/day2.sqr" "$T/day2.tsv"
  [[ "$output" == *$'new_users\t5'* ]]
  [[ "$output" == *$'new_items\t0'* ]]
  [[ "$output" =~ dropped_new_items$'\t'[1-9] ]]
  [[ "$output" =~ dropped_interactions$'\t'[1-9] ]]
  # n_items is the map's
  run -0 seqrec-cat --header "$T/day1.sqr"
  [[ "$output" == *$'n_items\t30'* ]]
  run -0 seqrec-cat --header "$T/day2.sqr"
  [[ "$output" == *$'n_items\t30'* ]]
  [[ "$output" == *"preprocess.map_in=day1.map"* ]]
  [[ "$output" == *"preprocess.new_items=drop"* ]]
  # the old map's lines are unchanged, the new users follow the old ones
  run -0 cmp <(grep -v $'^user\t4[1-5]\t' "$T/day2.map") "$T/day1.map"
  run -0 bash -c "grep '^user' '$T/day2.map' | tail -n 5"
  [ "$output" = $'user\t41\tu41\nuser\t42\tu42\nuser\t43\tu43\nuser\t44\tu44\nuser\t45\tu45' ]
  # an old user keeps its record: u2's items as they were on day 1
  d1=$(seqrec-cat "$T/day1.sqr" | sed -n 2p)
  d2=$(seqrec-cat "$T/day2.sqr" | sed -n 2p)
  [ "$d1" = "$d2" ]
  seqrec-split --leave-one-out -o "$T/day2.split" "$T/day2.sqr"
  run -0 bash -c "seqrec-score -m '$T/y.sqm' --target test '$T/day2.split' | seqrec-metrics -k 10"
  [[ "$output" == *"users              45"* ]]
}

@test "--new-items append: next ids; seqrec-train --init fine-tunes and the result scores" {
  day1
  run -0 "${PRE[@]}" --map-in "$T/day1.map" --new-items append --map "$T/day2.map" --stats \
    -o "$T/day2.sqr" "$T/day2.tsv"
  [[ "$output" =~ new_items$'\t'([1-9]) ]]
  added=${BASH_REMATCH[1]}
  [[ "$output" == *$'dropped_interactions\t0'* ]]
  run -0 seqrec-cat --header "$T/day2.sqr"
  [[ "$output" == *$'n_items\t'$((30 + added))* ]]
  run -0 cmp <(head -n 40 "$T/day2.map") <(head -n 40 "$T/day1.map")
  run -0 cmp <(grep '^item' "$T/day2.map" | head -n 30) <(grep '^item' "$T/day1.map")
  [ "$(grep -c '^item' "$T/day2.map")" = $((30 + added)) ]
  seqrec-split --leave-one-out -o "$T/day2.split" "$T/day2.sqr"
  # yesterday's model refuses the grown stream; --init takes it over
  run -65 seqrec-score -m "$T/y.sqm" --target test "$T/day2.split"
  run -0 seqrec-train --init "$T/y.sqm" --epochs 1 --threads 2 -o "$T/t.sqm" "$T/day2.split"
  run -0 bash -c "seqrec-score -m '$T/t.sqm' --target test '$T/day2.split' | seqrec-metrics -k 10"
  [[ "$output" == *"users              45"* ]]
  # the model options came from y.sqm; the same options may be repeated
  run -0 seqrec-train --init "$T/y.sqm" "${TRAIN[@]}" --epochs 1 -o "$T/t2.sqm" "$T/day2.split"
}

@test "--init with bert4rec: the mask row moves, the result scores the grown stream" {
  day1 bert4rec
  "${PRE[@]}" --map-in "$T/day1.map" --new-items append -o "$T/day2.sqr" "$T/day2.tsv"
  seqrec-split --leave-one-out -o "$T/day2.split" "$T/day2.sqr"
  run -0 seqrec-train --init "$T/y.sqm" --epochs 1 --threads 2 -o "$T/t.sqm" "$T/day2.split"
  run -0 bash -c "seqrec-score -m '$T/t.sqm' --target test '$T/day2.split' | seqrec-metrics -k 10"
}

@test "--map FILE may be the --map-in FILE: replaced atomically, old lines kept" {
  "${PRE[@]}" --map "$T/m.map" -o "$T/day1.sqr" "$T/day1.tsv"
  cp "$T/m.map" "$T/old.map"
  run -0 "${PRE[@]}" --map-in "$T/m.map" --new-items append --map "$T/m.map" -o "$T/day2.sqr" "$T/day2.tsv"
  run -0 cmp <(head -n 40 "$T/m.map") <(head -n 40 "$T/old.map")
  [ "$(wc -l < "$T/m.map")" -gt "$(wc -l < "$T/old.map")" ]
  # a second run through the extended map changes nothing
  run -0 "${PRE[@]}" --map-in "$T/m.map" --map "$T/m2.map" -o "$T/day2b.sqr" "$T/day2.tsv"
  run -0 cmp "$T/m.map" "$T/m2.map"
  run -0 cmp <(seqrec-cat "$T/day2.sqr") <(seqrec-cat "$T/day2b.sqr")
}

@test "--map-in with k-core: removed items keep their ids, n_items stays the map's" {
  "${PRE[@]}" --map "$T/day1.map" -o "$T/day1.sqr" "$T/day1.tsv"
  run -0 "${PRE[@]}" --map-in "$T/day1.map" --item-core 12 --stats -o "$T/day2.sqr" "$T/day2.tsv"
  [[ "$output" =~ (^|$'\n')items$'\t'([0-9]+) ]]
  [ "${BASH_REMATCH[2]}" -lt 30 ]
  run -0 seqrec-cat --header "$T/day2.sqr"
  [[ "$output" == *$'n_items\t30'* ]]
}

@test "bad map files: 65 with the file and line; a missing map 66; no output left" {
  printf 'user\t1\tu1\nuser\t3\tu2\n' > "$T/gap.map"
  run -65 "${PRE[@]}" --map-in "$T/gap.map" -o "$T/out/x.sqr" "$T/day1.tsv"
  [[ "$output" == *"gap.map: line 2: user dense id 3, expected 2"* ]]
  printf 'user\t1\tu1\nitem\t1\ti1\nitem\t2\ti1\n' > "$T/dup.map"
  run -65 "${PRE[@]}" --map-in "$T/dup.map" -o "$T/out/x.sqr" "$T/day1.tsv"
  [[ "$output" == *"dup.map: line 3: item 'i1' already has dense id 1"* ]]
  printf 'user\t1\tu1\nitem 1 i1\n' > "$T/bad.map"
  run -65 "${PRE[@]}" --map-in "$T/bad.map" -o "$T/out/x.sqr" "$T/day1.tsv"
  [[ "$output" == *"bad.map: line 2: expected kind<TAB>dense<TAB>original"* ]]
  : > "$T/empty.map"
  run -65 "${PRE[@]}" --map-in "$T/empty.map" -o "$T/out/x.sqr" "$T/day1.tsv"
  [[ "$output" == *"empty.map: not an id map"* ]]
  run -66 "${PRE[@]}" --map-in "$T/nope.map" --map "$T/out/m.map" -o "$T/out/x.sqr" "$T/day1.tsv"
  [[ "$output" == *"nope.map: cannot open"* ]]
  no_leftovers "$T/out"
}

@test "--new-items: only with --map-in, drop or append (64)" {
  run -64 "${PRE[@]}" --new-items append "$T/day1.tsv"
  [[ "$output" == *"--new-items goes with --map-in"* ]]
  "${PRE[@]}" --map "$T/day1.map" -o "$T/day1.sqr" "$T/day1.tsv"
  run -64 "${PRE[@]}" --map-in "$T/day1.map" --new-items keep "$T/day1.tsv"
  [[ "$output" == *"--new-items: expected drop or append, got 'keep'"* ]]
}

@test "every interaction of a new item, dropped: 65 naming the map" {
  "${PRE[@]}" --map "$T/day1.map" -o "$T/day1.sqr" "$T/day1.tsv"
  printf 'u1\tnew1\t5\nu99\tnew2\t6\n' > "$T/new.tsv"
  run -65 "${PRE[@]}" --map-in "$T/day1.map" -o "$T/out/x.sqr" "$T/new.tsv"
  [[ "$output" == *"new.tsv: no interactions left: all 2 are with items that"*"day1.map does not know"* ]]
  no_leftovers "$T/out"
}

@test "--init refusals: another model kind (64), other options (64), another dataset or fewer items (65), with --resume (64), missing (66)" {
  day1
  run -64 seqrec-train --model bert4rec --init "$T/y.sqm" -o "$T/out/x.sqm" "$T/day1.split"
  [[ "$output" == *"y.sqm: a sasrec model, not --model bert4rec"* ]]
  run -64 seqrec-train --init "$T/y.sqm" --dim 32 -o "$T/out/x.sqm" "$T/day1.split"
  [[ "$output" == *"the model has dim=16, the options give 32"* ]]
  run -64 seqrec-train --model pop --init "$T/y.sqm" -o "$T/out/x.sqm" "$T/day1.split"
  run -64 seqrec-train --init "$T/y.sqm" --resume "$T/y.sqm.ckpt" "$T/day1.split"
  run -66 seqrec-train --init "$T/nope.sqm" -o "$T/out/x.sqm" "$T/day1.split"
  [[ "$output" == *"nope.sqm"* ]]
  seqrec-preprocess --format tsv --time-col 3 -d other "$T/day1.tsv" | seqrec-split --leave-one-out -o "$T/other.split"
  run -65 seqrec-train --init "$T/y.sqm" -o "$T/out/x.sqm" "$T/other.split"
  [[ "$output" == *"y.sqm: the model was trained on dataset 'shop', the stream is 'other'"* ]]
  # fewer items than the model: day 1's first 20 users see fewer items
  head -n 40 "$T/day1.tsv" > "$T/small.tsv"
  "${PRE[@]}" "$T/small.tsv" | seqrec-split --leave-one-out -o "$T/small.split"
  run -65 seqrec-train --init "$T/y.sqm" -o "$T/out/x.sqm" "$T/small.split"
  [[ "$output" == *"the model was trained on 30 items, the stream has"* ]]
  no_leftovers "$T/out"
}

@test "preprocess messages: an empty input is named; a too-large number is called too large" {
  : > "$T/empty.txt"
  run -65 seqrec-preprocess -o "$T/out/x.sqr" "$T/empty.txt"
  [[ "$output" == *"empty.txt: no interactions in the input"* ]]
  printf '1\t2\t3\t99999999999999999999999\n' > "$T/big.tsv"
  run -65 seqrec-preprocess --format movielens -o "$T/out/x.sqr" "$T/big.tsv"
  [[ "$output" == *"big.tsv: line 1: timestamp '99999999999999999999999' is too large"* ]]
  [[ "$output" != *"not a number"* ]]
  run -64 seqrec-preprocess --core 99999999999 "$T/big.tsv"
  [[ "$output" == *"--core: 99999999999 is too large (at most 4294967295)"* ]]
  [[ "$output" != *"non-negative"* ]]
  no_leftovers "$T/out"
}
