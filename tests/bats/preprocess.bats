#!/usr/bin/env bats
# seqrec-preprocess: every input format, archives and compression, stdin,
# filters, ordering, remapping, --stats, --map, meta, and every error path
# (exit code, message naming file and line, no output left behind).

load helper

setup() {
  common_setup
  P="$FIX/preprocess"
  mkdir -p "$T/out"
}

# The 9 ratings of ratings.dat as seqrec-cat prints them: users 1..4, items
# 10,20,30,40 -> 1..4, chronological, the tie at t=100 in file order.
ML_TEXT=$'1\t2 1 3\t90 100 100\n2\t1 2 1\t50 60 70\n3\t3 4\t10 20\n4\t1\t30'

@test "movielens ratings.dat (::) gives chronological, remapped sequences" {
  run -0 seqrec-preprocess -o "$T/out/ml.sqr" "$P/ratings.dat"
  run -0 seqrec-cat "$T/out/ml.sqr"
  [ "$output" = "$ML_TEXT" ]
  run -0 seqrec-cat --header "$T/out/ml.sqr"
  [[ "$output" == *$'n_items\t4'* ]]
  [[ "$output" == *$'timestamps\tyes'* ]]
}

@test "movielens u.data (tab) and ratings.csv (comma, header) read the same" {
  run -0 bash -c "seqrec-preprocess '$P/u.data' | seqrec-cat"
  [ "$output" = "$ML_TEXT" ]
  run -0 bash -c "seqrec-preprocess '$P/ratings.csv' | seqrec-cat"
  [ "$output" = "$ML_TEXT" ]
  run -0 bash -c "seqrec-preprocess --format movielens '$P/ratings.csv' | seqrec-cat"
  [ "$output" = "$ML_TEXT" ]
}

@test "zip archive: the ratings member is found in place, --member picks another" {
  python3 - "$T/ml-test.zip" "$P/ratings.dat" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('ml-test/README', 'tiny\n')
    z.writestr('ml-test/movies.dat', '10::A::x\n')
    z.write(sys.argv[2], 'ml-test/ratings.dat')
    z.writestr('ml-test/other.txt', '7 8\n7 9\n')
PY
  run -0 bash -c "seqrec-preprocess '$T/ml-test.zip' | seqrec-cat"
  [ "$output" = "$ML_TEXT" ]
  run -0 bash -c "seqrec-preprocess '$T/ml-test.zip' | seqrec-cat --header"
  [[ "$output" == *$'meta\tpreprocess.member=ml-test/ratings.dat'* ]]
  [[ "$output" == *$'meta\tdataset=ml-test'* ]]
  run -0 bash -c "seqrec-preprocess --member other.txt '$T/ml-test.zip' | seqrec-cat"
  [ "$output" = $'1\t1 2' ]
  run -66 seqrec-preprocess --member nope.dat -o "$T/out/x.sqr" "$T/ml-test.zip"
  [[ "$output" == *"ml-test.zip: no member nope.dat"* ]]
  no_leftovers "$T/out"
}

@test "tar.gz, tar.xz and a zip read from stdin" {
  mkdir -p "$T/src/ml-100k"
  cp "$P/u.data" "$T/src/ml-100k/u.data"
  printf 'x\n' > "$T/src/ml-100k/u.item"
  tar -C "$T/src" -czf "$T/ml.tar.gz" ml-100k
  tar -C "$T/src" -cJf "$T/ml.tar.xz" ml-100k
  (cd "$T/src" && zip -q -r "$T/ml.zip" ml-100k)
  run -0 bash -c "seqrec-preprocess '$T/ml.tar.gz' | seqrec-cat"
  [ "$output" = "$ML_TEXT" ]
  run -0 bash -c "seqrec-preprocess '$T/ml.tar.xz' | seqrec-cat"
  [ "$output" = "$ML_TEXT" ]
  run -0 bash -c "seqrec-preprocess < '$T/ml.zip' | seqrec-cat"
  [ "$output" = "$ML_TEXT" ]
}

@test "an archive with one unknown file takes it; with several it asks for --member" {
  mkdir -p "$T/one" "$T/two"
  cp "$P/s3rec.txt" "$T/one/beauty.txt"
  tar -C "$T/one" -cf "$T/one.tar" beauty.txt
  run -0 bash -c "seqrec-preprocess '$T/one.tar' | seqrec-cat"
  [ "$output" = $'1\t1 2 3 4\n2\t3 5 2\n3\t4 1' ]
  cp "$P/s3rec.txt" "$T/two/a.txt"
  cp "$P/s3rec.txt" "$T/two/b.txt"
  tar -C "$T/two" -cf "$T/two.tar" a.txt b.txt
  run -64 seqrec-preprocess -o "$T/out/x.sqr" "$T/two.tar"
  [[ "$output" == *"name one with --member"* ]]
  no_leftovers "$T/out"
  run -0 bash -c "seqrec-preprocess --member b.txt '$T/two.tar' | seqrec-cat"
  [ "$output" = $'1\t1 2 3 4\n2\t3 5 2\n3\t4 1' ]
}

@test "gz, bz2, xz and zstd compressed text, from a file and from stdin" {
  S3=$'1\t1 2 3 4\n2\t3 5 2\n3\t4 1'
  gzip -c "$P/s3rec.txt" > "$T/s3.txt.gz"
  bzip2 -c "$P/s3rec.txt" > "$T/s3.txt.bz2"
  xz -c "$P/s3rec.txt" > "$T/s3.txt.xz"
  for f in s3.txt.gz s3.txt.bz2 s3.txt.xz; do
    run -0 bash -c "seqrec-preprocess --format s3rec '$T/$f' | seqrec-cat"
    [ "$output" = "$S3" ]
  done
  run -0 bash -c "seqrec-preprocess --format s3rec < '$T/s3.txt.gz' | seqrec-cat"
  [ "$output" = "$S3" ]
  run -0 bash -c "cat '$T/s3.txt.bz2' | seqrec-preprocess --format s3rec - | seqrec-cat"
  [ "$output" = "$S3" ]
  if command -v zstd >/dev/null; then
    zstd -q -c "$P/s3rec.txt" > "$T/s3.txt.zst"
    run -0 bash -c "seqrec-preprocess '$T/s3.txt.zst' | seqrec-cat"
    [ "$output" = "$S3" ]
  fi
}

@test "stdin: plain text, dataset name stdin" {
  run -0 bash -c "seqrec-preprocess < '$P/ratings.dat' | seqrec-cat"
  [ "$output" = "$ML_TEXT" ]
  run -0 bash -c "seqrec-preprocess < '$P/ratings.dat' | seqrec-cat --header"
  [[ "$output" == *$'meta\tdataset=stdin'* ]]
  [[ "$output" == *$'meta\tpreprocess.source=<stdin>'* ]]
}

@test "recbole .inter: columns by name, string ids, float timestamps rounded" {
  run -0 bash -c "seqrec-preprocess '$P/tiny.inter' | seqrec-cat"
  # alice, bob by first appearance; B0001, B0002 likewise
  [ "$output" = $'1\t1 2\t1000 1001\n2\t1 2\t998 1000' ]
  run -0 bash -c "seqrec-preprocess --format recbole --min-rating 4 '$P/tiny.inter' | seqrec-cat"
  [ "$output" = $'1\t1 2\t1000 1001' ]
}

@test "sasrec: user item lines in file order, no timestamps" {
  run -0 bash -c "seqrec-preprocess --format sasrec '$P/sasrec.txt' | seqrec-cat"
  [ "$output" = $'1\t3 2 4\n2\t3 1' ]
  run -0 bash -c "seqrec-preprocess '$P/sasrec.txt' | seqrec-cat --header"
  [[ "$output" == *$'timestamps\tno'* ]]
  [[ "$output" == *$'meta\tpreprocess.format=sasrec'* ]]
  [[ "$output" == *$'meta\tpreprocess.order=file'* ]]
}

@test "s3rec: one user per line keeps ids that are already dense" {
  run -0 bash -c "seqrec-preprocess '$P/s3rec.txt' | seqrec-cat"
  [ "$output" = $'1\t1 2 3 4\n2\t3 5 2\n3\t4 1' ]
  run -0 bash -c "seqrec-preprocess --format s3rec '$P/s3rec.txt' | seqrec-cat --header"
  [[ "$output" == *$'meta\tpreprocess.format=s3rec'* ]]
  [[ "$output" == *$'n_items\t5'* ]]
}

@test "csv with a header: columns by name, --sep" {
  run -0 bash -c "seqrec-preprocess --format csv --sep ';' --header --user-col who --item-col what \
      --time-col ts --rating-col stars '$P/log.csv' | seqrec-cat"
  [ "$output" = $'1\t1\t5\n2\t2 1\t3 4' ]
  run -0 bash -c "seqrec-preprocess --format csv --sep ';' --header --user-col 2 --item-col 3 \
      --time-col 1 --rating-col stars --min-rating 4 '$P/log.csv' | seqrec-cat"
  # the line rated 1 is dropped before its ids are seen: i2 appears first
  [ "$output" = $'1\t1 2\t3 4' ]
  run -0 bash -c "seqrec-preprocess --format csv --sep ';' --header --user-col who --item-col what \
      '$P/log.csv' | seqrec-cat --header"
  [[ "$output" == *$'meta\tpreprocess.user_col=who'* ]]
  [[ "$output" == *$'meta\tpreprocess.time_col=none'* ]]
  [[ "$output" == *$'timestamps\tno'* ]]
}

@test "tsv without a header: columns by number" {
  printf 'i1\tu1\nx\tu2\ni2\tu1\n' > "$T/log.tsv"
  run -0 bash -c "seqrec-preprocess --format tsv --user-col 2 --item-col 1 '$T/log.tsv' | seqrec-cat"
  [ "$output" = $'1\t1 3\n2\t2' ]
  run -64 seqrec-preprocess --format tsv --user-col user -o "$T/out/x.sqr" "$T/log.tsv"
  [[ "$output" == *"needs --header"* ]]
  run -65 seqrec-preprocess --format csv --header --user-col nobody -o "$T/out/x.sqr" "$P/ratings.csv"
  [[ "$output" == *"ratings.csv: line 1: no column named nobody"* ]]
  run -64 seqrec-preprocess --user-col 2 -o "$T/out/x.sqr" "$T/log.tsv"
  no_leftovers "$T/out"
}

@test "--stats: users, items, interactions, sparsity, average length" {
  run -0 seqrec-preprocess --stats -o "$T/out/ml.sqr" "$P/ratings.dat"
  [[ "$output" == *$'dataset\tratings'* ]]
  [[ "$output" == *$'users\t4\n'* ]]
  [[ "$output" == *$'items\t4\n'* ]]
  [[ "$output" == *$'interactions\t9\n'* ]]
  [[ "$output" == *$'avg_length\t2.25\n'* ]]
  [[ "$output" == *$'sparsity\t0.437500\n'* ]]
  [[ "$output" == *$'min_length\t1\n'* ]]
  [[ "$output" == *$'max_length\t3\n'* ]]
  # without -o the stream owns stdout and the statistics go to stderr
  run -0 bash -c "seqrec-preprocess --stats --dataset tiny '$P/ratings.dat' 2>'$T/stats' | seqrec-cat --verify"
  grep -qx $'dataset\ttiny' "$T/stats"
  grep -qx $'interactions\t9' "$T/stats"
}

@test "--user-core/--item-core iterate until stable" {
  # pass 1 drops 4-10 and 3-40; then user 3 and item 30 fall below 2 too
  run -0 bash -c "seqrec-preprocess --user-core 2 --item-core 2 '$P/ratings.dat' | seqrec-cat"
  [ "$output" = $'1\t2 1\t90 100\n2\t1 2 1\t50 60 70' ]
  run -0 bash -c "seqrec-preprocess --core 2 '$P/ratings.dat' | seqrec-cat"
  [ "$output" = $'1\t2 1\t90 100\n2\t1 2 1\t50 60 70' ]
  run -0 bash -c "seqrec-preprocess --user-core 3 '$P/ratings.dat' | seqrec-cat"
  [ "$output" = $'1\t2 1 3\t90 100 100\n2\t1 2 1\t50 60 70' ]
}

@test "--min-rating and --dedup first|last|keep" {
  run -0 bash -c "seqrec-preprocess --min-rating 4 '$P/ratings.dat' | seqrec-cat"
  [ "$output" = $'1\t1 2\t100 100\n2\t1 1\t50 70\n3\t3\t20' ]
  run -0 bash -c "seqrec-preprocess --dedup first '$P/ratings.dat' | seqrec-cat | sed -n 2p"
  [ "$output" = $'2\t1 2\t50 60' ]
  run -0 bash -c "seqrec-preprocess --dedup last '$P/ratings.dat' | seqrec-cat | sed -n 2p"
  [ "$output" = $'2\t2 1\t60 70' ]
  run -0 bash -c "seqrec-preprocess --dedup keep '$P/ratings.dat' | seqrec-cat"
  [ "$output" = "$ML_TEXT" ]
  run -64 seqrec-preprocess --dedup some "$P/ratings.dat"
  run -64 seqrec-preprocess --format sasrec --min-rating 3 -o "$T/out/x.sqr" "$P/sasrec.txt"
  [[ "$output" == *"no rating column"* ]]
  no_leftovers "$T/out"
}

@test "--map writes kind, dense id and original id" {
  run -0 seqrec-preprocess --map "$T/out/map.tsv" -o "$T/out/ml.sqr" "$P/tiny.inter"
  [ "$(cat "$T/out/map.tsv")" = $'user\t1\talice\nuser\t2\tbob\nitem\t1\tB0001\nitem\t2\tB0002' ]
  run -0 seqrec-preprocess --core 2 --map "$T/out/map2.tsv" -o "$T/out/ml2.sqr" "$P/ratings.dat"
  [ "$(cat "$T/out/map2.tsv")" = $'user\t1\t1\nuser\t2\t2\nitem\t1\t10\nitem\t2\t20' ]
  no_leftovers "$T/out" ml.sqr map.tsv ml2.sqr map2.tsv
}

@test "meta records dataset, sources, every option and the version" {
  run -0 seqrec-preprocess --dataset ML --core 2 --min-rating 2 --dedup first \
    -o "$T/out/ml.sqr" "$P/ratings.dat" "$P/u.data"
  run -0 seqrec-cat --header "$T/out/ml.sqr"
  [[ "$output" == *$'meta\tdataset=ML'* ]]
  [[ "$output" == *$'meta\tseqrec.version='[0-9]* ]]
  [[ "$output" == *$'meta\tpreprocess.source=ratings.dat\n'* ]]
  [[ "$output" == *$'meta\tpreprocess.source=u.data\n'* ]]
  [[ "$output" == *$'meta\tpreprocess.format=movielens'* ]]
  [[ "$output" == *$'meta\tpreprocess.min_rating=2'* ]]
  [[ "$output" == *$'meta\tpreprocess.dedup=first'* ]]
  [[ "$output" == *$'meta\tpreprocess.user_core=2'* ]]
  [[ "$output" == *$'meta\tpreprocess.item_core=2'* ]]
  [[ "$output" == *$'meta\tpreprocess.order=timestamp,file'* ]]
  [[ "$output" == *$'meta\tpreprocess.user_ids=numeric'* ]]
}

@test "several files are concatenated in argument order" {
  run -0 bash -c "seqrec-preprocess '$P/sasrec.txt' '$P/sasrec.txt' | seqrec-cat"
  [ "$output" = $'1\t3 2 4 3 2 4\n2\t3 1 3 1' ]
  # inputs must agree on timestamps
  run -65 seqrec-preprocess -o "$T/out/x.sqr" "$P/ratings.dat" "$P/sasrec.txt"
  [[ "$output" == *"sasrec.txt: has no timestamps"* ]]
  no_leftovers "$T/out"
}

@test "a malformed line names the file and line, exit 65, no output left" {
  printf '1::10::5::100\n1::20::3::90\n2::10\n' > "$T/bad.dat"
  run -65 seqrec-preprocess -o "$T/out/x.sqr" --map "$T/out/m.tsv" "$T/bad.dat"
  [ "$output" = "seqrec-preprocess: $T/bad.dat: line 3: expected at least 4 fields, found 2" ]
  no_leftovers "$T/out"
  printf '1::10::5::100\n\n1::20::x::90\n' > "$T/bad2.dat"
  run -65 seqrec-preprocess -o "$T/out/x.sqr" "$T/bad2.dat"
  [[ "$output" == *"bad2.dat: line 3: rating 'x' is not a number"* ]]
  printf '1\t10\t5\t100\n1\t20\t3\tyesterday\n' > "$T/bad3.tsv"
  run -65 seqrec-preprocess -o "$T/out/x.sqr" "$T/bad3.tsv"
  [[ "$output" == *"bad3.tsv: line 2: timestamp 'yesterday' is not a number"* ]]
  printf '1 2\n3 4 5\n' > "$T/bad4.txt"
  run -65 seqrec-preprocess --format sasrec -o "$T/out/x.sqr" "$T/bad4.txt"
  [[ "$output" == *"bad4.txt: line 2: expected 2 fields (user item), found 3"* ]]
  printf '1\t2\t3\n' > "$T/bad5.txt"
  run -65 seqrec-preprocess -o "$T/out/x.sqr" "$T/bad5.txt"
  [[ "$output" == *"bad5.txt: line 1: cannot tell the format"* ]]
  no_leftovers "$T/out"
}

@test "a bad line inside an archive names the member" {
  printf '1::10::5::100\n1::20::3\n' > "$T/ratings.dat"
  (cd "$T" && zip -q bad.zip ratings.dat)
  run -65 seqrec-preprocess -o "$T/out/x.sqr" "$T/bad.zip"
  [[ "$output" == *"bad.zip(ratings.dat): line 2: expected at least 4 fields, found 3"* ]]
  no_leftovers "$T/out"
}

@test "empty input, or nothing left after filtering: exit 65, no output" {
  : > "$T/empty.txt"
  run -65 seqrec-preprocess -o "$T/out/x.sqr" "$T/empty.txt"
  [[ "$output" == *"no interactions in the input"* ]]
  printf '\n  \n' > "$T/blank.txt"
  run -65 seqrec-preprocess -o "$T/out/x.sqr" "$T/blank.txt"
  run -65 seqrec-preprocess -o "$T/out/x.sqr" < /dev/null
  gzip -c "$T/empty.txt" > "$T/empty.gz"
  run -65 seqrec-preprocess -o "$T/out/x.sqr" "$T/empty.gz"
  run -65 seqrec-preprocess --min-rating 6 -o "$T/out/x.sqr" "$P/ratings.dat"
  [[ "$output" == *"rated below --min-rating 6"* ]]
  run -65 seqrec-preprocess --core 4 -o "$T/out/x.sqr" "$P/ratings.dat"
  [[ "$output" == *"no interactions left after --user-core 4 --item-core 4"* ]]
  no_leftovers "$T/out"
}

@test "a missing input exits 66 and leaves nothing" {
  run -66 seqrec-preprocess -o "$T/out/x.sqr" "$T/nope.dat"
  [[ "$output" == *"$T/nope.dat"* ]]
  run -66 seqrec-preprocess -o "$T/out/x.sqr" "$T"
  [[ "$output" == *"is a directory"* ]]
  no_leftovers "$T/out"
}

@test "an unwritable output exits 73 and leaves nothing" {
  run -73 seqrec-preprocess -o "$T/out/no/such/dir/x.sqr" "$P/ratings.dat"
  run -73 seqrec-preprocess --map "$T/out/no/map.tsv" -o "$T/out/x.sqr" "$P/ratings.dat"
  no_leftovers "$T/out"
}

@test "a corrupt archive is bad data" {
  head -c 200 "$P/u.data" | gzip -c | head -c 40 > "$T/trunc.gz"
  run -65 seqrec-preprocess -o "$T/out/x.sqr" "$T/trunc.gz"
  no_leftovers "$T/out"
}

@test "a zip member or a gzip with a bad CRC-32 is bad data, not changed data (issue 40)" {
  printf '1 10\n1 11\n2 10\n2 12\n' > "$T/u.txt"
  python3 - "$T" <<'PY'
import sys, zipfile, gzip
t = sys.argv[1]
data = open(t + '/u.txt', 'rb').read()
with zipfile.ZipFile(t + '/crc.zip', 'w', zipfile.ZIP_STORED) as z:
    z.writestr('u.txt', data)
b = bytearray(open(t + '/crc.zip', 'rb').read())
b[b.index(b'1 10')] = ord('3')   # stored data changed, CRC kept
open(t + '/crc.zip', 'wb').write(bytes(b))
g = bytearray(gzip.compress(data))
g[-8] ^= 1                        # the CRC-32 of the trailer
open(t + '/crc.gz', 'wb').write(bytes(g))
g = bytearray(gzip.compress(data))
g[-4] ^= 1                        # the length of the trailer
open(t + '/len.gz', 'wb').write(bytes(g))
PY
  run -65 seqrec-preprocess --format sasrec -o "$T/out/x.sqr" "$T/crc.zip"
  [[ "$output" == *"$T/crc.zip(u.txt): "*"CRC"* ]]
  run -65 seqrec-preprocess --format sasrec -o "$T/out/x.sqr" "$T/crc.gz"
  [[ "$output" == *"$T/crc.gz: bad gzip data: incorrect data check"* ]]
  run -65 seqrec-preprocess --format sasrec -o "$T/out/x.sqr" "$T/len.gz"
  [[ "$output" == *"$T/len.gz: bad gzip data: incorrect length check"* ]]
  no_leftovers "$T/out"
  gzip -c "$T/u.txt" > "$T/good.gz"
  cat "$T/good.gz" "$T/good.gz" > "$T/two.gz"   # two members read as one text
  run -0 seqrec-preprocess --format sasrec -o "$T/out/x.sqr" "$T/two.gz"
}

@test "a NUL byte inside an id is 65 with the file and line, not a cut id (issue 40)" {
  printf 'u1\ta\nu1\tb\nu2\ta\0x\nu2\ta\0y\n' > "$T/nul.tsv"
  run -65 seqrec-preprocess --format tsv -o "$T/out/x.sqr" "$T/nul.tsv"
  [[ "$output" == *"$T/nul.tsv: line 3: a NUL byte (byte 5 of the line)"* ]]
  printf 'u1 a b\nu2 a\0x a\0y\n' > "$T/nul.txt"
  run -65 seqrec-preprocess --format s3rec -o "$T/out/x.sqr" "$T/nul.txt"
  [[ "$output" == *"$T/nul.txt: line 2: a NUL byte (byte 5 of the line)"* ]]
  no_leftovers "$T/out"
}

@test "auto format: a first id over 64 bits is data, not a header (issue 40)" {
  printf '123456789012345678901234,5,4,100\n123456789012345678901234,6,4,200\n2,5,3,50\n' > "$T/big.csv"
  run -0 seqrec-preprocess --map "$T/map.tsv" -o "$T/out/x.sqr" "$T/big.csv"
  run -0 seqrec-cat "$T/out/x.sqr"
  [ "$output" = $'1\t1\t50\n2\t1 2\t100 200' ]
  grep -qx $'user\t2\t123456789012345678901234' "$T/map.tsv"
}

@test "a small gzip of 13M lines under ulimit -v: 71 naming the file and line, no output (issue 40)" {
  ldd "$SEQREC_BIN/seqrec-preprocess" | grep -q libasan && skip "ASan reserves more address space than the limit"
  python3 -c "import gzip,sys; open(sys.argv[1],'wb').write(gzip.compress(b'1 1\n' * 13000000, 9))" "$T/bomb.gz"
  run -71 bash -c "ulimit -v 120000; seqrec-preprocess --format sasrec -o '$T/out/x.sqr' '$T/bomb.gz'"
  [[ "$output" == *"seqrec-preprocess: $T/bomb.gz: line "*": out of memory ("*") after "*" interactions"* ]]
  no_leftovers "$T/out"
  grep -q 'SS Bounds' "$SEQREC_ROOT/man/man1/seqrec-preprocess.1"
}

@test "usage errors exit 64" {
  run -64 seqrec-preprocess --format parquet "$P/ratings.dat"
  [[ "$output" == *"unknown format 'parquet'"* ]]
  run -64 seqrec-preprocess --core -1 "$P/ratings.dat"
  run -64 seqrec-preprocess --min-rating high "$P/ratings.dat"
  run -64 seqrec-preprocess --no-such-option
  run -64 seqrec-preprocess --member x.dat -o "$T/out/x.sqr" "$P/ratings.dat"
  [[ "$output" == *"not an archive"* ]]
  no_leftovers "$T/out"
}

@test "--help lists every option the man page documents; --version" {
  run -0 seqrec-preprocess --help
  for opt in --format --member --sep --header --user-col --item-col --time-col --rating-col \
             --min-rating --dedup --user-core --item-core --core --output --dataset --map --stats \
             --help --version; do
    [[ "$output" == *"$opt"* ]] || { echo "missing $opt"; return 1; }
    grep -q -- "${opt//-/\\\\-}" "$SEQREC_ROOT/man/man1/seqrec-preprocess.1" || { echo "man lacks $opt"; return 1; }
  done
  run -0 seqrec-preprocess --version
  [[ "$output" == "seqrec-preprocess (seqrec) "[0-9]* ]]
}

@test "real data: Beauty and ml-100k statistics (skipped without the mirror)" {
  need_mirror Beauty.txt.gz ml-100k.zip
  D=$MIRROR
  run -0 seqrec-preprocess --format s3rec --core 5 --stats -o "$T/out/b.sqr" "$D/Beauty.txt.gz"
  [[ "$output" == *$'users\t22363\nitems\t12101\ninteractions\t198502\n'* ]]
  run -0 seqrec-preprocess --stats -o "$T/out/m.sqr" "$D/ml-100k.zip"
  [[ "$output" == *$'users\t943\nitems\t1682\ninteractions\t100000\n'* ]]
}

@test "--stats on a terminal without -o prints only the statistics" {
  command -v script >/dev/null || skip "no script(1) to fake a terminal"
  cd "$T/out"
  run -0 script -qec "seqrec-preprocess --stats '$P/ratings.dat'" /dev/null
  [[ "$output" == *"interactions"*"9"* ]]
  run -64 script -qec "seqrec-preprocess '$P/ratings.dat'" /dev/null
  [[ "$output" == *"refusing to write a binary stream to a terminal"* ]]
  no_leftovers "$T/out"
}

@test "recbole: a UTF-8 byte order mark, a missing item_id column" {
  printf '\xef\xbb\xbfuser_id:token\titem_id:token\nu\ti\n' > "$T/bom.inter"
  run -0 bash -c "seqrec-preprocess '$T/bom.inter' | seqrec-cat"
  [ "$output" = $'1\t1' ]
  printf 'user_id:token\titem_id_list:token_seq\nu\ti j\n' > "$T/seq.inter"
  run -65 seqrec-preprocess -o "$T/out/x.sqr" "$T/seq.inter"
  [[ "$output" == *"seq.inter: line 1: no column named item_id in the header"* ]]
  no_leftovers "$T/out"
}
