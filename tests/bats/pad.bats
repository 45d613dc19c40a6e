#!/usr/bin/env bats
# seqrec-pad: zero padding on either side, truncation, RandomPad rows and
# their reproducibility, --copies, bad arguments and bad input.

load helper

setup() {
  common_setup
  # Item ids 1..9 all occur and users are 1..3, so preprocess's dense ids
  # are the ids of the text.
  printf '1 1 2 3 4 5\n2 6 7\n3 8 9 1\n' > "$T/in.txt"
  seqrec-preprocess --format s3rec "$T/in.txt" > "$T/seq.sqr"
  seqrec-split "$T/seq.sqr" > "$T/split.sqr" 2>/dev/null
  mkdir -p "$T/out"
}

# rows FILE: the padded rows of a padded stream, one per line, "user view row".
rows() { seqrec-cat "$1" | cut -f1-3; }

@test "zero padding on the left is the default; held-out targets follow" {
  run -0 bash -c "seqrec-pad --len 5 '$T/split.sqr' | seqrec-cat"
  # padded line: user, view, row, valid, test
  [ "${lines[0]}" = $'1\t0\t0 0 1 2 3\t4\t5' ]
  [ "${lines[1]}" = $'2\t0\t0 0 0 6 7\t\t' ]
  [ "${lines[2]}" = $'3\t0\t0 0 0 0 8\t9\t1' ]
  [ "${#lines[@]}" = 3 ]
}

@test "--right pads on the right" {
  run -0 bash -c "seqrec-pad -n 5 --right '$T/split.sqr' | seqrec-cat"
  [ "${lines[0]}" = $'1\t0\t1 2 3 0 0\t4\t5' ]
  [ "${lines[1]}" = $'2\t0\t6 7 0 0 0\t\t' ]
}

@test "a sequence longer than N keeps its newest N items" {
  run -0 bash -c "seqrec-pad -n 2 '$T/split.sqr' | seqrec-cat"
  [ "${lines[0]}" = $'1\t0\t2 3\t4\t5' ]
  [ "${lines[1]}" = $'2\t0\t6 7\t\t' ]
  [ "${lines[2]}" = $'3\t0\t0 8\t9\t1' ]
  run -0 bash -c "seqrec-pad -n 1 -m randompad '$T/split.sqr' | seqrec-cat"
  [ "${lines[0]}" = $'1\t0\t3\t4\t5' ]
}

@test "a sequences stream is all training" {
  run -0 bash -c "seqrec-pad -n 6 '$T/seq.sqr' | seqrec-cat"
  [ "${lines[0]}" = $'1\t0\t0 1 2 3 4 5\t\t' ]
  [ "${lines[1]}" = $'2\t0\t0 0 0 0 6 7\t\t' ]
  seqrec-pad -n 6 -o "$T/out/p.sqr" "$T/seq.sqr"
  run -0 seqrec-cat --header "$T/out/p.sqr"
  [[ "$output" == *$'meta\tpad.input=sequences'* ]]
}

@test "the header says padded, max_len N, no timestamps, and records pad.*" {
  printf '1\t1 2 3\t10 20 30\n' > "$T/ts.txt"
  seqrec-cat --from-text sequences --timestamps "$T/ts.txt" -o "$T/ts.sqr"
  seqrec-split -o "$T/ts-split.sqr" "$T/ts.sqr"
  seqrec-pad -n 4 -o "$T/out/p.sqr" "$T/ts-split.sqr"
  run -0 seqrec-cat --header "$T/out/p.sqr"
  [[ "$output" == *$'kind\tpadded'* ]]
  [[ "$output" == *$'max_len\t4'* ]]
  [[ "$output" == *$'timestamps\tno'* ]]
  [[ "$output" == *$'meta\tsplit.mode=leave-one-out'* ]]
  [[ "$output" == *$'meta\tpad.len=4'* ]]
  [[ "$output" == *$'meta\tpad.mode=zero'* ]]
  [[ "$output" == *$'meta\tpad.side=left'* ]]
  [[ "$output" == *$'meta\tpad.copies=1'* ]]
  run -0 seqrec-cat "$T/out/p.sqr"
  [ "$output" = $'1\t0\t0 0 0 1\t2\t3' ]
  no_leftovers "$T/out" p.sqr
}

@test "randompad: copies joined by one zero, the original ends the row" {
  # |S| = 3, N = 10: only alpha = 1 fits (S 0 S is 7, S 0 S 0 S is 11)
  for s in 1 2 3 4 5; do
    run -0 bash -c "seqrec-pad -n 10 -m randompad -s $s '$T/split.sqr' | seqrec-cat"
    [ "${lines[0]}" = $'1\t0\t0 0 0 1 2 3 0 1 2 3\t4\t5' ]
    # |S| = 2: alpha is 1 or 2
    [[ "${lines[1]}" == $'2\t0\t0 0 0 0 0 6 7 0 6 7\t\t' ||
       "${lines[1]}" == $'2\t0\t0 0 6 7 0 6 7 0 6 7\t\t' ]]
  done
  # |S| >= N/2: no repeat, plain zero padding
  run -0 bash -c "seqrec-pad -n 6 -m randompad '$T/split.sqr' | seqrec-cat"
  [ "${lines[0]}" = $'1\t0\t0 0 0 1 2 3\t4\t5' ]
  seqrec-pad -n 10 -m randompad -s 9 -o "$T/out/r.sqr" "$T/split.sqr"
  run -0 seqrec-cat --header "$T/out/r.sqr"
  [[ "$output" == *$'meta\tpad.mode=randompad'* ]]
  [[ "$output" == *$'meta\tpad.seed=9'* ]]
}

@test "randompad is reproducible for a seed and differs between seeds" {
  # 20 users of one item each, N = 50: alpha is one of 24 values per row
  for u in $(seq 1 20); do echo "$u $u"; done > "$T/many.txt"
  seqrec-preprocess --format s3rec "$T/many.txt" > "$T/many.sqr"
  seqrec-pad -n 50 -m randompad -s 7 "$T/many.sqr" > "$T/a.sqr"
  seqrec-pad -n 50 -m randompad -s 7 "$T/many.sqr" > "$T/b.sqr"
  seqrec-pad -n 50 -m randompad -s 8 "$T/many.sqr" > "$T/c.sqr"
  cmp "$T/a.sqr" "$T/b.sqr"
  run -1 cmp -s <(rows "$T/a.sqr") <(rows "$T/c.sqr")
  # and every row ends with the user's item
  run -0 bash -c "seqrec-cat '$T/a.sqr' | awk -F'\t' '{ n = split(\$3, r, \" \"); if (n != 50 || r[50] != \$1) print \"bad: \" \$0 }'"
  [ -z "$output" ]
}

@test "a row depends on (seed, user, view) only, not on the order of users" {
  for u in $(seq 1 12); do echo "$u $u"; done > "$T/many.txt"
  seqrec-preprocess --format s3rec "$T/many.txt" > "$T/many.sqr"
  # the same users in reverse order, written directly as a sequences stream
  seqrec-cat "$T/many.sqr" | tac > "$T/rev.txt"
  seqrec-cat --from-text sequences --n-items 12 "$T/rev.txt" -o "$T/rev.sqr"
  seqrec-pad -n 40 -m randompad -k 2 -s 3 -o "$T/fwd.pad" "$T/many.sqr"
  seqrec-pad -n 40 -m randompad -k 2 -s 3 -o "$T/rev.pad" "$T/rev.sqr"
  diff <(rows "$T/fwd.pad" | sort) <(rows "$T/rev.pad" | sort)
  # view 0 of two copies is the row of a single copy
  seqrec-pad -n 40 -m randompad -s 3 -o "$T/one.pad" "$T/many.sqr"
  diff <(rows "$T/one.pad") <(rows "$T/fwd.pad" | awk -F'\t' '$2 == 0')
}

@test "--copies K writes K views per user" {
  run -0 bash -c "seqrec-pad -n 5 -k 3 '$T/split.sqr' | seqrec-cat"
  [ "${#lines[@]}" = 9 ]
  [ "${lines[0]}" = $'1\t0\t0 0 1 2 3\t4\t5' ]
  [ "${lines[1]}" = $'1\t1\t0 0 1 2 3\t4\t5' ]
  [ "${lines[2]}" = $'1\t2\t0 0 1 2 3\t4\t5' ]
  [ "${lines[3]}" = $'2\t0\t0 0 0 6 7\t\t' ]
  # randompad views are drawn independently: over 20 users some differ
  for u in $(seq 1 20); do echo "$u $u"; done > "$T/many.txt"
  seqrec-preprocess --format s3rec "$T/many.txt" > "$T/many.sqr"
  seqrec-pad -n 50 -m randompad -k 2 -o "$T/out/k.sqr" "$T/many.sqr"
  run -0 bash -c "seqrec-cat '$T/out/k.sqr' | awk -F'\t' '\$2 == 0 { r[\$1] = \$3 } \$2 == 1 && r[\$1] != \$3 { d++ } END { print d + 0 }'"
  [ "$output" -ge 10 ]
  run -0 seqrec-cat --header "$T/out/k.sqr"
  [[ "$output" == *$'records\t40'* ]]
  [[ "$output" == *$'meta\tpad.copies=2'* ]]
}

@test "bad arguments are usage errors (64)" {
  run -64 seqrec-pad "$T/split.sqr"
  [[ "$output" == *"--len N is required"* ]]
  for n in 0 -1 abc 1x '' 99999999999; do
    run -64 seqrec-pad --len "$n" "$T/split.sqr"
    [[ "$output" == *"seqrec-pad: --len"* ]]
  done
  run -64 seqrec-pad -n 5 --mode random "$T/split.sqr"
  [[ "$output" == *"expected zero or randompad"* ]]
  run -64 seqrec-pad -n 5 -m randompad --right "$T/split.sqr"
  [[ "$output" == *"--right applies to --mode zero only"* ]]
  run -64 seqrec-pad -n 5 --copies 0 "$T/split.sqr"
  run -64 seqrec-pad -n 5 --seed -1 "$T/split.sqr"
  run -64 seqrec-pad -n 5 --bogus "$T/split.sqr"
  [[ "$output" == *"Try 'seqrec-pad --help'"* ]]
  run -64 seqrec-pad -n 5 "$T/split.sqr" "$T/split.sqr"
}

@test "a missing input is 66" {
  run -66 seqrec-pad -n 5 -o "$T/out/x.sqr" "$T/nope.sqr"
  no_leftovers "$T/out"
}

@test "wrong magic is refused (65) and leaves no output" {
  cp "$T/split.sqr" "$T/bad.sqr"
  flip_byte "$T/bad.sqr" 1
  run -65 seqrec-pad -n 5 -o "$T/out/p.sqr" "$T/bad.sqr"
  [[ "$output" == *"seqrec-pad: $T/bad.sqr: byte 0: bad magic"* ]]
  no_leftovers "$T/out"
}

@test "a truncated or corrupted stream is refused (65) and leaves no output" {
  size=$(file_size "$T/split.sqr")
  head -c $((size - 30)) "$T/split.sqr" > "$T/trunc.sqr"
  run -65 seqrec-pad -n 5 -o "$T/out/p.sqr" "$T/trunc.sqr"
  [[ "$output" == *"seqrec-pad: $T/trunc.sqr: byte "*"unexpected end of stream"* ]]
  no_leftovers "$T/out"
  cp "$T/split.sqr" "$T/flip.sqr"
  flip_byte "$T/flip.sqr" $((size - 30))
  run -65 seqrec-pad -n 5 -o "$T/out/p.sqr" "$T/flip.sqr"
  [[ "$output" == *"seqrec-pad: $T/flip.sqr: byte "* ]]
  no_leftovers "$T/out"
}

@test "a padded stream is not padded again (65)" {
  seqrec-pad -n 5 -o "$T/p.sqr" "$T/split.sqr"
  run -65 seqrec-pad -n 5 -o "$T/out/x.sqr" "$T/p.sqr"
  [ "$output" = "seqrec-pad: $T/p.sqr: byte 6: expected a sequences or split stream, got padded" ]
  no_leftovers "$T/out"
}

@test "an output that cannot be created is 73" {
  run -73 seqrec-pad -n 5 -o "$T/no/such/dir/p.sqr" "$T/split.sqr"
  [[ "$output" == *"seqrec-pad: $T/no/such/dir/p.sqr: cannot create"* ]]
}

@test "--help lists every option of the man page, --version prints it" {
  run -0 seqrec-pad --help
  [[ "$output" == "Usage: seqrec-pad"* ]]
  help_opts=$(printf '%s\n' "$output" | help_options)
  man_opts=$(man_options "$SEQREC_ROOT/man/man1/seqrec-pad.1")
  [ -n "$help_opts" ]
  [ "$help_opts" = "$man_opts" ]
  run -0 seqrec-pad --version
  [[ "$output" == "seqrec-pad (seqrec) "* ]]
}

@test "a zero-length record is 65 naming the input and its byte (issue 40)" {
  printf '1\t4\n2\t5 6\n' > "$T/one.txt"
  seqrec-cat --from-text sequences "$T/one.txt" -o "$T/one.sqr"
  empty_first_record "$T/one.sqr" "$T/empty.sqr"
  run -65 seqrec-pad -n 5 -o "$T/out/x.sqr" "$T/empty.sqr"
  [[ "$output" == "seqrec-pad: $T/empty.sqr: byte "*": empty record (a user with no items)" ]]
  no_leftovers "$T/out"
}
