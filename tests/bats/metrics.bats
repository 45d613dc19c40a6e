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
  [ "$output" = '{"records": 5, "users": 5, "mrr": 0.364848, "hr@1": 0.200000, "recall@1": 0.200000, "ndcg@1": 0.200000, "mrr@1": 0.200000, "map@1": 0.200000, "precision@1": 0.200000, "hr@5": 0.600000, "recall@5": 0.600000, "ndcg@5": 0.403557, "mrr@5": 0.340000, "map@5": 0.340000, "precision@5": 0.120000}' ]
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
  for o in --cutoffs --per-user --corrected --topk --coverage --popularity --items --compare --bootstrap --seed --json --output --help --version; do
    [[ "$output" == *"$o"* ]] || { echo "missing $o"; return 1; }
  done
  run -0 seqrec-metrics --version
  [[ "$output" == "seqrec-metrics "* ]]
}

# ---- MAP, --per-user, --corrected, --coverage, --popularity, --topk ----

# Random ranks (users with several records, three candidate counts), a
# training stream with a skewed popularity and top-K lists; every value is
# recomputed by tests/reference/metrics_ref.py with numpy and scipy.
make_random_inputs() {
  python3 - "$T" <<'PY'
import random, sys
t = sys.argv[1]
random.seed(7)
with open(t + '/r.txt', 'w') as f:
    for i in range(300):
        u = random.randint(1, 60); n = random.choice([101, 500, 1000])
        r = random.randint(1, min(n, 40)) if random.random() < .7 else random.randint(1, n)
        f.write("%d\t%d\t%d\t%d\n" % (u, r, n, random.randint(1, 80)))
with open(t + '/seq.txt', 'w') as f:
    for u in range(1, 40):
        its = [min(80, int(random.paretovariate(1.2))) for _ in range(random.randint(2, 15))]
        f.write("%d\t%s\n" % (u, " ".join(map(str, its))))
with open(t + '/top.tsv', 'w') as f:
    for u in range(1, 50):
        its = random.sample(range(1, 81), random.randint(3, 12)) if u % 7 else random.sample(range(1, 10), 5)
        f.write("%d\t%s\n" % (u, ",".join("%d:%g" % (i, 1.0 / (j + 1)) for j, i in enumerate(its))))
PY
  seqrec-cat --from-text sequences --n-items 80 "$T/seq.txt" -o "$T/seq.sqr"
}

REF() { "$SCIPY_PY" "$SEQREC_ROOT/tests/reference/metrics_ref.py" "$@"; }

@test "metrics: MAP@K is 1/r within K for one target (hand values)" {
  run -0 seqrec-metrics -k 10 --json "$T/ranks.txt"
  [[ "$output" == *'"map@10": 0.340000'* ]]
}

@test "metrics: every metric, per record and --per-user, agrees with numpy" {
  need_scipy
  make_random_inputs
  seqrec-metrics -k 1,5,10,20 --json "$T/r.txt" > "$T/o.json"
  run -0 REF "$T/o.json" "$T/r.txt" 1,5,10,20
  seqrec-metrics -k 1,5,10,20 --json --per-user "$T/r.txt" > "$T/u.json"
  run -0 REF "$T/u.json" "$T/r.txt" 1,5,10,20 --per-user
  grep -q '"averaged": "user"' "$T/u.json"
  # the reference would see a difference between the two
  run -1 REF "$T/u.json" "$T/r.txt" 1,5,10,20
}

@test "metrics --per-user: two users, hand values" {
  # user 1: ranks 1 and 4 (HR@2 1/2, MRR 5/8); user 2: rank 2 (HR@2 1, MRR 1/2)
  printf '1\t1\t10\n1\t4\t10\n2\t2\t10\n' > "$T/pu.txt"
  run -0 seqrec-metrics -k 2 --json --per-user "$T/pu.txt"
  [[ "$output" == *'"mrr": 0.562500'*'"hr@2": 0.750000'*'"map@2": 0.500000'* ]]
  run -0 seqrec-metrics -k 2 --json "$T/pu.txt"
  [[ "$output" == *'"hr@2": 0.666667'* ]]
}

@test "metrics --coverage and --popularity over the ranks' targets agree with numpy and scipy" {
  need_scipy
  make_random_inputs
  seqrec-metrics -k 5,10 --json --coverage --items 90 "$T/r.txt" > "$T/c.json"
  run -0 REF "$T/c.json" "$T/r.txt" 5,10 --coverage 90
  seqrec-metrics -k 1,5,10,20 --json --per-user --popularity "$T/seq.sqr" "$T/r.txt" > "$T/p.json"
  run -0 REF "$T/p.json" "$T/r.txt" 1,5,10,20 --per-user --pop "$T/seq.txt" 80
}

@test "metrics --topk: coverage, Gini and PopBias of top-K lists agree with numpy and scipy" {
  need_scipy
  make_random_inputs
  seqrec-metrics -k 1,3,10 --json --popularity "$T/seq.sqr" --topk "$T/top.tsv" > "$T/t.json"
  run -0 REF "$T/t.json" - 1,3,10 --pop "$T/seq.txt" 80 --topk "$T/top.tsv" 80
  # a topk stream gives the same, its header the catalogue
  seqrec-cat --from-text topk --n-items 80 "$T/top.tsv" -o "$T/top.sqr"
  seqrec-metrics -k 1,3,10 --json --topk "$T/top.sqr" > "$T/s.json"
  run -0 REF "$T/s.json" - 1,3,10 --topk "$T/top.tsv" 80
  # with ranks too: both parts in one object
  seqrec-metrics -k 1,3,10 --json --popularity "$T/seq.sqr" --topk "$T/top.tsv" "$T/r.txt" > "$T/b.json"
  run -0 REF "$T/b.json" "$T/r.txt" 1,3,10 --pop "$T/seq.txt" 80 --topk "$T/top.tsv" 80
}

@test "metrics --topk: Gini and coverage by hand, and the table's rows" {
  printf '1\t2:0.5,3:0.4,4:0.1\n2\t2:0.9,5:0.1,1:0\n' > "$T/top.tsv"
  # @1: item 2 twice of 6 items: coverage 1/6, Gini (2*6-6-1)*2/(6*2) = 5/6
  run -0 seqrec-metrics -k 1 --items 6 --topk "$T/top.tsv"
  [ "$output" = "$(printf 'metric             @1\nCoverage       0.1667\nGini           0.8333\nlists               2')" ]
}

@test "metrics --corrected: the rank estimate agrees with numpy; full rankings unchanged" {
  need_scipy
  make_random_inputs
  seqrec-metrics -k 1,5,10,20 --json --corrected rank --items 5000 "$T/r.txt" > "$T/k.json"
  run -0 REF "$T/k.json" "$T/r.txt" 1,5,10,20 --corrected 5000
  grep -q '"corrected": "rank"' "$T/k.json"
  # rank 2 of 101 in 1001 items: R = 1 + 1 * 1000/100 = 11, so HR@10 0 and MRR 1/11
  printf '1\t2\t101\n' > "$T/one.txt"
  run -0 seqrec-metrics -k 10,11 --json --corrected rank --items 1001 "$T/one.txt"
  [[ "$output" == *'"mrr": 0.090909'*'"hr@10": 0.000000'*'"hr@11": 1.000000'* ]]
  # n_cand = N: a full ranking, as it is
  run -0 seqrec-metrics --json --corrected rank --items 100 "$T/ranks.txt"
  [ "$output" = "$(sed 's/^{/{/; s/, "hr@10"/, "corrected": "rank", "hr@10"/' "$FIX/metrics/ranks.json")" ]
}

@test "metrics --corrected bv[:GAMMA]: Krichene and Rendle's bias-variance estimator agrees with scipy" {
  need_scipy
  python3 - "$T" <<'PY'
import random, sys
random.seed(11)
with open(sys.argv[1] + '/s.txt', 'w') as f:
    for i in range(300):
        u = random.randint(1, 100); n = random.choice([101, 101, 51, 300])
        r = random.randint(1, min(n, 30)) if random.random() < .6 else random.randint(1, n)
        f.write('%d\t%d\t%d\t%d\n' % (u, r, n, random.randint(1, 80)))
PY
  for g in 1 0.1 0.01; do
    seqrec-metrics -k 1,5,10 --json --corrected bv:$g --items 300 "$T/s.txt" > "$T/bv.json"
    run -0 REF "$T/bv.json" "$T/s.txt" 1,5,10 --bv 300 $g
    grep -q "\"corrected\": \"bv:$g\"" "$T/bv.json"
  done
  seqrec-metrics -k 1,5,10 --json --per-user --corrected bv --items 300 "$T/s.txt" > "$T/bvu.json"
  run -0 REF "$T/bvu.json" "$T/s.txt" 1,5,10 --per-user --bv 300 0.1
  run -0 seqrec-metrics -k 10 --corrected bv:0.5 --items 300 "$T/s.txt"
  [ "${lines[-1]}" = "corrected for sampled candidates (bias-variance, gamma 0.5)" ]
  # a comparison over corrected values
  run -0 seqrec-metrics -k 10 --corrected bv --items 300 --compare "$T/s.txt" "$T/s.txt"
  [[ "${lines[-1]}" == *"corrected (bias-variance)" ]]
  for bad in bv:0 bv:2 bv: mle; do
    run -64 seqrec-metrics --corrected "$bad" --items 300 "$T/s.txt"
    [[ "$output" == *"--corrected"* ]]
  done
}

@test "metrics: a ranks stream's header gives the catalogue (--corrected, --coverage, --compare without --items)" {
  make_random_inputs
  seqrec-cat --from-text ranks --n-items 5000 -o "$T/r.sqr" "$T/r.txt"
  for o in "--corrected rank" "--corrected bv" "--coverage"; do
    run -0 seqrec-metrics --json $o "$T/r.sqr"
    want=$(seqrec-metrics --json $o --items 5000 "$T/r.txt")
    [ "$output" = "$want" ] || { echo "$o: '$output' != '$want'"; false; }
  done
  run -0 seqrec-metrics --json --compare "$T/r.sqr" "$T/r.sqr" --corrected rank
  [ "$output" = "$(seqrec-metrics --json --compare "$T/r.txt" "$T/r.txt" --corrected rank --items 5000)" ]
  # --items still wins over the header
  run -0 seqrec-metrics --json --corrected rank --items 1000 "$T/r.sqr"
  [ "$output" = "$(seqrec-metrics --json --corrected rank --items 1000 "$T/r.txt")" ]
}

@test "metrics: refusals of the new options" {
  make_random_inputs
  # the catalogue unknown: text input without --items or --popularity
  run -64 seqrec-metrics --corrected rank "$T/r.txt"
  [[ "$output" == *"--corrected needs the catalogue's size"* ]]
  run -64 seqrec-metrics --coverage "$T/r.txt"
  [[ "$output" == *"catalogue's size is unknown"* ]]
  run -64 seqrec-metrics --topk "$T/top.tsv"
  [[ "$output" == *"--items N or --popularity FILE"* ]]
  # ranks without items cannot say which items were shown
  cut -f1-3 "$T/r.txt" > "$T/three.txt"
  run -65 seqrec-metrics --coverage --items 80 "$T/three.txt"
  [ "$output" = "seqrec-metrics: $T/three.txt: record 1 has no item: --coverage and --popularity need the fourth field" ]
  # an item beyond the catalogue
  run -65 seqrec-metrics --coverage --items 10 "$T/r.txt"
  [[ "$output" == *"r.txt: record "*": item "*" outside 1..10" ]]
  run -65 seqrec-metrics --topk "$T/top.tsv" --items 10
  [[ "$output" == *"top.tsv: line "*": item "*" outside 1..10" ]]
  # a malformed top-K line, with its line
  printf '1\t2:0.5,3:0.4\nu7\t1:1\n' > "$T/badtop.tsv"
  run -65 seqrec-metrics --topk "$T/badtop.tsv" --items 10
  [[ "$output" == "seqrec-metrics: $T/badtop.tsv: line 2: expected a dense user id"* ]]
  printf '1\t2:0.5,3\n' > "$T/badtop.tsv"
  run -65 seqrec-metrics --topk "$T/badtop.tsv" --items 10
  [[ "$output" == *"line 1: expected item:score"* ]]
  # a --topk stream of another kind, a --popularity stream of another kind
  run -65 seqrec-metrics --topk "$T/seq.sqr"
  [[ "$output" == *"seq.sqr: byte 6: expected"*"topk"* ]]
  seqrec-cat --from-text ranks "$T/r.txt" -o "$T/r.sqr"
  run -65 seqrec-metrics --popularity "$T/r.sqr" "$T/r.txt"
  [[ "$output" == *"r.sqr: byte 6"* ]]
  run -66 seqrec-metrics --popularity "$T/missing.sqr" "$T/r.txt"
  run -66 seqrec-metrics --topk "$T/missing.tsv" --items 9
  # usage
  run -64 seqrec-metrics --popularity "$T/seq.sqr" --items 81 "$T/r.txt"
  [[ "$output" == *"--items 81 but"*"has 80 items"* ]]
  run -64 seqrec-metrics --items 0 "$T/r.txt"
  run -64 seqrec-metrics --items x "$T/r.txt"
  run -64 seqrec-metrics --topk "$T/top.tsv" --coverage --items 80 "$T/r.txt"
  run -64 seqrec-metrics --topk "$T/top.tsv" --corrected rank --items 80
  run -64 seqrec-metrics --topk - -
  run -64 seqrec-metrics --topk
  # nothing is left behind on a refusal
  run -65 seqrec-metrics --coverage --items 10 -o "$T/out.json" "$T/r.txt"
  [ ! -e "$T/out.json" ]
}

# ---- --compare A B ----

make_pair() {
  python3 - "$T" <<'PY'
import random, sys
t = sys.argv[1]
random.seed(3)
a = open(t + '/A.txt', 'w'); b = open(t + '/B.txt', 'w')
for i in range(400):
    u = random.randint(1, 120); it = random.randint(1, 80)
    ra = random.randint(1, 60)
    rb = max(1, ra + random.randint(-15, 10)) if random.random() < .8 else ra
    a.write('%d\t%d\t1000\t%d\n' % (u, ra, it)); b.write('%d\t%d\t1000\t%d\n' % (u, rb, it))
PY
}

@test "metrics --compare: differences, t-test and Wilcoxon p-values agree with scipy" {
  need_scipy
  make_pair
  seqrec-metrics -k 1,5,10 --json --compare "$T/A.txt" "$T/B.txt" > "$T/c.json"
  run -0 REF compare "$T/c.json" "$T/A.txt" "$T/B.txt" 1,5,10
  seqrec-metrics -k 1,5,10 --json --per-user --compare "$T/A.txt" "$T/B.txt" > "$T/u.json"
  run -0 REF compare "$T/u.json" "$T/A.txt" "$T/B.txt" 1,5,10 --per-user
  grep -q '"units": 1[0-9][0-9], ' "$T/u.json"
  # the reference sees the other averaging's values as wrong
  run -1 REF compare "$T/u.json" "$T/A.txt" "$T/B.txt" 1,5,10
}

@test "metrics --compare: the means are the plain runs', the table, a file compared with itself" {
  make_pair
  run -0 seqrec-metrics -k 10 --json "$T/A.txt"
  hr=$(printf '%s' "$output" | sed 's/.*"hr@10": \([0-9.]*\).*/\1/')
  run -0 seqrec-metrics -k 10 --json --compare "$T/A.txt" "$T/B.txt"
  [[ "$output" == *"\"hr@10:a\": $hr,"* ]]
  run -0 seqrec-metrics -k 10 --compare "$T/A.txt" "$T/B.txt"
  [[ "${lines[0]}" == "metric"*"B-A"*"t p"*"Wilcoxon"*"95% bootstrap CI" ]]
  [[ "${lines[1]}" == "HR@10 "* ]]
  [[ "${lines[-1]}" == "records 400, 1000 bootstrap resamples (seed 1)" ]]
  # A against A: no difference, p = 1, the interval [0, 0]
  run -0 seqrec-metrics -k 10 --compare "$T/A.txt" "$T/A.txt"
  [[ "${lines[1]}" == *"+0.0000         1         1  [+0.0000, +0.0000]" ]]
}

@test "metrics --compare: the bootstrap is seeded (same seed same bytes, another seed another interval)" {
  make_pair
  seqrec-metrics -k 5 --json --compare "$T/A.txt" "$T/B.txt" > "$T/s1.json"
  seqrec-metrics -k 5 --json --seed 1 --bootstrap 1000 --compare "$T/A.txt" "$T/B.txt" > "$T/s1b.json"
  cmp "$T/s1.json" "$T/s1b.json"
  seqrec-metrics -k 5 --json --seed 2 --compare "$T/A.txt" "$T/B.txt" > "$T/s2.json"
  ! cmp -s "$T/s1.json" "$T/s2.json" || false
  # the interval holds the mean difference and narrows nothing else: t and Wilcoxon unchanged
  python3 - "$T/s1.json" "$T/s2.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for k in a:
    if k.endswith(':diff'):
        m = k[:-5]
        assert a[m + ':ci_lo'] <= a[k] <= a[m + ':ci_hi'], m
        assert a[m + ':t_p'] == b[m + ':t_p'] and a[m + ':wilcoxon_p'] == b[m + ':wilcoxon_p'], m
PY
  # a stream and its text give the same comparison
  seqrec-cat --from-text ranks "$T/A.txt" -o "$T/A.sqr"
  seqrec-metrics -k 5 --json --compare "$T/A.sqr" "$T/B.txt" | cmp - "$T/s1.json"
}

@test "metrics --compare: records that differ are refused, naming the first; usage refusals" {
  make_pair
  head -n 399 "$T/B.txt" > "$T/short.txt"
  run -65 seqrec-metrics --compare "$T/A.txt" "$T/short.txt"
  [ "$output" = "seqrec-metrics: --compare: $T/A.txt has 400 records, $T/short.txt 399: not the same records" ]
  awk -F'\t' -v OFS='\t' 'NR == 7 { $1 = $1 + 1000 } 1' "$T/B.txt" > "$T/other.txt"
  run -65 seqrec-metrics --compare "$T/A.txt" "$T/other.txt"
  [[ "$output" == "seqrec-metrics: --compare: record 7 differs: user "*" in $T/A.txt, user "*" in $T/other.txt" ]]
  awk -F'\t' -v OFS='\t' 'NR == 3 { $4 = $4 + 1 } 1' "$T/B.txt" > "$T/item.txt"
  run -65 seqrec-metrics --compare "$T/A.txt" "$T/item.txt"
  [[ "$output" == *"record 3 differs"* ]]
  run -65 seqrec-metrics --compare "$T/A.txt" "$T/ranks.txt"
  run -66 seqrec-metrics --compare "$T/none.txt" "$T/B.txt"
  run -64 seqrec-metrics --compare "$T/A.txt"
  [[ "$output" == *"needs the second rank file B"* ]]
  run -64 seqrec-metrics --compare "$T/A.txt" --topk "$T/A.txt" "$T/B.txt"
  run -64 seqrec-metrics --compare "$T/A.txt" --coverage "$T/B.txt"
  run -64 seqrec-metrics --compare - -
  run -64 seqrec-metrics --bootstrap 100 "$T/A.txt"
  run -64 seqrec-metrics --seed 3 "$T/A.txt"
  run -64 seqrec-metrics --compare "$T/A.txt" --bootstrap 0 "$T/B.txt"
  run -64 seqrec-metrics --compare "$T/A.txt" --seed x "$T/B.txt"
  run -64 seqrec-metrics --compare "$T/A.txt" --corrected rank "$T/B.txt"
  run -65 seqrec-metrics --compare "$T/A.txt" -o "$T/out.txt" "$T/short.txt"
  [ ! -e "$T/out.txt" ]
  # --corrected with the catalogue: every value at the rank estimate
  run -0 seqrec-metrics -k 10 --json --corrected rank --items 5000 --compare "$T/A.txt" "$T/B.txt"
  [[ "$output" == *'"corrected": "rank"'* ]]
}
