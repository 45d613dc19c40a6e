#!/usr/bin/env bats
# seqrec-split: leave-one-out, ratio, time and holdout-users cuts, short
# users, bad arguments, bad input, and outputs that cannot be written; a
# holdout-users split fine-tuned with seqrec-train --init and scored.

load helper

setup() {
  common_setup
  # Item ids 1..9 all occur and users are 1..3, so preprocess's dense ids
  # are the ids of the text: the expected outputs read as the input does.
  printf '1 1 2 3 4 5\n2 6 7\n3 8 9 1\n' > "$T/in.txt"
  seqrec-preprocess --format s3rec "$T/in.txt" > "$T/seq.sqr"
  # s3rec files have no timestamps; these streams do (user, items, ts).
  printf '1\t1 2 3 4\t10 20 30 40\n2\t5 6\t35 50\n3\t7 8 9\t5 15 25\n' > "$T/ts.txt"
  seqrec-cat --from-text sequences --timestamps "$T/ts.txt" -o "$T/ts.sqr"
  mkdir -p "$T/out"
}

@test "leave-one-out is the default: last item test, second-to-last validation" {
  run -0 --separate-stderr bash -c "seqrec-split '$T/seq.sqr' | seqrec-cat"
  [ "${lines[0]}" = $'1\t1 2 3\t4\t5' ]
  [ "${lines[1]}" = $'2\t6 7\t\t' ]      # short: kept for training only
  [ "${lines[2]}" = $'3\t8\t9\t1' ]      # 3 items: the threshold
  [ "${#lines[@]}" = 3 ]
  seqrec-split --leave-one-out < "$T/seq.sqr" | seqrec-cat > "$T/explicit.txt"
  seqrec-split "$T/seq.sqr" | seqrec-cat > "$T/default.txt"
  cmp "$T/explicit.txt" "$T/default.txt"
}

@test "the output is a split stream that keeps the input meta and adds split.*" {
  seqrec-split -o "$T/out/s.sqr" "$T/seq.sqr"
  run -0 seqrec-cat --header "$T/out/s.sqr"
  [[ "$output" == *$'kind\tsplit'* ]]
  [[ "$output" == *$'meta\tsplit.mode=leave-one-out'* ]]
  [[ "$output" == *$'meta\tsplit.short=train'* ]]
  [[ "$output" == *$'records\t3'* ]]
  [[ "$output" == *$'interactions\t10'* ]]
  seqrec-cat --header "$T/seq.sqr" | grep '^meta' > "$T/in.meta" || true
  seqrec-cat --header "$T/out/s.sqr" | grep '^meta' > "$T/out.meta"
  # every input meta line is still there, in order, before split.*
  [ "$(head -n "$(wc -l < "$T/in.meta")" "$T/out.meta")" = "$(cat "$T/in.meta")" ]
  no_leftovers "$T/out" s.sqr
}

@test "short users are counted on stderr; -v names each one" {
  run -0 --separate-stderr seqrec-split -o "$T/out/s.sqr" "$T/seq.sqr"
  [[ "$stderr" == *"1 of 3 users short (fewer than 3 items for leave-one-out): kept for training only"* ]]
  [[ "$stderr" != *"user 2:"* ]]
  run -0 --separate-stderr seqrec-split -v -o "$T/out/s.sqr" "$T/seq.sqr"
  [[ "$stderr" == *"seqrec-split: user 2: 2 items, fewer than 3 items for leave-one-out: kept for training only"* ]]
  # nothing is reported when no user is short
  printf '1 1 2 3\n' > "$T/long.txt"
  seqrec-preprocess --format s3rec "$T/long.txt" > "$T/long.sqr"
  run -0 --separate-stderr seqrec-split -o "$T/out/l.sqr" "$T/long.sqr"
  [ -z "$stderr" ]
}

@test "--drop-short drops short users and says so" {
  run -0 --separate-stderr bash -c "seqrec-split --drop-short '$T/seq.sqr' | seqrec-cat"
  [ "${lines[0]}" = $'1\t1 2 3\t4\t5' ]
  [ "${lines[1]}" = $'3\t8\t9\t1' ]
  [ "${#lines[@]}" = 2 ]
  [[ "$stderr" == *"1 of 3 users short"*"dropped"* ]]
  seqrec-split --drop-short -o "$T/out/d.sqr" "$T/seq.sqr" 2>/dev/null
  run -0 seqrec-cat --header "$T/out/d.sqr"
  [[ "$output" == *$'meta\tsplit.short=drop'* ]]
}

@test "--ratio cuts each user in order with RecBole rounding" {
  # len 5 under 0.6,0.2,0.2: floor(1) valid, floor(1) test, 3 train;
  # len 2: test gets one item first (0 < 0.4 < 1), validation stays empty;
  # len 3: 1 train, 1 valid, 1 test.
  run -0 --separate-stderr bash -c "seqrec-split --ratio 0.6,0.2,0.2 '$T/seq.sqr' | seqrec-cat"
  [ "${lines[0]}" = $'1\t1 2 3\t4\t5' ]
  [ "${lines[1]}" = $'2\t6\t\t7' ]
  [ "${lines[2]}" = $'3\t8\t9\t1' ]
  [ -z "$stderr" ]
  # two parts: train, test
  run -0 bash -c "seqrec-split -r 0.5,0.5 '$T/seq.sqr' | seqrec-cat"
  [ "${lines[0]}" = $'1\t1 2 3\t\t4 5' ]
  [ "${lines[1]}" = $'2\t6\t\t7' ]
  [ "${lines[2]}" = $'3\t8 9\t\t1' ]
  seqrec-split -r 0.5,0.5 -o "$T/out/r.sqr" "$T/seq.sqr"
  run -0 seqrec-cat --header "$T/out/r.sqr"
  [[ "$output" == *$'meta\tsplit.mode=ratio'* ]]
  [[ "$output" == *$'meta\tsplit.ratio=0.5,0.5'* ]]
}

@test "--ratio: a user with a single item has nothing to hold out" {
  printf '1 1 2 3 4 5\n2 6\n' > "$T/one.txt"
  seqrec-preprocess --format s3rec "$T/one.txt" > "$T/one.sqr"
  run -0 --separate-stderr bash -c "seqrec-split --ratio 0.8,0.1,0.1 '$T/one.sqr' | seqrec-cat"
  [ "${lines[1]}" = $'2\t6\t\t' ]
  [[ "$stderr" == *"1 of 2 users short (too few items for a held-out part)"* ]]
  run -0 --separate-stderr bash -c "seqrec-split --drop-short -r 0.8,0.1,0.1 '$T/one.sqr' | seqrec-cat"
  [ "${#lines[@]}" = 1 ]
}

@test "bad --ratio values are usage errors (64)" {
  for r in 0.8,0.1 0.8,0.1,0.2 0.5,0.25,0.25,0 1 abc 0,0.5,0.5 0.8,-0.1,0.3 ''; do
    run -64 seqrec-split --ratio "$r" "$T/seq.sqr"
    [[ "$output" == *"seqrec-split: --ratio"* ]]
  done
  run -64 seqrec-split --ratio 0.9,0.2 "$T/seq.sqr"
  [[ "$output" == *"sum to 1.1, not 1"* ]]
}

@test "--time without timestamps is a data error (65) and leaves nothing" {
  run -65 seqrec-split --time 100 -o "$T/out/t.sqr" "$T/seq.sqr"
  [[ "$output" == *"seqrec-split: $T/seq.sqr: --time needs timestamps, but this stream has none"* ]]
  no_leftovers "$T/out"
}

@test "--time T: ts < T train, the rest test" {
  run -0 --separate-stderr bash -c "seqrec-split --time 30 '$T/ts.sqr' | seqrec-cat --no-ts"
  [ "${lines[0]}" = $'1\t1 2\t\t3 4' ]
  [ "${lines[1]}" = $'2\t\t\t5 6' ]     # no item before the cut
  [ "${lines[2]}" = $'3\t7 8 9\t\t' ]   # all before the cut: training only
  [[ "$stderr" == *"1 of 3 users short (no item before the cut): kept without history"* ]]
  # the timestamps travel with the split stream
  run -0 bash -c "seqrec-split --time 30 '$T/ts.sqr' 2>/dev/null | seqrec-cat"
  [ "${lines[0]}" = $'1\t1 2\t\t3 4\t10 20 30 40' ]
}

@test "--time T1,T2: train, validation, test; --drop-short drops users without history" {
  run -0 --separate-stderr bash -c "seqrec-split --time 20,40 '$T/ts.sqr' | seqrec-cat --no-ts"
  [ "${lines[0]}" = $'1\t1\t2 3\t4' ]
  [ "${lines[1]}" = $'2\t\t5\t6' ]   # 35 and 50: no history, kept
  [ "${lines[2]}" = $'3\t7 8\t9\t' ]
  [[ "$stderr" == *"1 of 3 users short (no item before the cut): kept without history"* ]]
  run -0 --separate-stderr bash -c "seqrec-split -v --drop-short -t 30 '$T/ts.sqr' | seqrec-cat --no-ts"
  [ "${#lines[@]}" = 2 ]
  [ "${lines[1]}" = $'3\t7 8 9\t\t' ]
  [[ "$stderr" == *"user 2: 2 items, no item before the cut: dropped"* ]]
  seqrec-split -t 20,40 -o "$T/out/t.sqr" "$T/ts.sqr"
  run -0 seqrec-cat --header "$T/out/t.sqr"
  [[ "$output" == *$'meta\tsplit.mode=time'* ]]
  [[ "$output" == *$'meta\tsplit.time=20,40'* ]]
}

@test "--time refuses sequences whose timestamps go backwards (65)" {
  printf '1\t1 2 3\t10 30 20\n' > "$T/bad.txt"
  seqrec-cat --from-text sequences --timestamps "$T/bad.txt" -o "$T/bad.sqr"
  run -65 seqrec-split --time 15 -o "$T/out/x.sqr" "$T/bad.sqr"
  [[ "$output" == *"$T/bad.sqr: user 1: timestamps out of order at item 2"* ]]
  no_leftovers "$T/out"
}

@test "bad arguments are usage errors (64)" {
  run -64 seqrec-split --time 40,20 "$T/ts.sqr"
  [[ "$output" == *"T2 must be later than T1"* ]]
  run -64 seqrec-split --time 1.5 "$T/ts.sqr"
  run -64 seqrec-split --time "" "$T/ts.sqr"
  run -64 seqrec-split --ratio 0.8,0.1,0.1 --time 10 "$T/ts.sqr"
  [[ "$output" == *"choose one of --leave-one-out, --ratio, --time and --holdout-users"* ]]
  run -64 seqrec-split --leave-one-out --ratio 0.5,0.5 "$T/seq.sqr"
  run -64 seqrec-split --bogus "$T/seq.sqr"
  [[ "$output" == *"Try 'seqrec-split --help'"* ]]
  run -64 seqrec-split "$T/seq.sqr" "$T/seq.sqr"
  run -64 seqrec-split --ratio
}

@test "--holdout-users F: held-out users validate on their last item, the others train on everything" {
  # seed 0 holds out user 2 of the three at F = 0.5; seed 4 users 2 and 3
  run -0 --separate-stderr bash -c "seqrec-split --holdout-users 0.5 '$T/seq.sqr' | seqrec-cat"
  [ "${lines[0]}" = $'1\t1 2 3 4 5\t\t' ]
  [ "${lines[1]}" = $'2\t6\t7\t' ]    # no test target
  [ "${lines[2]}" = $'3\t8 9 1\t\t' ]
  [ "${#lines[@]}" = 3 ]
  [ -z "$stderr" ]
  run -0 bash -c "seqrec-split --holdout-users 0.5 --seed 4 '$T/seq.sqr' | seqrec-cat"
  [ "${lines[0]}" = $'1\t1 2 3 4 5\t\t' ]
  [ "${lines[1]}" = $'2\t6 7\t\t' ]
  [ "${lines[2]}" = $'3\t8 9\t1\t' ]
  seqrec-split --holdout-users 0.5 --seed 4 -o "$T/out/h.sqr" "$T/seq.sqr"
  run -0 seqrec-cat --header "$T/out/h.sqr"
  [[ "$output" == *$'kind\tsplit'* ]]
  [[ "$output" == *$'meta\tsplit.mode=holdout-users\nmeta\tsplit.holdout=0.5\nmeta\tsplit.seed=4\nmeta\tsplit.short=train'* ]]
  seqrec-split --holdout-users 0.5 -o "$T/out/h0.sqr" "$T/seq.sqr"
  run -0 seqrec-cat --header "$T/out/h0.sqr"
  [[ "$output" == *$'meta\tsplit.seed=0'* ]]
  no_leftovers "$T/out" h.sqr h0.sqr
}

@test "--holdout-users: about F of the users, the same ones every run and on the next day's stream" {
  seqrec-synth --users 2000 --items 100 --mean-len 8 --format stream -o "$T/syn.sqr"
  seqrec-split --holdout-users 0.1 -o "$T/a.sqr" "$T/syn.sqr"
  seqrec-split --holdout-users 0.1 -o "$T/b.sqr" "$T/syn.sqr"
  cmp "$T/a.sqr" "$T/b.sqr"
  held() { seqrec-cat --no-ts "$1" | awk -F'\t' '$3 != "" { print $1 }'; }
  n=$(held "$T/a.sqr" | wc -l)
  [ "$n" -gt 140 ]    # 200 expected; 4.2 sd either side
  [ "$n" -lt 260 ]
  # no test target anywhere; every other user trains on its whole sequence
  run -0 bash -c "seqrec-cat --no-ts '$T/a.sqr' | awk -F'\t' '\$4 != \"\"' | wc -l"
  [ "$output" = 0 ]
  t=$(seqrec-cat --no-ts "$T/a.sqr" | awk -F'\t' '{ n += split($2, a, " ") } END { print n }')
  all=$(seqrec-cat --header "$T/syn.sqr" | awk -F'\t' '$1 == "interactions" { print $2 }')
  [ "$t" = $((all - n)) ]
  # another seed, other users
  seqrec-split --holdout-users 0.1 --seed 1 -o "$T/c.sqr" "$T/syn.sqr"
  [ "$(held "$T/a.sqr")" != "$(held "$T/c.sqr")" ]
  # the next day: every user one item longer, 50 new users; the old users
  # held out are the same
  seqrec-cat --no-ts "$T/syn.sqr" | awk -F'\t' '{ print $1 "\t" $2 " 1" }' > "$T/day2.txt"
  for u in $(seq 2001 2050); do printf '%s\t3 4\n' "$u"; done >> "$T/day2.txt"
  seqrec-cat --from-text sequences "$T/day2.txt" -o "$T/day2.sqr"
  seqrec-split --holdout-users 0.1 -o "$T/d2.sqr" "$T/day2.sqr"
  [ "$(held "$T/d2.sqr" | awk '$1 <= 2000')" = "$(held "$T/a.sqr")" ]
}

@test "--holdout-users: single-item users all train; a held-out one is short (-v, --drop-short)" {
  printf '1 1 2 3 4 5\n2 6 7\n3 8 9 1\n4 2\n' > "$T/one.txt"
  seqrec-preprocess --format s3rec "$T/one.txt" > "$T/one.sqr"
  # seed 0 does not hold out user 4, seed 1 does: it trains either way
  for s in 0 1; do
    run -0 bash -c "seqrec-split --holdout-users 0.5 --seed $s '$T/one.sqr' 2>/dev/null | seqrec-cat"
    [ "${lines[3]}" = $'4\t2\t\t' ]
  done
  run -0 --separate-stderr seqrec-split --holdout-users 0.5 -o "$T/out/h.sqr" "$T/one.sqr"
  [ -z "$stderr" ]
  run -0 --separate-stderr seqrec-split -v --holdout-users 0.5 --seed 1 -o "$T/out/h.sqr" "$T/one.sqr"
  [[ "$stderr" == *"seqrec-split: user 4: 1 items, a held-out user with a single item: kept for training only"* ]]
  [[ "$stderr" == *"1 of 4 users short (a held-out user with a single item): kept for training only"* ]]
  run -0 --separate-stderr bash -c "seqrec-split --drop-short --holdout-users 0.5 --seed 1 '$T/one.sqr' | seqrec-cat"
  [ "${#lines[@]}" = 3 ]
  [[ "$stderr" == *"dropped"* ]]
}

@test "--holdout-users refusals: bad F, another mode, bad or stray --seed (64), nothing written" {
  for f in 0 1 1.5 -0.1 abc 0.1x '' nan 0.1,0.2; do
    run -64 seqrec-split --holdout-users "$f" -o "$T/out/x.sqr" "$T/seq.sqr"
    [[ "$output" == *"seqrec-split: --holdout-users '$f': expected a fraction F of the users with 0 < F < 1"* ]]
  done
  for other in --leave-one-out "--ratio 0.8,0.1,0.1" "--time 10"; do
    # shellcheck disable=SC2086
    run -64 seqrec-split --holdout-users 0.1 $other -o "$T/out/x.sqr" "$T/seq.sqr"
    [[ "$output" == *"seqrec-split: choose one of --leave-one-out, --ratio, --time and --holdout-users"* ]]
    # shellcheck disable=SC2086
    run -64 seqrec-split $other --holdout-users 0.1 -o "$T/out/x.sqr" "$T/seq.sqr"
    [[ "$output" == *"choose one of"* ]]
  done
  for s in -1 x 1.5 '' 18446744073709551616; do
    run -64 seqrec-split --holdout-users 0.1 --seed "$s" -o "$T/out/x.sqr" "$T/seq.sqr"
    [[ "$output" == *"seqrec-split: --seed '$s': expected an integer from 0 to 18446744073709551615"* ]]
  done
  run -64 seqrec-split --seed 3 -o "$T/out/x.sqr" "$T/seq.sqr"
  [[ "$output" == *"seqrec-split: --seed needs --holdout-users"* ]]
  run -64 seqrec-split --ratio 0.5,0.5 --seed 3 -o "$T/out/x.sqr" "$T/seq.sqr"
  [[ "$output" == *"--seed needs --holdout-users"* ]]
  run -64 seqrec-split --holdout-users
  no_leftovers "$T/out"
}

@test "a holdout-users split: --init fine-tunes on it, validates on the held-out users, scores every user" {
  TRAIN=(--dim 16 --ffn 16 --layers 1 --heads 1 --max-len 10 --batch 16 --threads 2)
  seqrec-synth --users 300 --items 60 --mean-len 10 --format stream -o "$T/syn.sqr"
  seqrec-split -o "$T/loo.sqr" "$T/syn.sqr"
  seqrec-train "${TRAIN[@]}" --epochs 1 --log /dev/null -o "$T/y.sqm" "$T/loo.sqr"
  seqrec-split --holdout-users 0.2 -o "$T/h.sqr" "$T/syn.sqr"
  n=$(seqrec-cat --no-ts "$T/h.sqr" | awk -F'\t' '$3 != ""' | wc -l)
  [ "$n" -gt 30 ]
  run -0 seqrec-train --init "$T/y.sqm" --epochs 1 --threads 2 --log "$T/log" -o "$T/t.sqm" "$T/h.sqr"
  grep -q '"valid":{"hr@10":' "$T/log"
  # the logged validation is over the held-out users alone: seqrec-score
  # --target valid ranks n targets and gets the same NDCG@10
  logged=$(sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' "$T/log" | head -n 1)
  [ -n "$logged" ]
  run -0 bash -c "seqrec-score -m '$T/t.sqm' --target valid '$T/h.sqr' | seqrec-metrics -k 10"
  [[ "$output" == *"records            $n"* ]]
  ndcg=$(printf '%s\n' "$output" | awk '$1 == "NDCG" { print $2 }')
  [ -n "$ndcg" ]
  awk -v a="$logged" -v b="$ndcg" 'BEGIN { exit !(a - b < 0.00006 && b - a < 0.00006) }'
  # no test targets: scoring says so and writes an empty ranks stream
  run -0 --separate-stderr seqrec-score -m "$T/t.sqm" --target test -o "$T/r.sqr" "$T/h.sqr"
  [[ "$stderr" == *"seqrec-score: note: $T/h.sqr has no test targets"* ]]
  run -0 seqrec-cat --header "$T/r.sqr"
  [[ "$output" == *$'records\t0'* ]]
  # --topk: every user, from the whole sequence, as from the unsplit stream
  seqrec-score -m "$T/t.sqm" --topk 5 "$T/h.sqr" > "$T/top.h"
  seqrec-score -m "$T/t.sqm" --topk 5 "$T/syn.sqr" > "$T/top.s"
  seqrec-score -m "$T/t.sqm" --topk 5 "$T/loo.sqr" > "$T/top.l"
  [ "$(wc -l < "$T/top.h")" = 300 ]
  cmp "$T/top.h" "$T/top.s"
  cmp "$T/top.h" "$T/top.l"
  # a split without a single held-out user trains without validation
  seqrec-split --holdout-users 0.001 -o "$T/h0.sqr" "$T/syn.sqr"
  [ "$(seqrec-cat --no-ts "$T/h0.sqr" | awk -F'\t' '$3 != ""' | wc -l)" = 0 ]
  run -0 seqrec-train --init "$T/y.sqm" --epochs 1 --threads 2 --log "$T/log0" -o "$T/t0.sqm" "$T/h0.sqr"
  run -1 grep -c '"valid"' "$T/log0"
}

@test "a missing input is 66" {
  run -66 seqrec-split -o "$T/out/x.sqr" "$T/nope.sqr"
  [[ "$output" == *"seqrec-split: $T/nope.sqr: cannot open"* ]]
  no_leftovers "$T/out"
}

@test "wrong magic is refused (65) and leaves no output" {
  cp "$T/seq.sqr" "$T/bad.sqr"
  flip_byte "$T/bad.sqr" 0
  run -65 seqrec-split -o "$T/out/s.sqr" "$T/bad.sqr"
  [[ "$output" == *"seqrec-split: $T/bad.sqr: byte 0: bad magic"* ]]
  no_leftovers "$T/out"
}

@test "a truncated stream is refused (65) and leaves no output" {
  size=$(file_size "$T/seq.sqr")
  head -c $((size - 5)) "$T/seq.sqr" > "$T/trunc.sqr"
  run -65 seqrec-split -o "$T/out/s.sqr" "$T/trunc.sqr"
  [[ "$output" == *"seqrec-split: $T/trunc.sqr: byte "*"unexpected end of stream"* ]]
  no_leftovers "$T/out"
  # the same on a pipe
  run -65 --separate-stderr bash -c "seqrec-split < '$T/trunc.sqr' > '$T/out/pipe.sqr'"
  [[ "$stderr" == *"<stdin>: byte "* ]]
  run -65 seqrec-cat --verify "$T/out/pipe.sqr"
}

@test "a split stream is not split again (65)" {
  seqrec-split -o "$T/s.sqr" "$T/seq.sqr" 2>/dev/null
  run -65 seqrec-split -o "$T/out/x.sqr" "$T/s.sqr"
  [ "$output" = "seqrec-split: $T/s.sqr: byte 6: expected a sequences stream, got split" ]
  no_leftovers "$T/out"
}

@test "an output that cannot be created is 73" {
  run -73 seqrec-split -o "$T/no/such/dir/s.sqr" "$T/seq.sqr"
  [[ "$output" == *"seqrec-split: $T/no/such/dir/s.sqr: cannot create"* ]]
}

@test "--help lists every option of the man page, --version prints it" {
  run -0 seqrec-split --help
  [[ "$output" == "Usage: seqrec-split"* ]]
  help_opts=$(printf '%s\n' "$output" | help_options)
  man_opts=$(man_options "$SEQREC_ROOT/man/man1/seqrec-split.1")
  [ -n "$help_opts" ]
  [ "$help_opts" = "$man_opts" ]
  run -0 seqrec-split --version
  [[ "$output" == "seqrec-split (seqrec) "* ]]
}

@test "a zero-length record is 65 naming the input and its byte (issue 40)" {
  printf '1\t4\t10\n2\t5 6\t35 50\n' > "$T/one.txt"
  seqrec-cat --from-text sequences --timestamps "$T/one.txt" -o "$T/one.sqr"
  empty_first_record "$T/one.sqr" "$T/empty.sqr"
  META_LEN=$(python3 -c "import struct,sys;print(struct.unpack('<I',open(sys.argv[1],'rb').read()[20:24])[0])" "$T/one.sqr")
  for cut in "" "--time 40" "--ratio 0.5,0.5" "--holdout-users 0.5"; do
    run -65 seqrec-split $cut -o "$T/out/x.sqr" "$T/empty.sqr"
    [ "$output" = "seqrec-split: $T/empty.sqr: byte $((24 + META_LEN + 5)): empty record (a user with no items)" ]
  done
  no_leftovers "$T/out"
}
