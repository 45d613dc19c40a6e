#!/usr/bin/env bats
# seqrec-score --exclude-items and --allow-items (issue 38): retired items
# are never in a top-K list nor a candidate of a rank, an allow list is the
# only candidates, exclusion wins over allowance; original ids through
# --map, dense ids without; unknown ids are warnings, bad lines 65; a
# filtered held-out target is not ranked and counted; the results are the
# same bytes whatever the batch, the threads and the shards.

load helper

setup_file() {
  : "${SEQREC_BIN:?run the suites through make bats}"
  PATH="$SEQREC_BIN:$PATH"
  D="$BATS_FILE_TMPDIR"
  seqrec-synth --users 200 --items 60 --seed 5 > "$D/log.tsv"
  seqrec-preprocess --map "$D/map.tsv" -o "$D/seq.sqr" "$D/log.tsv" 2>/dev/null
  seqrec-split -o "$D/s.sqr" "$D/seq.sqr" 2>/dev/null
  seqrec-train --dim 16 --ffn 16 --max-len 20 --epochs 1 --threads 2 --seed 1 \
    --log /dev/null -o "$D/m.sqm" "$D/s.sqr"
}

setup() {
  common_setup
  D="$BATS_FILE_TMPDIR"
  # the shop of score.bats: ann 1, bob 2, cid 3; apple 1 .. egg 5
  printf 'ann\tapple\nann\tbanana\nann\tcherry\nann\tdate\nbob\tbanana\nbob\tcherry\nbob\tapple\ncid\tapple\ncid\tdate\ncid\tegg\ncid\tbanana\n' > "$T/log.tsv"
  seqrec-preprocess --format tsv -d shop --map "$T/map.tsv" -o "$T/seq.sqr" "$T/log.tsv"
  seqrec-split -o "$T/split.sqr" "$T/seq.sqr" 2>/dev/null
  seqrec-train --model pop -o "$T/p.sqm" "$T/split.sqr" 2>/dev/null
  mkdir -p "$T/out"
  # dense items of the synthetic model: the map's item lines
  awk -F'\t' '$1 == "item" {print $3}' "$D/map.tsv" > "$T/items.txt"
}

@test "--exclude-items: never in a top-K list (original ids through --map)" {
  printf 'apple\n' > "$T/ex.txt"
  run -0 seqrec-score -m "$T/p.sqm" -k 5 --include-history --map "$T/map.tsv" --exclude-items "$T/ex.txt" "$T/split.sqr"
  [ "${lines[0]}" = $'ann\tbanana:2,date:1,cherry:0,egg:0' ]
  [ "${#lines[@]}" = 3 ]
  # dense ids without --map
  printf '1\n2\n' > "$T/exd.txt"
  run -0 seqrec-score -m "$T/p.sqm" -k 5 --include-history --exclude-items "$T/exd.txt" "$T/split.sqr"
  [ "${lines[0]}" = $'1\t4:1,3:0,5:0' ]
  # the stream says what filtered it
  seqrec-score -m "$T/p.sqm" -k 2 -f stream --exclude-items "$T/exd.txt" -o "$T/out/t.sqr" "$T/split.sqr"
  seqrec-cat --header "$T/out/t.sqr" | grep -q "score.exclude_items=$T/exd.txt"
}

@test "--exclude-items: never a candidate of a rank; an excluded target is not ranked (a note)" {
  # without: ann date 3 of 5, bob apple 2 of 5, cid banana 2 of 5
  run -0 bash -c "seqrec-score -m '$T/p.sqm' '$T/split.sqr' | seqrec-cat"
  [ "$output" = "$(printf '1\t3\t5\t4\n2\t2\t5\t1\n3\t2\t5\t2')" ]
  printf 'apple\n' > "$T/ex.txt"
  run -0 --separate-stderr bash -c "seqrec-score -m '$T/p.sqm' --map '$T/map.tsv' --exclude-items '$T/ex.txt' '$T/split.sqr' | seqrec-cat"
  # apple (scored above date and banana) is gone: one fewer candidate, one above fewer
  [ "$output" = "$(printf '1\t2\t4\t4\n3\t1\t4\t2')" ]
  [[ "$stderr" == *"note: 1 held-out targets of $T/split.sqr are items that --exclude-items/--allow-items leave out: not ranked"* ]]
  # sampled candidates: never drawn either (uni:N over the 4 left: 3 negatives at most)
  run -0 bash -c "seqrec-score -m '$T/p.sqm' -c uni:10 --map '$T/map.tsv' --exclude-items '$T/ex.txt' '$T/split.sqr' 2>/dev/null | seqrec-cat"
  [ "$output" = "$(printf '1\t2\t4\t4\n3\t1\t4\t2')" ]
  run -0 bash -c "seqrec-score -m '$T/p.sqm' -c pop:10 --map '$T/map.tsv' --exclude-items '$T/ex.txt' '$T/split.sqr' 2>/dev/null | seqrec-cat"
  # pop:N draws only items of the training parts (apple 2, banana 2, date 1):
  # apple excluded, date's one negative is banana and banana's is date
  [ "$output" = "$(printf '1\t2\t2\t4\n3\t1\t2\t2')" ]
}

@test "--allow-items: only these are candidates; exclusion wins over allowance" {
  printf 'egg\ndate\napple\n' > "$T/al.txt"
  run -0 seqrec-score -m "$T/p.sqm" -k 5 --include-history --map "$T/map.tsv" --allow-items "$T/al.txt" "$T/split.sqr"
  [ "${lines[0]}" = $'ann\tapple:2,date:1,egg:0' ]
  printf 'apple\n' > "$T/ex.txt"
  run -0 --separate-stderr bash -c "seqrec-score -m '$T/p.sqm' --map '$T/map.tsv' --exclude-items '$T/ex.txt' --allow-items '$T/al.txt' '$T/split.sqr' | seqrec-cat"
  # ann's date among {date, egg}; bob's apple excluded, cid's banana not allowed
  [ "$output" = "$(printf '1\t1\t2\t4')" ]
  [[ "$stderr" == *"note: 2 held-out targets"* ]]
  run -0 seqrec-score -m "$T/p.sqm" -k 5 --include-history --map "$T/map.tsv" --exclude-items "$T/ex.txt" --allow-items "$T/al.txt" "$T/split.sqr"
  [ "${lines[0]}" = $'ann\tdate:1,egg:0' ]
}

@test "item filters: unknown ids are warnings with file and line (ten at most) and counted" {
  printf 'apple\nkiwi\n' > "$T/ex.txt"
  printf 'date\nfig\negg\n' > "$T/al.txt"
  run -0 --separate-stderr seqrec-score -m "$T/p.sqm" -k 5 --include-history --map "$T/map.tsv" --exclude-items "$T/ex.txt" --allow-items "$T/al.txt" "$T/split.sqr"
  [ "${lines[0]}" = $'ann\tdate:1,egg:0' ]
  [[ "$stderr" == *"warning: $T/ex.txt: line 2: item 'kiwi' is not in the map: ignored"* ]]
  [[ "$stderr" == *"warning: $T/al.txt: line 2: item 'fig' is not in the map: ignored"* ]]
  [[ "$stderr" == *"warning: 2 unknown item ids in all (--exclude-items, --allow-items): ignored"* ]]
  # dense ids above the catalogue, without a map; many: ten lines, then the count
  seq 3 30 > "$T/many.txt"
  run -0 --separate-stderr seqrec-score -m "$T/p.sqm" -k 5 --include-history --exclude-items "$T/many.txt" "$T/split.sqr"
  [ "${lines[0]}" = $'1\t1:2,2:2' ]
  [ "$(printf '%s\n' "$stderr" | grep -c 'is not an item of the model')" = 10 ]
  [[ "$stderr" == *"25 unknown item ids in all"* ]]
}

@test "item filters: bad lines 65 (file and line), a missing file 66, nothing left 65; no output" {
  printf '1\nx\n' > "$T/bad.txt"
  run -65 seqrec-score -m "$T/p.sqm" -k 1 --exclude-items "$T/bad.txt" -o "$T/out/t.tsv" "$T/split.sqr"
  [[ "$output" == *"$T/bad.txt: line 2: bad item id 'x' (dense ids are positive integers; original ids need --map)"* ]]
  printf 'apple\n\n' > "$T/empty.txt"
  run -65 seqrec-score -m "$T/p.sqm" -k 1 --map "$T/map.tsv" --allow-items "$T/empty.txt" -o "$T/out/t.tsv" "$T/split.sqr"
  [[ "$output" == *"$T/empty.txt: line 2: expected one item id, got an empty line"* ]]
  printf 'apple\tpear\n' > "$T/tab.txt"
  run -65 seqrec-score -m "$T/p.sqm" --map "$T/map.tsv" --exclude-items "$T/tab.txt" -o "$T/out/r.sqr" "$T/split.sqr"
  [[ "$output" == *"$T/tab.txt: line 1: expected one item id, got a TAB or NUL"* ]]
  printf '0\n' > "$T/zero.txt"
  run -65 seqrec-score -m "$T/p.sqm" --exclude-items "$T/zero.txt" -o "$T/out/r.sqr" "$T/split.sqr"
  [[ "$output" == *"$T/zero.txt: line 1: bad item id '0'"* ]]
  run -66 seqrec-score -m "$T/p.sqm" -k 1 --allow-items "$T/none.txt" -o "$T/out/t.tsv" "$T/split.sqr"
  [[ "$output" == *"$T/none.txt: cannot open"* ]]
  printf 'kiwi\n' > "$T/kiwi.txt"
  run -65 seqrec-score -m "$T/p.sqm" -k 1 --map "$T/map.tsv" --allow-items "$T/kiwi.txt" -o "$T/out/t.tsv" "$T/split.sqr"
  [[ "$output" == *"leave no item of the model's 5 as a candidate"* ]]
  no_leftovers "$T/out"
}

@test "item filters: usage refusals (64)" {
  printf '1\n' > "$T/one.txt"
  run -64 bash -c "seqrec-score -m '$T/p.sqm' --exclude-items - --allow-items - < '$T/one.txt' '$T/split.sqr'"
  [[ "$output" == *"can be standard input"* ]]
  run -64 bash -c "seqrec-score -m '$T/p.sqm' --exclude-items - < '$T/split.sqr'"
  run -64 seqrec-score -m "$T/p.sqm" --attention-map 1 -o "$T/out/a" --exclude-items "$T/one.txt" "$T/split.sqr"
  # --map with ranks translates the lists' ids only
  run -64 seqrec-score -m "$T/p.sqm" --map "$T/map.tsv" "$T/split.sqr"
  [[ "$output" == *"--map applies to --topk, or to the ids of --users"* ]]
  run -64 seqrec-score -m "$T/p.sqm" --exclude-items
}

@test "item filters: the same bytes whatever the batch, the threads and the shards (SASRec)" {
  sed -n '10,25p' "$T/items.txt" > "$T/ex.txt"
  sed -n '5,50p' "$T/items.txt" > "$T/al.txt"
  for mode in "-k 10" "-c full" "-c uni:15" "-c pop:15 -x"; do
    f="--map $D/map.tsv --exclude-items $T/ex.txt --allow-items $T/al.txt"
    seqrec-score -m "$D/m.sqm" $mode $f -o "$T/ref" "$D/s.sqr" 2>/dev/null
    [ -s "$T/ref" ]
    for opt in "-b 1" "-b 7 -j 1" "-j 2 -b 3"; do
      seqrec-score -m "$D/m.sqm" $mode $f $opt -o "$T/o" "$D/s.sqr" 2>/dev/null
      cmp "$T/ref" "$T/o" || { echo "$mode $opt differs"; return 1; }
    done
  done
  # shards of the top-K lists put together: every line of the whole
  f="--map $D/map.tsv --exclude-items $T/ex.txt --allow-items $T/al.txt"
  seqrec-score -m "$D/m.sqm" -k 10 $f "$D/s.sqr" | sort > "$T/whole"
  for i in 0 1 2; do seqrec-score -m "$D/m.sqm" -k 10 $f --shard $i/3 "$D/s.sqr"; done | sort > "$T/parts"
  cmp "$T/whole" "$T/parts"
}

@test "item filters: no filtered item in any top-K list or rank of a trained model" {
  sed -n '10,25p' "$T/items.txt" > "$T/ex.txt"
  seqrec-score -m "$D/m.sqm" -k 20 --include-history -f long --map "$D/map.tsv" --exclude-items "$T/ex.txt" -o "$T/t.tsv" "$D/s.sqr"
  # nothing excluded is listed, 20 items a user all the same
  run -1 grep -F -x -f "$T/ex.txt" <(cut -f3 "$T/t.tsv" | tail -n +2)
  [ "$(tail -n +2 "$T/t.tsv" | wc -l)" -eq $((200 * 20)) ]
  # full ranks: every candidate count is 60 - 16, no target is an excluded item
  awk -F'\t' 'NR >= 10 && NR <= 25 {print NR}' "$T/items.txt" > "$T/exd.txt"
  seqrec-score -m "$D/m.sqm" --exclude-items "$T/exd.txt" "$D/s.sqr" 2>/dev/null | seqrec-cat > "$T/r.txt"
  [ -s "$T/r.txt" ]
  run -0 awk -F'\t' '$3 != 44' "$T/r.txt"
  [ -z "$output" ]
  run -1 grep -x -F -f "$T/exd.txt" <(cut -f4 "$T/r.txt")
}

@test "seqrec-score --help names the item filters" {
  run -0 seqrec-score --help
  [[ "$output" == *"--exclude-items FILE"* && "$output" == *"--allow-items FILE"* ]]
}
