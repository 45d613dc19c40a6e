#!/usr/bin/env bats
# seqrec-score: ranks for seqrec-metrics, top-K lists (TSV with the id map,
# topk streams), shards, candidate sampling, and every refusal: another
# dataset, a corrupted or missing model, a truncated input, an output that
# cannot be written, bad arguments.

load helper

setup() {
  common_setup
  # Three shoppers; preprocess numbers users and items in order of first
  # appearance: ann 1, bob 2, cid 3; apple 1, banana 2, cherry 3, date 4, egg 5.
  printf 'ann\tapple\nann\tbanana\nann\tcherry\nann\tdate\nbob\tbanana\nbob\tcherry\nbob\tapple\ncid\tapple\ncid\tdate\ncid\tegg\ncid\tbanana\n' > "$T/log.tsv"
  seqrec-preprocess --format tsv -d shop --map "$T/map.tsv" -o "$T/seq.sqr" "$T/log.tsv"
  seqrec-split -o "$T/split.sqr" "$T/seq.sqr" 2>/dev/null
  # split: ann 1 2 | 3 | 4, bob 2 | 3 | 1, cid 1 4 | 5 | 2
  mkdir -p "$T/out"
}

# The popularity model of the split stream: training counts apple 2,
# banana 2, date 1, the rest 0.
need_model() {
  [ -x "$SEQREC_BIN/seqrec-train" ] || skip "seqrec-train is not built yet (it makes the pop model)"
  seqrec-train --model pop -o "$T/m.sqm" "$T/split.sqr" 2>/dev/null
}

@test "ranks of the test targets: pessimistic ties, full candidates" {
  need_model
  run -0 --separate-stderr bash -c "seqrec-score -m '$T/m.sqm' '$T/split.sqr' | seqrec-cat"
  # ann: date (1) below apple and banana (2): 3; bob: apple ties banana: 2;
  # cid: banana ties apple: 2. Five candidates each.
  [ "${lines[0]}" = $'1\t3\t5\t4' ]
  [ "${lines[1]}" = $'2\t2\t5\t1' ]
  [ "${lines[2]}" = $'3\t2\t5\t2' ]
  [ "${#lines[@]}" = 3 ]
  [ -z "$stderr" ]
  run -0 bash -c "seqrec-score -m '$T/m.sqm' --ties optimistic '$T/split.sqr' | seqrec-cat"
  [ "${lines[1]}" = $'2\t1\t5\t1' ]
}

@test "the ranks stream goes into seqrec-metrics (the documented pipeline)" {
  need_model
  run -0 bash -c "seqrec-score -m '$T/m.sqm' --target test < '$T/split.sqr' | seqrec-metrics -k 2,3 --json"
  [[ "$output" == *'"records": 3'* ]]
  # HR@2 = 2/3 (ranks 3, 2, 2), HR@3 = 1
  [[ "$output" == *'"hr@2": 0.666667'* ]]
  [[ "$output" == *'"hr@3": 1.000000'* ]]
}

@test "--target valid ranks the validation targets given the training part" {
  need_model
  run -0 bash -c "seqrec-score -m '$T/m.sqm' -t valid '$T/split.sqr' | seqrec-cat"
  # ann: cherry (0) ties date, egg: 5; bob: cherry: 5; cid: egg ties cherry: 5
  [ "${lines[0]}" = $'1\t5\t5\t3' ]
  [ "${lines[2]}" = $'3\t5\t5\t5' ]
}

@test "--exclude-history drops history items but keeps the target" {
  need_model
  run -0 bash -c "seqrec-score -m '$T/m.sqm' -x '$T/split.sqr' | seqrec-cat"
  # ann knows apple banana cherry: date vs egg; bob knows banana cherry,
  # target apple (2) vs date egg: 1 of 3
  [ "${lines[0]}" = $'1\t1\t2\t4' ]
  [ "${lines[1]}" = $'2\t1\t3\t1' ]
  # a target that is also in the history stays a candidate
  printf '1 1 2 1 3 1\n2 2 3 4\n' > "$T/rep.txt"
  seqrec-preprocess --format s3rec -d rep "$T/rep.txt" | seqrec-split > "$T/rep.sqr"
  seqrec-train --model pop -o "$T/rep.sqm" "$T/rep.sqr" 2>/dev/null
  run -0 bash -c "seqrec-score -m '$T/rep.sqm' -x '$T/rep.sqr' | seqrec-cat"
  # user 1: history 1 2 1 3, target 1: candidates 1 and 4
  [ "${lines[0]}" = $'1\t1\t2\t1' ]
}

@test "the output meta is the input meta plus score.* lines" {
  need_model
  seqrec-score -m "$T/m.sqm" -c uni:2 --seed 7 -o "$T/out/r.sqr" "$T/split.sqr"
  run -0 seqrec-cat --header "$T/out/r.sqr"
  [[ "$output" == *$'kind\tranks'* ]]
  [[ "$output" == *$'meta\tdataset=shop'* ]]
  [[ "$output" == *$'meta\tsplit.mode=leave-one-out'* ]]
  [[ "$output" == *$'meta\tscore.model=pop'* ]]
  [[ "$output" == *$'meta\tscore.target=test'* ]]
  [[ "$output" == *$'meta\tscore.candidates=uni:2'* ]]
  [[ "$output" == *$'meta\tscore.seed=7'* ]]
  [[ "$output" == *$'meta\tscore.ties=pessimistic'* ]]
  no_leftovers "$T/out" r.sqr
}

@test "sampled candidates: uni:N and pop:N count N + 1 candidates, deterministically" {
  need_model
  run -0 bash -c "seqrec-score -m '$T/m.sqm' -c uni:2 '$T/split.sqr' | seqrec-cat"
  for l in "${lines[@]}"; do [ "$(cut -f3 <<< "$l")" = 3 ]; done
  first=$output
  run -0 bash -c "seqrec-score -m '$T/m.sqm' -c uni:2 --batch 1 --threads 2 '$T/split.sqr' | seqrec-cat"
  [ "$output" = "$first" ]
  # pop:N draws only items seen in training: bob's target apple has banana
  # and date to draw from
  run -0 bash -c "seqrec-score -m '$T/m.sqm' -c pop:10 '$T/split.sqr' | seqrec-cat"
  [ "${lines[1]}" = $'2\t2\t3\t1' ]
  # more negatives than items: every item is a candidate
  run -0 bash -c "seqrec-score -m '$T/m.sqm' -c uni:100 '$T/split.sqr' | seqrec-cat"
  [ "${lines[0]}" = $'1\t3\t5\t4' ]
}

@test "--topk writes TSV lines user<TAB>item:score,... with the original ids" {
  need_model
  run -0 --separate-stderr seqrec-score -m "$T/m.sqm" --topk 3 --include-history --map "$T/map.tsv" "$T/split.sqr"
  # equal scores in item order: apple before banana
  [ "${lines[0]}" = $'ann\tapple:2,banana:2,date:1' ]
  [ "${lines[2]}" = $'cid\tapple:2,banana:2,date:1' ]
  [ "${#lines[@]}" = 3 ]
  # without the map: dense ids
  run -0 seqrec-score -m "$T/m.sqm" --topk 1 --include-history "$T/split.sqr"
  [ "${lines[1]}" = $'2\t1:2' ]
}

@test "--topk leaves the history out by default; --include-history keeps it; -x is accepted" {
  need_model
  # the history is everything known: ann knows 4 of the 5 items
  run -0 seqrec-score -m "$T/m.sqm" --topk 3 --map "$T/map.tsv" "$T/split.sqr"
  [ "${lines[0]}" = $'ann\tegg:0' ]
  [ "${lines[1]}" = $'bob\tdate:1,egg:0' ]
  [ "${lines[2]}" = $'cid\tcherry:0' ]
  seqrec-score -m "$T/m.sqm" --topk 3 "$T/split.sqr" > "$T/a.tsv"
  seqrec-score -m "$T/m.sqm" --topk 3 -x "$T/split.sqr" > "$T/b.tsv"
  cmp "$T/a.tsv" "$T/b.tsv"
  seqrec-score -m "$T/m.sqm" --topk 3 --exclude-history -f stream -o "$T/out/x.sqr" "$T/split.sqr"
  run -0 seqrec-cat --header "$T/out/x.sqr"
  [[ "$output" == *$'meta\tscore.exclude_history=1'* ]]
  # --include-history: every item, the history's too
  run -0 seqrec-score -m "$T/m.sqm" --topk 5 --include-history "$T/split.sqr"
  [ "${lines[0]}" = $'1\t1:2,2:2,4:1,3:0,5:0' ]
  seqrec-score -m "$T/m.sqm" --topk 3 --include-history -f stream -o "$T/out/i.sqr" "$T/split.sqr"
  run -0 seqrec-cat --header "$T/out/i.sqr"
  [[ "$output" == *$'meta\tscore.exclude_history=0'* ]]
  # ranks keep the history unless -x (the papers' protocol): unchanged
  run -0 bash -c "seqrec-score -m '$T/m.sqm' '$T/split.sqr' | seqrec-cat"
  [ "${lines[0]}" = $'1\t3\t5\t4' ]
  # --include-history is for top-K, and contradicts -x
  run -64 seqrec-score -m "$T/m.sqm" --include-history "$T/split.sqr"
  [[ "$output" == *"--include-history applies to --topk"* ]]
  run -64 seqrec-score -m "$T/m.sqm" -k 2 -x --include-history "$T/split.sqr"
}

@test "--topk --format stream writes a topk stream that seqrec-cat reads" {
  need_model
  seqrec-score -m "$T/m.sqm" -k 2 -f stream --include-history -o "$T/out/top.sqr" "$T/split.sqr"
  run -0 seqrec-cat "$T/out/top.sqr"
  [ "${lines[0]}" = $'1\t1:2,2:2' ]
  [ "${#lines[@]}" = 3 ]
  run -0 seqrec-cat --header "$T/out/top.sqr"
  [[ "$output" == *$'kind\ttopk'* ]]
  [[ "$output" == *$'meta\tscore.topk=2'* ]]
  # a sequences stream is enough for top-K
  run -0 seqrec-score -m "$T/m.sqm" -k 1 "$T/seq.sqr"
  [ "${#lines[@]}" = 3 ]
}

@test "--shard i/n: the shards partition the users" {
  need_model
  # 40 users, so every shard gets some
  for u in $(seq 1 40); do echo "$u $((u % 7 + 1)) $((u % 5 + 1)) $((u % 3 + 1)) 8"; done > "$T/many.txt"
  seqrec-preprocess --format s3rec -d many "$T/many.txt" | seqrec-split > "$T/many.sqr"
  seqrec-train --model pop -o "$T/many.sqm" "$T/many.sqr" 2>/dev/null
  seqrec-score -m "$T/many.sqm" -c uni:3 "$T/many.sqr" | seqrec-cat | sort > "$T/all.txt"
  for i in 0 1 2; do
    seqrec-score -m "$T/many.sqm" -c uni:3 --shard $i/3 "$T/many.sqr" | seqrec-cat > "$T/s$i.txt"
    [ -s "$T/s$i.txt" ]
  done
  # disjoint users, and together exactly the unsharded output
  cat "$T/s0.txt" "$T/s1.txt" "$T/s2.txt" | cut -f1 | sort | uniq -d > "$T/dup.txt"
  [ ! -s "$T/dup.txt" ]
  cat "$T/s0.txt" "$T/s1.txt" "$T/s2.txt" | sort > "$T/union.txt"
  cmp "$T/all.txt" "$T/union.txt"
  # top-K shards too
  n=$(for i in 0 1 2; do seqrec-score -m "$T/many.sqm" -k 1 --shard $i/3 "$T/many.sqr"; done | cut -f1 | sort -u | wc -l)
  [ "$n" = 40 ]
}

@test "a padded stream: history is the row's sequence, then earlier targets" {
  need_model
  seqrec-pad -n 4 -o "$T/pad.sqr" "$T/split.sqr"
  seqrec-score -m "$T/m.sqm" -x "$T/split.sqr" | seqrec-cat > "$T/a.txt"
  seqrec-score -m "$T/m.sqm" -x "$T/pad.sqr" | seqrec-cat > "$T/b.txt"
  cmp "$T/a.txt" "$T/b.txt"
  seqrec-pad -n 6 -m randompad -k 2 -o "$T/rpad.sqr" "$T/split.sqr"
  seqrec-score -m "$T/m.sqm" -x "$T/rpad.sqr" | seqrec-cat > "$T/c.txt"
  cmp "$T/a.txt" "$T/c.txt"   # view 1 is not scored again
}

@test "a stream of another dataset is refused (65)" {
  need_model
  seqrec-preprocess --format tsv -d other "$T/log.tsv" | seqrec-split -o "$T/other.sqr" 2>/dev/null
  run -65 seqrec-score -m "$T/m.sqm" -o "$T/out/r.sqr" "$T/other.sqr"
  [[ "$output" == *"seqrec-score: $T/other.sqr: dataset 'other', but the model was trained on 'shop' (seqrec-preprocess --model MODEL takes the model's name and id map)"* ]]
  no_leftovers "$T/out"
  printf '1 1 2 3 4 5 6\n' > "$T/six.txt"
  seqrec-preprocess --format s3rec -d shop "$T/six.txt" | seqrec-split > "$T/six.sqr"
  run -65 seqrec-score -m "$T/m.sqm" "$T/six.sqr"
  [[ "$output" == *"the stream has 6 items, the model was trained on 5"* ]]
}

@test "a corrupted model file is refused (65) with the byte" {
  need_model
  cp "$T/m.sqm" "$T/bad.sqm"
  flip_byte "$T/bad.sqm" 0
  run -65 seqrec-score -m "$T/bad.sqm" -o "$T/out/r.sqr" "$T/split.sqr"
  [[ "$output" == *"seqrec-score: $T/bad.sqm: byte 0: bad magic"* ]]
  cp "$T/m.sqm" "$T/bad.sqm"
  size=$(file_size "$T/bad.sqm")
  flip_byte "$T/bad.sqm" $((size - 12))
  run -65 seqrec-score -m "$T/bad.sqm" -o "$T/out/r.sqr" "$T/split.sqr"
  [[ "$output" == *"$T/bad.sqm: byte $((size - 8)): checksum mismatch"* ]]
  head -c $((size - 3)) "$T/m.sqm" > "$T/bad.sqm"
  run -65 seqrec-score -m "$T/bad.sqm" -o "$T/out/r.sqr" "$T/split.sqr"
  [[ "$output" == *"$T/bad.sqm: byte "*"truncated"* ]]
  no_leftovers "$T/out"
}

@test "a missing model is 66, a missing input is 66" {
  run -66 seqrec-score -m "$T/nope.sqm" -o "$T/out/r.sqr" "$T/split.sqr"
  [[ "$output" == *"seqrec-score: $T/nope.sqm: cannot open"* ]]
  no_leftovers "$T/out"
  need_model
  run -66 seqrec-score -m "$T/m.sqm" -o "$T/out/r.sqr" "$T/nope.sqr"
  [[ "$output" == *"$T/nope.sqr: cannot open"* ]]
  no_leftovers "$T/out"
}

@test "a truncated input stream is refused (65) and leaves no output" {
  need_model
  size=$(file_size "$T/split.sqr")
  head -c $((size - 5)) "$T/split.sqr" > "$T/trunc.sqr"
  run -65 seqrec-score -m "$T/m.sqm" -o "$T/out/r.sqr" "$T/trunc.sqr"
  [[ "$output" == *"$T/trunc.sqr: byte "*"unexpected end of stream"* ]]
  no_leftovers "$T/out"
  # on a pipe nothing at all is written: the input is read before the header
  run -65 --separate-stderr bash -c "seqrec-score -m '$T/m.sqm' < '$T/trunc.sqr' > '$T/out/pipe.sqr'"
  [ ! -s "$T/out/pipe.sqr" ]
  run -65 seqrec-score -m "$T/m.sqm" -k 2 -o "$T/out/top.tsv" "$T/trunc.sqr"
  no_leftovers "$T/out" pipe.sqr
}

@test "a sequences stream has no targets to rank (65); ranks streams are refused (65)" {
  need_model
  run -65 seqrec-score -m "$T/m.sqm" "$T/seq.sqr"
  [[ "$output" == *"$T/seq.sqr: byte 6: expected a split or padded stream, got sequences (a sequences stream has no held-out targets: cut it with seqrec-split first, or use --topk)"* ]]
  seqrec-score -m "$T/m.sqm" -o "$T/r.sqr" "$T/split.sqr"
  run -65 seqrec-score -m "$T/m.sqm" "$T/r.sqr"
  [[ "$output" == *"$T/r.sqr: byte 6: expected a sequences, split or padded stream, got ranks"* ]]
}

@test "an output that cannot be created is 73" {
  need_model
  run -73 seqrec-score -m "$T/m.sqm" -o "$T/no/such/dir/r.sqr" "$T/split.sqr"
  [[ "$output" == *"seqrec-score: $T/no/such/dir/r.sqr: cannot create"* ]]
  run -73 seqrec-score -m "$T/m.sqm" -k 2 -o "$T/no/such/dir/top.tsv" "$T/split.sqr"
}

@test "a map that lacks an id is refused (65)" {
  need_model
  grep -v $'^item\t5' "$T/map.tsv" > "$T/short.tsv"
  run -65 seqrec-score -m "$T/m.sqm" -k 5 --map "$T/short.tsv" -o "$T/out/t.tsv" "$T/split.sqr"
  # the check of the map against the model's (idmap.h) says it first
  [[ "$output" == *"short.tsv is not the id map of $T/m.sqm, nor an extension of it: it has 4 items, the model 5"* ]]
  no_leftovers "$T/out"
  printf 'user\tx\tann\n' > "$T/bad.tsv"
  run -65 seqrec-score -m "$T/m.sqm" -k 1 --map "$T/bad.tsv" "$T/split.sqr"
  [[ "$output" == *"$T/bad.tsv: line 1: bad dense id 'x'"* ]]
  # a corrupt dense id is refused by its line, not a 32 GB table allocated
  { cat "$T/map.tsv"; printf 'item\t4000000000\tx\n'; } > "$T/huge.tsv"
  run -65 seqrec-score -m "$T/m.sqm" -k 1 --map "$T/huge.tsv" "$T/split.sqr"
  [[ "$output" == *"$T/huge.tsv: line $(wc -l < "$T/huge.tsv"): dense item id 4000000000 is larger than the map itself"* ]]
}

@test "a binary stream is never written to a terminal (64); TSV is" {
  need_model
  command -v script >/dev/null || skip "script(1) is needed for a terminal"
  run -64 script -qec "seqrec-score -m '$T/m.sqm' '$T/split.sqr'" /dev/null
  [[ "$output" == *"refusing to write a binary stream to a terminal"* ]]
  run -0 script -qec "seqrec-score -m '$T/m.sqm' -k 1 --include-history '$T/split.sqr'" /dev/null
  [[ "$output" == *$'1\t1:2'* ]]
}

@test "bad arguments are usage errors (64)" {
  for c in uni uni:0 pop:-1 all uni:5x ''; do
    run -64 seqrec-score -m "$T/m.sqm" --candidates "$c" "$T/split.sqr"
    [[ "$output" == *"--candidates: expected full, uni:N or pop:N"* ]]
  done
  run -64 seqrec-score "$T/split.sqr"
  [[ "$output" == *"a model is required"* ]]
  run -64 seqrec-score -m "$T/m.sqm" --target train "$T/split.sqr"
  run -64 seqrec-score -m "$T/m.sqm" --shard 3/3 "$T/split.sqr"
  run -64 seqrec-score -m "$T/m.sqm" --shard 1 "$T/split.sqr"
  run -64 seqrec-score -m "$T/m.sqm" --ties random "$T/split.sqr"
  run -64 seqrec-score -m "$T/m.sqm" --topk 0 "$T/split.sqr"
  run -64 seqrec-score -m "$T/m.sqm" --topk 2 --candidates uni:3 "$T/split.sqr"
  run -64 seqrec-score -m "$T/m.sqm" --map "$T/map.tsv" "$T/split.sqr"
  run -64 seqrec-score -m "$T/m.sqm" -k 2 -f stream --map "$T/map.tsv" "$T/split.sqr"
  run -64 seqrec-score -m "$T/m.sqm" --batch 0 "$T/split.sqr"
  run -64 seqrec-score -m "$T/m.sqm" --threads x "$T/split.sqr"
  run -64 seqrec-score -m "$T/m.sqm" --seed -1 "$T/split.sqr"
  run -64 seqrec-score -m "$T/m.sqm" "$T/split.sqr" "$T/split.sqr"
  run -64 seqrec-score --bogus
  [[ "$output" == *"Try 'seqrec-score --help'"* ]]
}

@test "--help lists every option of the man page, --version prints it" {
  run -0 seqrec-score --help
  [[ "$output" == "Usage: seqrec-score"* ]]
  help_opts=$(printf '%s\n' "$output" | help_options)
  man_opts=$(man_options "$SEQREC_ROOT/man/man1/seqrec-score.1")
  [ -n "$help_opts" ]
  [ "$help_opts" = "$man_opts" ]
  run -0 seqrec-score --version
  [[ "$output" == "seqrec-score (seqrec) "* ]]
}

@test "threads that do not fit ulimit -v: 71 before any output, nothing left (issue 40)" {
  ldd "$SEQREC_BIN/seqrec-score" | grep -q libasan && skip "ASan reserves more address space than the limit"
  need_model
  mkdir -p "$T/o"
  run -71 bash -c "ulimit -v 200000; seqrec-score --threads 64 -m '$T/m.sqm' -o '$T/o/r.sqr' '$T/split.sqr'"
  [[ "$output" == *"seqrec-score: out of memory: 64 threads do not fit the address-space limit (ulimit -v 200000)"* ]]
  no_leftovers "$T/o"
}
