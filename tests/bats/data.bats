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

@test "the Beauty recipe verifies the mirror's copy (DATA_MIRROR)" {
  need_mirror Beauty.txt.gz
  run -0 make -s -C "$SEQREC_ROOT/data" beauty RAW="$T/raw" DATA_MIRROR="$MIRROR"
  [[ "$output" == *"content sha256 ok"* ]]
  [ -f "$T/raw/Beauty.txt.gz" ]
}

@test "a dataset missing from DATA_MIRROR names the related one there (ml-1m: ml-1m-part.zip)" {
  : > "$T/mirror/ml-1m-part.zip"
  run -2 make -s -C "$SEQREC_ROOT/data" ml-1m RAW="$T/raw" DATA_MIRROR="$T/mirror"
  [[ "$output" == *"data/fetch: ml-1m: not in DATA_MIRROR=$T/mirror (looked for: ml-1m.zip)"* ]]
  [[ "$output" == *"data/fetch: ml-1m: DATA_MIRROR has ml-1m-part.zip, another dataset (ML-1M users 1-2999): make -C data ml-1m-part copies it"* ]]
  [ ! -e "$T/raw/ml-1m.zip" ]
}

@test "a failed download says: offline? set DATA_MIRROR (fake curl), and leaves nothing" {
  mkdir -p "$T/bin"
  printf '#!/bin/sh\necho "curl: (6) Could not resolve host" >&2\nexit 6\n' > "$T/bin/curl"
  chmod +x "$T/bin/curl"
  for target in ml-100k beauty; do
    # (make check DATA_MIRROR=... hands it down in MAKEFLAGS too)
    run -2 env -u DATA_MIRROR -u MAKEFLAGS -u MFLAGS PATH="$T/bin:$PATH" make -s -C "$SEQREC_ROOT/data" \
      $target RAW="$T/raw"
    [[ "$output" == *"data/fetch: $target: cannot download https://"*" (offline?): set DATA_MIRROR=DIR to copy from a local mirror"* ]]
    no_leftovers "$T/raw"
  done
}
