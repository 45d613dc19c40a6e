#!/usr/bin/env bats
# data/fetch: mirror copies are verified; a bad copy is refused and removed.

load helper

setup() {
  common_setup
  mkdir -p "$T/mirror"
  printf '1 2 3\n2 3 4\n' > "$T/x.txt"
  gzip -nc "$T/x.txt" > "$T/mirror/x.txt.gz"
  SUM=$(sha256sum "$T/x.txt" | cut -c1-64)
}

@test "fetch copies from DATA_MIRROR and checks the content sha256" {
  run -0 env DATA_MIRROR="$T/mirror" sh "$SEQREC_ROOT/data/fetch" x - "$T/raw/x.txt.gz" - sha256:$SUM - x.txt.gz
  [[ "$output" == *"content sha256 ok"* ]]
  cmp "$T/raw/x.txt.gz" "$T/mirror/x.txt.gz"
}

@test "fetch refuses a copy with the wrong content and leaves nothing" {
  run -1 env DATA_MIRROR="$T/mirror" sh "$SEQREC_ROOT/data/fetch" x - "$T/raw/x.txt.gz" - sha256:0000 - x.txt.gz
  [[ "$output" == *"content sha256 mismatch"* ]]
  no_leftovers "$T/raw"
}

@test "fetch says so when the mirror lacks the file" {
  run -1 env DATA_MIRROR="$T/mirror" sh "$SEQREC_ROOT/data/fetch" y - "$T/raw/y.zip" - - - y.zip
  [[ "$output" == *"not in DATA_MIRROR"* ]]
}

@test "the Beauty recipe verifies the shared mirror copy" {
  [ -f "$SEQREC_ROOT/../shared/data/Beauty.txt.gz" ] || skip "no ../shared/data mirror here"
  run -0 make -s -C "$SEQREC_ROOT/data" beauty RAW="$T/raw" DATA_MIRROR="$SEQREC_ROOT/../shared/data"
  [[ "$output" == *"content sha256 ok"* ]]
  [ -f "$T/raw/Beauty.txt.gz" ]
}
