#!/usr/bin/env bats
# seqrec-score --topk for a consumer (issue 11): the long and jsonl
# formats, --users (dense and original ids, unknown users, bad lines), and
# scores that are the same bytes whatever the shard, the batch size and
# the thread count, for a SASRec and a BERT4Rec model.

load helper

# Two small trained models (d = 64, as the papers: the batch dependence of
# a GEMM over the batch showed at this width), made once for the file.
setup_file() {
  : "${SEQREC_BIN:?run the suites through make bats}"
  PATH="$SEQREC_BIN:$PATH"
  D="$BATS_FILE_TMPDIR"
  seqrec-synth --users 300 --items 80 --seed 3 --format stream | seqrec-split 2>/dev/null > "$D/d.sqr"
  seqrec-train --dim 64 --ffn 64 --max-len 50 --epochs 1 --threads 2 --seed 1 \
    -o "$D/sasrec.sqm" "$D/d.sqr" 2>/dev/null
  seqrec-train --model bert4rec --dim 64 --ffn 64 --max-len 50 --epochs 1 --threads 2 --seed 1 \
    -o "$D/bert4rec.sqm" "$D/d.sqr" 2>/dev/null
}

setup() {
  common_setup
  D="$BATS_FILE_TMPDIR"
  # the shop of score.bats: ann 1, bob 2, cid 3; apple 1 .. egg 5
  printf 'ann\tapple\nann\tbanana\nann\tcherry\nann\tdate\nbob\tbanana\nbob\tcherry\nbob\tapple\ncid\tapple\ncid\tdate\ncid\tegg\ncid\tbanana\n' > "$T/log.tsv"
  seqrec-preprocess --format tsv -d shop --map "$T/map.tsv" -o "$T/seq.sqr" "$T/log.tsv"
  seqrec-split -o "$T/split.sqr" "$T/seq.sqr" 2>/dev/null
  seqrec-train --model pop -o "$T/m.sqm" "$T/split.sqr" 2>/dev/null
  mkdir -p "$T/out"
}

@test "--format long: a header, then user rank item score rows, K per user" {
  run -0 seqrec-score -m "$T/m.sqm" -k 2 --include-history -f long --map "$T/map.tsv" "$T/split.sqr"
  [ "${lines[0]}" = $'user\trank\titem\tscore' ]
  [ "${lines[1]}" = $'ann\t1\tapple\t2' ]
  [ "${lines[2]}" = $'ann\t2\tbanana\t2' ]
  [ "${#lines[@]}" = 7 ]
  # without the map: dense ids; history left out: bob gets date, egg
  run -0 seqrec-score -m "$T/m.sqm" -k 2 -f long "$T/split.sqr"
  [ "${lines[0]}" = $'user\trank\titem\tscore' ]
  [ "${lines[1]}" = $'1\t1\t5\t0' ]
  [ "${lines[2]}" = $'2\t1\t4\t1' ]
  [ "${lines[3]}" = $'2\t2\t5\t0' ]
  [ "${#lines[@]}" = 5 ]
  # Beauty-sized K on the trained model: header + users x K rows
  seqrec-score -m "$D/sasrec.sqm" -k 10 -f long -o "$T/out/l.tsv" "$D/d.sqr"
  [ "$(wc -l < "$T/out/l.tsv")" = $((1 + 300 * 10)) ]
  [ "$(cut -f2 "$T/out/l.tsv" | sed 1d | sort -n | uniq -c | wc -l)" = 10 ]
}

@test "--format jsonl: one JSON object per user; original ids as strings with --map" {
  command -v python3 >/dev/null || skip "python3 checks the JSON"
  seqrec-score -m "$T/m.sqm" -k 3 -f jsonl --map "$T/map.tsv" -o "$T/out/a.jsonl" "$T/split.sqr"
  run -0 head -1 "$T/out/a.jsonl"
  [ "$output" = '{"user":"ann","items":["egg"],"scores":[0]}' ]
  python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["user"] for r in rows] == ["ann", "bob", "cid"], rows
assert rows[1]["items"] == ["date", "egg"] and rows[1]["scores"] == [1, 0], rows
assert all(len(r["items"]) == len(r["scores"]) for r in rows)' "$T/out/a.jsonl"
  # dense ids are numbers; every line parses; K items each
  seqrec-score -m "$D/bert4rec.sqm" -k 5 -f jsonl -o "$T/out/b.jsonl" "$D/d.sqr"
  python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 300
for r in rows:
    assert isinstance(r["user"], int) and len(r["items"]) == 5 == len(r["scores"])
    assert all(isinstance(i, int) for i in r["items"])
    assert r["scores"] == sorted(r["scores"], reverse=True)' "$T/out/b.jsonl"
  # ids that need escaping stay valid JSON: the log with ann renamed, its
  # own map and stream (a hand-edited map is not the stream's: 65)
  printf 'user\t1\ta"b\\c\nuser\t2\tbob\nuser\t3\tcid\n' > "$T/odd.tsv"
  grep '^item' "$T/map.tsv" >> "$T/odd.tsv"
  run -65 seqrec-score -m "$T/m.sqm" -k 1 -f jsonl --map "$T/odd.tsv" "$T/split.sqr"
  [[ "$output" == *"odd.tsv is not the id map of $T/split.sqr, nor an extension of it: its first 3 users differ"* ]]
  sed 's/^ann\t/a"b\\c\t/' "$T/log.tsv" > "$T/odd.log"
  seqrec-preprocess --format tsv -d shop --map "$T/odd.tsv" "$T/odd.log" | seqrec-split -o "$T/odd.sqr" 2>/dev/null
  seqrec-score -m "$T/m.sqm" -k 1 -f jsonl --map "$T/odd.tsv" -o "$T/out/c.jsonl" "$T/odd.sqr"
  python3 -c '
import json, sys
assert json.loads(open(sys.argv[1]).readline())["user"] == "a\"b\\c"' "$T/out/c.jsonl"
}

@test "--users FILE scores only the listed users: dense ids, or original ids with --map" {
  printf '3\n1\n' > "$T/u.txt"
  run -0 --separate-stderr seqrec-score -m "$T/m.sqm" -k 1 --users "$T/u.txt" "$T/split.sqr"
  [ "${lines[0]}" = $'1\t5:0' ]
  [ "${lines[1]}" = $'3\t3:0' ]
  [ "${#lines[@]}" = 2 ]
  [ -z "$stderr" ]
  printf 'bob\r\ncid\n' > "$T/names.txt"
  run -0 seqrec-score -m "$T/m.sqm" -k 1 --map "$T/map.tsv" --users "$T/names.txt" "$T/split.sqr"
  [ "${lines[0]}" = $'bob\tdate:1' ]
  [ "${lines[1]}" = $'cid\tcherry:0' ]
  [ "${#lines[@]}" = 2 ]
  # ranks too, and the listed users' lines are the full run's lines
  seqrec-score -m "$D/sasrec.sqm" -k 5 "$D/d.sqr" > "$T/all.tsv"
  seq 1 7 300 > "$T/some.txt"
  seqrec-score -m "$D/sasrec.sqm" -k 5 --users "$T/some.txt" -b 3 "$D/d.sqr" > "$T/some.tsv"
  awk 'NR == FNR { want[$1] = 1; next } want[$1]' "$T/some.txt" "$T/all.tsv" | cmp - "$T/some.tsv"
  run -0 bash -c "seqrec-score -m '$T/m.sqm' --users '$T/u.txt' '$T/split.sqr' | seqrec-cat"
  [ "${#lines[@]}" = 2 ]
  run -0 bash -c "seqrec-score -m '$T/m.sqm' --users '$T/u.txt' -f stream -k 1 -o '$T/out/s.sqr' '$T/split.sqr' && seqrec-cat --header '$T/out/s.sqr'"
  [[ "$output" == *$'meta\tscore.users='"$T/u.txt"* ]]
}

@test "--users: unknown users are warnings (file and line), the rest is scored" {
  printf '2\n9\n' > "$T/u.txt"
  run -0 --separate-stderr seqrec-score -m "$T/m.sqm" -k 1 --users "$T/u.txt" "$T/split.sqr"
  [ "$output" = $'2\t4:1' ]
  [[ "$stderr" == *"warning: $T/u.txt: line 2: user '9' has no record in $T/split.sqr: skipped"* ]]
  printf 'ann\nzoe\n' > "$T/n.txt"
  run -0 --separate-stderr seqrec-score -m "$T/m.sqm" -k 1 --map "$T/map.tsv" --users "$T/n.txt" "$T/split.sqr"
  [ "$output" = $'ann\tegg:0' ]
  [[ "$stderr" == *"warning: $T/n.txt: line 2: user 'zoe' is not in the map: skipped"* ]]
  # many: ten lines, then the count
  seq 100 130 > "$T/many.txt"
  run -0 --separate-stderr seqrec-score -m "$T/m.sqm" -k 1 --users "$T/many.txt" "$T/split.sqr"
  [ -z "$output" ]
  [ "$(printf '%s\n' "$stderr" | grep -c 'has no record')" = 10 ]
  [[ "$stderr" == *"31 unknown users in all, skipped"* ]]
}

@test "--users: a missing file is 66, a bad line 65 (file and line), no output left" {
  run -66 seqrec-score -m "$T/m.sqm" -k 1 --users "$T/none.txt" -o "$T/out/t.tsv" "$T/split.sqr"
  [[ "$output" == *"$T/none.txt: cannot open"* ]]
  printf '1\nann\n' > "$T/bad.txt"
  run -65 seqrec-score -m "$T/m.sqm" -k 1 --users "$T/bad.txt" -o "$T/out/t.tsv" "$T/split.sqr"
  [[ "$output" == *"$T/bad.txt: line 2: bad user id 'ann'"* ]]
  printf '1\n\n2\n' > "$T/empty.txt"
  run -65 seqrec-score -m "$T/m.sqm" -k 1 --map "$T/map.tsv" --users "$T/empty.txt" "$T/split.sqr"
  [[ "$output" == *"$T/empty.txt: line 2: expected one user id, got an empty line"* ]]
  printf 'ann\tbob\n' > "$T/tab.txt"
  run -65 seqrec-score -m "$T/m.sqm" -k 1 --map "$T/map.tsv" --users "$T/tab.txt" "$T/split.sqr"
  [[ "$output" == *"$T/tab.txt: line 1: expected one user id"* ]]
  no_leftovers "$T/out"
}

@test "refusals: a bad --format, --map with a stream, --users - with the input on stdin (64)" {
  run -64 seqrec-score -m "$T/m.sqm" -k 1 -f xml "$T/split.sqr"
  [[ "$output" == *"--format: expected tsv, long, jsonl or stream, got 'xml'"* ]]
  run -64 seqrec-score -m "$T/m.sqm" -f long "$T/split.sqr"
  run -64 seqrec-score -m "$T/m.sqm" -k 1 -f stream --map "$T/map.tsv" "$T/split.sqr"
  run -64 bash -c "echo 1 | seqrec-score -m '$T/m.sqm' -k 1 --users - < '$T/split.sqr'"
  [[ "$output" == *"can be standard input"* ]]
}

# invariant MODEL: top-K (full candidates, scores to the last bit) and
# ranks are the same bytes for any batch size, thread count and sharding.
invariant() {
  local m="$D/$1.sqm" f
  seqrec-score -m "$m" -k 10 "$D/d.sqr" > "$T/ref.tsv"
  for opt in "-b 1" "-b 7" "-b 256" "-j 1" "-j 2" "-b 5 -j 2"; do
    seqrec-score -m "$m" -k 10 $opt "$D/d.sqr" > "$T/o.tsv"
    cmp "$T/ref.tsv" "$T/o.tsv" || { echo "$1: $opt differs"; return 1; }
  done
  for i in 0 1 2 3; do
    seqrec-score -m "$m" -k 10 --shard $i/4 -b 13 "$D/d.sqr" > "$T/s$i.tsv"
    [ -s "$T/s$i.tsv" ]
  done
  sort "$T/ref.tsv" > "$T/ref.sorted"
  cat "$T"/s?.tsv | sort | cmp "$T/ref.sorted" - || { echo "$1: shards differ"; return 1; }
  # the long format and the ranks stream too
  seqrec-score -m "$m" -k 10 -f long -b 256 "$D/d.sqr" > "$T/l1.tsv"
  seqrec-score -m "$m" -k 10 -f long -b 1 -j 1 "$D/d.sqr" > "$T/l2.tsv"
  cmp "$T/l1.tsv" "$T/l2.tsv"
  seqrec-score -m "$m" -t valid "$D/d.sqr" | seqrec-cat > "$T/r1.txt"
  seqrec-score -m "$m" -t valid -b 3 -j 1 "$D/d.sqr" | seqrec-cat > "$T/r2.txt"
  cmp "$T/r1.txt" "$T/r2.txt"
}

@test "invariance: a SASRec model's top-K and ranks are the same bytes whatever -b, -j and --shard" {
  invariant sasrec
}

@test "invariance: a BERT4Rec model's top-K and ranks are the same bytes whatever -b, -j and --shard" {
  invariant bert4rec
}

@test "invariance: every attention kind of the SASRec backbone scores the same bytes whatever -b and -j" {
  # histories of one batch run one forward (lib/ops/rowwise.h); a history's
  # outputs must not depend on the others, whatever the kind mixes
  for kind in softmax linrec linear efficient efficient-dwc hydra positional fpositional \
              average mixing; do
    seqrec-train --dim 32 --ffn 32 --max-len 30 --epochs 1 --threads 2 --seed 2 --attn "$kind" \
      --log /dev/null -o "$T/$kind.sqm" "$D/d.sqr"
    seqrec-score -m "$T/$kind.sqm" -k 10 -b 256 -j 2 "$D/d.sqr" > "$T/a.tsv"
    seqrec-score -m "$T/$kind.sqm" -k 10 -b 1 -j 1 "$D/d.sqr" > "$T/b.tsv"
    seqrec-score -m "$T/$kind.sqm" -k 10 -b 7 -j 2 "$D/d.sqr" > "$T/c.tsv"
    cmp "$T/a.tsv" "$T/b.tsv" || { echo "$kind: -b 1 -j 1 differs"; false; }
    cmp "$T/a.tsv" "$T/c.tsv" || { echo "$kind: -b 7 differs"; false; }
    [ -s "$T/a.tsv" ]
  done
}

@test "the scores of a trained model still reproduce its logged validation NDCG" {
  seqrec-train --dim 16 --ffn 16 --max-len 20 --epochs 1 --threads 1 --log "$T/log" \
    -o "$T/v.sqm" "$D/d.sqr" 2>/dev/null
  logged=$(sed -n 's/.*"ndcg@10":\([0-9.]*\).*/\1/p' "$T/log" | tail -1)
  scored=$(seqrec-score -m "$T/v.sqm" -t valid -b 5 "$D/d.sqr" | seqrec-metrics -k 10 --json |
    sed -n 's/.*"ndcg@10": \([0-9.]*\).*/\1/p')
  [ -n "$logged" ]
  [ "$logged" = "$scored" ]
}
