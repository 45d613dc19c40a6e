#!/usr/bin/env bats
# seqrec-metrics: text and stream input, the exact table and JSON, and every
# way the input can be wrong (status, message with line or byte).

load helper

setup() {
  common_setup
  # Ranks 1, 2, 5, 11 and 30 of 100, with a comment and a blank line; the
  # expected values are hand-computed in tests/unit/test_metrics.c.
  cp "$FIX/metrics/ranks.txt" "$T/ranks.txt"
  TABLE=$(cat "$FIX/metrics/ranks.table")
  JSON=$(cat "$FIX/metrics/ranks.json")
}

@test "metrics prints the table from the text form" {
  run -0 seqrec-metrics "$T/ranks.txt"
  [ "$output" = "$TABLE" ]
}

@test "metrics --json prints one object" {
  run -0 seqrec-metrics --json "$T/ranks.txt"
  [ "$output" = "$JSON" ]
}

@test "metrics -k takes any list, in the order given" {
  run -0 seqrec-metrics -k 1,5 --json "$T/ranks.txt"
  [ "$output" = '{"records": 5, "users": 5, "mrr": 0.364848, "hr@1": 0.200000, "recall@1": 0.200000, "ndcg@1": 0.200000, "mrr@1": 0.200000, "precision@1": 0.200000, "hr@5": 0.600000, "recall@5": 0.600000, "ndcg@5": 0.403557, "mrr@5": 0.340000, "precision@5": 0.120000}' ]
  run -0 seqrec-metrics --cutoffs 50,3 "$T/ranks.txt"
  [[ "${lines[0]}" == "metric            @50         @3" ]]
}

@test "metrics reads the three-column form and standard input" {
  cut -f1-3 "$T/ranks.txt" > "$T/three.txt"
  run -0 bash -c "seqrec-metrics < '$T/three.txt'"
  [ "$output" = "$TABLE" ]
  run -0 bash -c "seqrec-metrics - < '$T/three.txt'"
  [ "$output" = "$TABLE" ]
}

@test "metrics reads a ranks stream (file and pipe) with the same result" {
  command -v seqrec-cat >/dev/null || skip "needs seqrec-cat --from-text"
  seqrec-cat --from-text ranks "$T/ranks.txt" -o "$T/ranks.sqr"
  run -0 seqrec-metrics "$T/ranks.sqr"
  [ "$output" = "$TABLE" ]
  run -0 bash -c "seqrec-cat --from-text ranks '$T/ranks.txt' | seqrec-metrics --json"
  [ "$output" = "$JSON" ]
}

@test "metrics -o writes the file atomically" {
  run -0 seqrec-metrics -o "$T/m.txt" "$T/ranks.txt"
  [ -z "$output" ]
  [ "$(cat "$T/m.txt")" = "$TABLE" ]
  no_leftovers "$T" ranks.txt m.txt
}

@test "metrics counts a user with several records once per record" {
  printf '7\t1\t10\n7\t10\t10\n8\t2\t10\n' > "$T/multi.txt"
  run -0 seqrec-metrics -k 10 --json "$T/multi.txt"
  [[ "$output" == '{"records": 3, "users": 2, "mrr": 0.533333, "hr@10": 1.000000,'* ]]
}

@test "metrics: a malformed line is status 65 with its line number" {
  printf '1\t1\t100\n# fine\n2\tx\t100\n' > "$T/bad.txt"
  run -65 seqrec-metrics "$T/bad.txt"
  [ "$output" = "seqrec-metrics: $T/bad.txt: line 3: rank: 'x' is not a number in 0..4294967295" ]
  printf '1\t1\n' > "$T/short.txt"
  run -65 seqrec-metrics "$T/short.txt"
  [[ "$output" == *"short.txt: line 1: expected 3 or 4 fields"* ]]
  printf '1\t1\t5\t3\t9\n' > "$T/long.txt"
  run -65 seqrec-metrics "$T/long.txt"
  [[ "$output" == *"long.txt: line 1: expected 3 or 4 fields"* ]]
}

@test "metrics: a rank above n_cand (or 0) is status 65" {
  printf '1\t1\t100\n2\t101\t100\n' > "$T/over.txt"
  run -65 seqrec-metrics "$T/over.txt"
  [ "$output" = "seqrec-metrics: $T/over.txt: line 2: rank 101 outside 1..n_cand (100)" ]
  printf '1\t0\t100\n' > "$T/zero.txt"
  run -65 seqrec-metrics "$T/zero.txt"
  [[ "$output" == *"zero.txt: line 1: rank 0 outside 1..n_cand (100)"* ]]
}

@test "metrics: a rank above n_cand in a stream is status 65 with its byte" {
  command -v seqrec-cat >/dev/null || skip "needs seqrec-cat --from-text"
  printf '1\t3\t10\t4\n' > "$T/one.txt"
  seqrec-cat --from-text ranks "$T/one.txt" -o "$T/one.sqr"
  meta_len=$(python3 -c "import struct,sys;print(struct.unpack('<I',open(sys.argv[1],'rb').read()[20:24])[0])" "$T/one.sqr")
  # record: tag u8, user u32, item u32, rank u32, n_cand u32
  set_u32 "$T/one.sqr" $((24 + meta_len + 9)) 11
  run -65 seqrec-metrics "$T/one.sqr"
  [[ "$output" == "seqrec-metrics: $T/one.sqr: byte "*"rank 11"* ]]
}

@test "metrics: a stream of another kind is status 65" {
  command -v seqrec-synth >/dev/null || skip "needs seqrec-synth"
  seqrec-synth --users 3 --format stream -o "$T/seq.sqr"
  run -65 seqrec-metrics "$T/seq.sqr"
  [ "$output" = "seqrec-metrics: $T/seq.sqr: byte 6: a sequences stream, expected ranks" ]
}

@test "metrics: a damaged stream is status 65" {
  command -v seqrec-cat >/dev/null || skip "needs seqrec-cat --from-text"
  seqrec-cat --from-text ranks "$T/ranks.txt" -o "$T/ranks.sqr"
  head -c -3 "$T/ranks.sqr" > "$T/cut.sqr"
  run -65 seqrec-metrics "$T/cut.sqr"
  [[ "$output" == "seqrec-metrics: $T/cut.sqr: byte "* ]]
}

@test "metrics: empty input is status 65 with a clear message" {
  : > "$T/empty.txt"
  run -65 seqrec-metrics "$T/empty.txt"
  [ "$output" = "seqrec-metrics: $T/empty.txt: no rank records" ]
  printf '# nothing\n\n' > "$T/comments.txt"
  run -65 seqrec-metrics "$T/comments.txt"
  [[ "$output" == *"no rank records"* ]]
  run -65 bash -c "seqrec-metrics < /dev/null"
  [ "$output" = "seqrec-metrics: <stdin>: no rank records" ]
}

@test "metrics: a missing file is status 66" {
  run -66 seqrec-metrics "$T/missing.txt"
  [[ "$output" == "seqrec-metrics: $T/missing.txt: cannot open"* ]]
}

@test "metrics: bad arguments are status 64" {
  run -64 seqrec-metrics -k 0 "$T/ranks.txt"
  run -64 seqrec-metrics -k 10,10 "$T/ranks.txt"
  run -64 seqrec-metrics -k ten "$T/ranks.txt"
  run -64 seqrec-metrics -k
  run -64 seqrec-metrics --bogus "$T/ranks.txt"
  run -64 seqrec-metrics "$T/ranks.txt" "$T/ranks.txt"
  [[ "$output" == *"--help"* ]]
}

@test "metrics: an output that cannot be created is status 73 and leaves nothing" {
  run -73 seqrec-metrics -o "$T/no/dir/m.txt" "$T/ranks.txt"
  no_leftovers "$T" ranks.txt
}

@test "metrics --help and --version" {
  run -0 seqrec-metrics --help
  [[ "$output" == "Usage: seqrec-metrics"* ]]
  for o in --cutoffs --json --output --help --version; do
    [[ "$output" == *"$o"* ]] || { echo "missing $o"; return 1; }
  done
  run -0 seqrec-metrics --version
  [[ "$output" == "seqrec-metrics "* ]]
}
