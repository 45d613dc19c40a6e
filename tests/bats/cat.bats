#!/usr/bin/env bats
# seqrec-cat: printing, --header, --verify, --from-text, and every way a
# stream can be bad (exit code, message naming file and byte, no output left).

load helper

setup() {
  common_setup
  printf '1\t1 2 3\n2\t4 5\n3\t2 4 6 8\n' > "$T/seq.txt"
  seqrec-cat --from-text sequences --meta dataset=tiny "$T/seq.txt" -o "$T/seq.sqr"
  # header 24 bytes + meta; first record starts right after
  META_LEN=$(python3 -c "import struct,sys;print(struct.unpack('<I',open(sys.argv[1],'rb').read()[20:24])[0])" "$T/seq.sqr")
  REC0=$((24 + META_LEN))
  mkdir -p "$T/out"
}

@test "cat prints records as TSV, the inverse of --from-text" {
  run -0 seqrec-cat "$T/seq.sqr"
  [ "$output" = "$(cat "$T/seq.txt")" ]
}

@test "cat reads stdin and several files" {
  run -0 bash -c "seqrec-cat < '$T/seq.sqr' | wc -l"
  [ "$output" = 3 ]
  run -0 bash -c "seqrec-cat '$T/seq.sqr' '$T/seq.sqr' | wc -l"
  [ "$output" = 6 ]
}

@test "cat --header shows kind, meta and counts" {
  run -0 seqrec-cat --header "$T/seq.sqr"
  [[ "$output" == *$'kind\tsequences'* ]]
  [[ "$output" == *$'n_items\t8'* ]]
  [[ "$output" == *$'meta\tdataset=tiny'* ]]
  [[ "$output" == *$'records\t3'* ]]
  [[ "$output" == *$'interactions\t9'* ]]
  [[ "$output" == *$'checksum\tok'* ]]
}

@test "cat --verify prints nothing and succeeds on a good stream" {
  run -0 seqrec-cat --verify "$T/seq.sqr"
  [ -z "$output" ]
}

@test "round trip of every kind through --from-text and cat" {
  printf '1\t1 2\t3\t4\n2\t5 6 7\t\t\n' > "$T/split.txt"
  seqrec-cat --from-text split "$T/split.txt" | seqrec-cat > "$T/split.out"
  cmp "$T/split.txt" "$T/split.out"
  printf '1\t0\t0 0 1 2\t3\t4\n1\t1\t0 1 0 2\t3\t4\n' > "$T/pad.txt"
  seqrec-cat --from-text padded --max-len 4 "$T/pad.txt" | seqrec-cat > "$T/pad.out"
  cmp "$T/pad.txt" "$T/pad.out"
  printf '1\t3\t100\t42\n2\t1\t100\t7\n' > "$T/ranks.txt"
  seqrec-cat --from-text ranks "$T/ranks.txt" | seqrec-cat > "$T/ranks.out"
  cmp "$T/ranks.txt" "$T/ranks.out"
  printf '1\t5:0.5,3:0.25\n' > "$T/topk.txt"
  seqrec-cat --from-text topk "$T/topk.txt" | seqrec-cat > "$T/topk.out"
  cmp "$T/topk.txt" "$T/topk.out"
  printf '1\t1 2\t100 200\n' > "$T/ts.txt"
  seqrec-cat --from-text sequences --timestamps "$T/ts.txt" | seqrec-cat > "$T/ts.out"
  cmp "$T/ts.txt" "$T/ts.out"
}

@test "truncated stream: 65, names the byte, no output file" {
  head -c -5 "$T/seq.sqr" > "$T/trunc.sqr"
  run -65 seqrec-cat "$T/trunc.sqr" -o "$T/out/x.txt"
  [[ "$output" == *"seqrec-cat: $T/trunc.sqr: byte "*"unexpected end of stream (truncated: no trailer)"* ]]
  no_leftovers "$T/out"
}

@test "truncated stream on a pipe: 65" {
  run -65 bash -c "head -c 40 '$T/seq.sqr' | seqrec-cat --verify"
  [[ "$output" == *"seqrec-cat: <stdin>: byte "*"truncated"* ]]
}

@test "wrong magic: 65 at byte 0, no output file" {
  printf 'NOPE' | cat - "$T/seq.sqr" | tail -c +5 > /dev/null
  cp "$T/seq.sqr" "$T/bad.sqr"
  printf 'XQRC' | dd of="$T/bad.sqr" conv=notrunc status=none
  run -65 seqrec-cat "$T/bad.sqr" -o "$T/out/x.txt"
  [ "$output" = "seqrec-cat: $T/bad.sqr: byte 0: bad magic (not a seqrec stream)" ]
  no_leftovers "$T/out"
}

@test "text given where a stream is expected: bad magic" {
  run -65 seqrec-cat "$T/seq.txt"
  [[ "$output" == *"byte 0: bad magic"* ]]
}

@test "unknown version: 65 at byte 4" {
  cp "$T/seq.sqr" "$T/bad.sqr"
  printf '\x07' | dd of="$T/bad.sqr" bs=1 seek=4 conv=notrunc status=none
  run -65 seqrec-cat --verify "$T/bad.sqr"
  [ "$output" = "seqrec-cat: $T/bad.sqr: byte 4: unsupported stream version 7 (this build reads version 1)" ]
}

@test "flipped byte inside a record: checksum mismatch, 65, no output file" {
  cp "$T/seq.sqr" "$T/bad.sqr"
  # the user id of the second record: value changes, structure does not
  flip_byte "$T/bad.sqr" $((REC0 + 1 + 4 + 4 + 12 + 1))
  run -65 seqrec-cat "$T/bad.sqr" -o "$T/out/x.txt"
  [[ "$output" == *"seqrec-cat: $T/bad.sqr: byte "*": checksum mismatch (stream corrupted)"* ]]
  no_leftovers "$T/out"
}

@test "item id out of range: 65 names the byte of the item" {
  cp "$T/seq.sqr" "$T/bad.sqr"
  set_u32 "$T/bad.sqr" $((REC0 + 9 + 4)) 99
  run -65 seqrec-cat "$T/bad.sqr" -o "$T/out/x.txt"
  [ "$output" = "seqrec-cat: $T/bad.sqr: byte $((REC0 + 13)): item id 99 out of range (n_items 8)" ]
  no_leftovers "$T/out"
}

@test "oversize record: 65" {
  cp "$T/seq.sqr" "$T/bad.sqr"
  set_u32 "$T/bad.sqr" $((REC0 + 5)) 4000000000
  run -65 seqrec-cat --verify "$T/bad.sqr"
  [[ "$output" == *"byte $((REC0 + 5)): oversize record: 4000000000 items"* ]]
}

@test "record count mismatch in the trailer: 65" {
  cp "$T/seq.sqr" "$T/bad.sqr"
  size=$(file_size "$T/bad.sqr")
  set_u32 "$T/bad.sqr" $((size - 24)) 7
  run -65 seqrec-cat --verify "$T/bad.sqr"
  [[ "$output" == *"trailer says 7 records, stream has 3"* ]]
}

@test "data after the trailer: 65" {
  cat "$T/seq.sqr" "$T/seq.sqr" > "$T/two.sqr"
  run -65 seqrec-cat --verify "$T/two.sqr"
  [[ "$output" == *"data after the trailer"* ]]
}

@test "empty input: 65 with a clear message, no output file" {
  : > "$T/empty.sqr"
  run -65 seqrec-cat "$T/empty.sqr" -o "$T/out/x.txt"
  [ "$output" = "seqrec-cat: $T/empty.sqr: byte 0: empty input (expected a seqrec stream)" ]
  no_leftovers "$T/out"
  run -65 seqrec-cat --verify < /dev/null
  [[ "$output" == *"<stdin>: byte 0: empty input"* ]]
}

@test "missing file: 66, no output file" {
  run -66 seqrec-cat "$T/nope.sqr" -o "$T/out/x.txt"
  [ "$output" = "seqrec-cat: $T/nope.sqr: cannot open: No such file or directory" ]
  no_leftovers "$T/out"
}

@test "unwritable output directory: 73, nothing left" {
  mkdir -p "$T/ro"
  chmod 555 "$T/ro"
  if touch "$T/ro/probe" 2>/dev/null; then rm -f "$T/ro/probe"; skip "running as a user that ignores permissions"; fi
  run -73 seqrec-cat "$T/seq.sqr" -o "$T/ro/x.txt"
  [[ "$output" == "seqrec-cat: $T/ro/x.txt: cannot create: Permission denied" ]]
  no_leftovers "$T/ro"
}

@test "output into a missing directory: 73" {
  run -73 seqrec-cat "$T/seq.sqr" -o "$T/missing/x.txt"
  [[ "$output" == *"cannot create: No such file or directory"* ]]
}

@test "a failure after output has begun leaves no output file" {
  cp "$T/seq.sqr" "$T/bad.sqr"
  size=$(file_size "$T/bad.sqr")
  flip_byte "$T/bad.sqr" $((size - 1))
  run -65 seqrec-cat "$T/bad.sqr" -o "$T/out/x.txt"
  [[ "$output" == *"checksum mismatch"* ]]
  no_leftovers "$T/out"
}

# from_text_refused TEXT LINE-MESSAGE: --from-text sequences of TEXT (printf
# format) is 65 with "FILE: LINE-MESSAGE" and leaves no output
from_text_refused() {
  printf "$1" > "$T/refused.txt"
  run -65 seqrec-cat --from-text sequences "$T/refused.txt" -o "$T/out/x.sqr"
  [ "$output" = "seqrec-cat: $T/refused.txt: $2" ]
  no_leftovers "$T/out"
}

@test "--from-text: malformed line names file and line number, no output" {
  from_text_refused '1\t1 2 3\n# comment\n2\t4 x\n' "line 3: bad number in the items field"
  printf '1\t1 2 3\t9\n' > "$T/bad2.txt"
  run -65 seqrec-cat --from-text sequences "$T/bad2.txt"
  [[ "$output" == *"line 1: expected 2 tab-separated fields for a sequences record, found 3"* ]]
}

@test "--from-text: a NUL byte in a line is 65 with the file and line (issue 40)" {
  from_text_refused '1\t1 2 3\n2\t4\0 5 6\n' "line 2: a NUL byte (byte 4 of the line)"
}

@test "--from-text: a record with no items is refused, a reader refuses one (issue 40)" {
  from_text_refused '1\t1 2\n2\t\n' "line 2: empty record (a user with no items)"
  printf '1\t4\n2\t5 6\n' > "$T/one.txt"
  seqrec-cat --from-text sequences "$T/one.txt" -o "$T/one.sqr"
  empty_first_record "$T/one.sqr" "$T/e.sqr"
  run -65 seqrec-cat --verify "$T/e.sqr"
  [[ "$output" == *"$T/e.sqr: byte "*": empty record (a user with no items)" ]]
}

@test "--from-text with --header prints the would-be header, with --verify only checks (issue 40)" {
  run -0 seqrec-cat --from-text sequences --meta dataset=t --header "$T/seq.txt"
  [[ "$output" == *$'kind\tsequences\n'*$'meta\tdataset=t\n'*$'records\t3\ninteractions\t9\nchecksum\tok'* ]]
  run -0 seqrec-cat --from-text sequences --verify "$T/seq.txt"
  [ -z "$output" ]
  printf '1\t1 x\n' > "$T/bad.txt"
  run -65 seqrec-cat --from-text sequences --verify "$T/bad.txt"
  [ "$output" = "seqrec-cat: $T/bad.txt: line 1: bad number in the items field" ]
  run -64 seqrec-cat --from-text sequences --no-ts "$T/seq.txt"
  [[ "$output" == *"--no-ts does not go with --from-text"* ]]
}

@test "--from-text: 0 outside a padded row is refused" {
  printf '1\t1 0 3\n' > "$T/zero.txt"
  run -65 seqrec-cat --from-text sequences "$T/zero.txt" -o "$T/out/x.sqr"
  [[ "$output" == *"item id 0 (padding) outside a padded row"* ]]
  no_leftovers "$T/out"
}

@test "binary output to a terminal is refused" {
  command -v script >/dev/null || skip "script(1) not installed"
  run script -qec "$SEQREC_BIN/seqrec-cat --from-text sequences $T/seq.txt" /dev/null
  [[ "$output" == *"refusing to write a binary stream to a terminal"* ]]
}

@test "usage errors: 64" {
  run -64 seqrec-cat --from-text bogus
  [[ "$output" == *"unknown kind 'bogus'"* ]]
  run -64 seqrec-cat --n-items 3 "$T/seq.sqr"
  run -64 seqrec-cat --from-text padded "$T/seq.txt"
  [[ "$output" == *"needs --max-len"* ]]
  run -64 seqrec-cat --no-such-option
}

@test "--help and --version" {
  run -0 seqrec-cat --help
  [[ "$output" == *"usage: seqrec-cat"* ]]
  run -0 seqrec-cat --version
  [[ "$output" == "seqrec-cat "* ]]
}

@test "--from-text: a record the header refuses names the input file and line" {
  printf '1\t1 2 3\n# comment\n\n2\t4 9\n' > "$T/big.txt"
  run -65 seqrec-cat --from-text sequences --n-items 5 "$T/big.txt" -o "$T/out/f"
  [ "$output" = "seqrec-cat: $T/big.txt: line 4: item id 9 out of range (n_items 5)" ]
  no_leftovers "$T/out"
  printf '1\t1 2 3\n' > "$T/long.txt"
  run -65 bash -c "seqrec-cat --from-text padded --max-len 2 < '$T/long.txt' > /dev/null"
  [[ "$output" == "seqrec-cat: <stdin>: line 1: "* ]]
}

# A tiny trained model (popularity: no training loop, instant).
tiny_model() {
  [ -x "$SEQREC_BIN/seqrec-train" ] || skip "seqrec-train is not built"
  printf '1\t1 2 3 4\n2\t2 3 1\n3\t1 4 5 2\n' > "$T/u.txt"
  seqrec-cat --from-text sequences --meta dataset=tiny "$T/u.txt" | seqrec-split -o "$T/split.sqr" 2>/dev/null
  seqrec-train --model pop -o "$T/m.sqm" "$T/split.sqr" 2>/dev/null
}

@test "cat --header on a model file: config, provenance and tensors" {
  tiny_model
  run -0 seqrec-cat --header "$T/m.sqm"
  [ "${lines[0]}" = $'file\t'"$T/m.sqm" ]
  [ "${lines[1]}" = $'kind\tmodel' ]
  [[ "$output" == *$'\nconfig\tmodel=pop\n'* ]]
  [[ "$output" == *$'\nconfig\tn_items=5\n'* ]]
  [[ "$output" == *$'\nconfig\tdata.dataset=tiny\n'* ]]
  [[ "$output" == *$'\nconfig\tseqrec.version='* ]]
  [[ "$output" == *$'\ntensor\tpop.count\tu64\t6\n'* ]]
  [[ "$output" == *$'\ntensors\t1\nchecksum\tok' ]]
  # a stream and a model in one call; --verify checks a model silently
  run -0 seqrec-cat --header "$T/split.sqr" "$T/m.sqm"
  [[ "$output" == *$'kind\tsplit'*$'kind\tmodel'* ]]
  run -0 seqrec-cat --verify "$T/m.sqm"
  [ -z "$output" ]
}

@test "cat --header on a damaged model file: 65 names the byte, no output" {
  tiny_model
  cp "$T/m.sqm" "$T/bad.sqm"
  size=$(file_size "$T/bad.sqm")
  flip_byte "$T/bad.sqm" $((size - 12))
  run -65 seqrec-cat --header "$T/bad.sqm" -o "$T/out/h.txt"
  [[ "$output" == "seqrec-cat: $T/bad.sqm: byte "*"checksum mismatch"* ]]
  no_leftovers "$T/out"
}
