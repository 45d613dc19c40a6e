#!/usr/bin/env bats
# The round trip preprocess -> split -> pad -> cat against golden text that
# was checked by hand (see the comments), on pipes and on files.

load helper

setup() {
  common_setup
  LOG="$FIX/pipeline/log.tsv"
  PRE=(seqrec-preprocess --format tsv --rating-col 3 --time-col 4 --min-rating 2 --core 2 "$LOG")
}

# log.tsv by hand: --min-rating 2 drops (u1,e); --core 2 drops z (one
# interaction); items a b c d -> 1 2 3 4 by first appearance; u2's b and c
# share t=10 and keep file order; u4 has 2 items: short, kept for training.
@test "preprocess | split | cat matches the golden split" {
  run -0 bash -c '"${@}" 2>/dev/null | seqrec-split --leave-one-out 2>/dev/null | seqrec-cat' _ "${PRE[@]}"
  [ "$output" = "$(cat "$GOLD/pipeline-split.txt")" ]
}

@test "preprocess | split | pad --len 4 | cat matches the golden rows" {
  run -0 bash -c '"${@}" 2>/dev/null | seqrec-split 2>/dev/null | seqrec-pad --len 4 | seqrec-cat' _ "${PRE[@]}"
  [ "$output" = "$(cat "$GOLD/pipeline-zero.txt")" ]
}

@test "the same through files gives the same bytes" {
  "${PRE[@]}" -o "$T/seq.sqr" 2>/dev/null
  seqrec-split -o "$T/split.sqr" "$T/seq.sqr" 2>/dev/null
  seqrec-pad --len 4 -o "$T/pad.sqr" "$T/split.sqr"
  seqrec-cat "$T/pad.sqr" > "$T/pad.txt"
  cmp "$T/pad.txt" "$GOLD/pipeline-zero.txt"
  no_leftovers "$T" seq.sqr split.sqr pad.sqr pad.txt
}

@test "RandomPad rows are reproducible for a seed (golden)" {
  run -0 bash -c '"${@}" 2>/dev/null | seqrec-split 2>/dev/null | seqrec-pad --len 6 --mode randompad --seed 3 --copies 2 | seqrec-cat' _ "${PRE[@]}"
  [ "$output" = "$(cat "$GOLD/pipeline-randompad.txt")" ]
}

@test "a stream cut short between two programs is refused downstream" {
  "${PRE[@]}" -o "$T/seq.sqr" 2>/dev/null
  size=$(file_size "$T/seq.sqr")
  run -65 bash -c "head -c $((size - 30)) '$T/seq.sqr' | seqrec-split -o '$T/split.sqr'"
  [[ "$output" == *"seqrec-split: <stdin>: byte "*"truncated"* ]]
  no_leftovers "$T" seq.sqr
}

@test "the text form round-trips: cat | cat --from-text | cat" {
  "${PRE[@]}" 2>/dev/null | seqrec-split 2>/dev/null | seqrec-cat > "$T/a.txt"
  seqrec-cat --from-text split --timestamps "$T/a.txt" | seqrec-cat > "$T/b.txt"
  cmp "$T/a.txt" "$T/b.txt"
}
