#!/usr/bin/env bats
# seqrec-export: item embeddings (and any tensor) as TSV or .npy, original
# ids through the map, --list, and the refusals: a missing or damaged model,
# an unknown tensor, a bad format, an output that cannot be written.

load helper

setup() {
  common_setup
  # preprocess numbers items in order of first appearance: apple 1,
  # banana 2, cherry 3, date 4, egg 5.
  printf 'ann\tapple\nann\tbanana\nann\tcherry\nann\tdate\nbob\tbanana\nbob\tcherry\nbob\tapple\ncid\tapple\ncid\tdate\ncid\tegg\ncid\tbanana\n' > "$T/log.tsv"
  seqrec-preprocess --format tsv -d shop --map "$T/map.tsv" -o "$T/seq.sqr" "$T/log.tsv"
  seqrec-split -o "$T/split.sqr" "$T/seq.sqr" 2>/dev/null
  mkdir -p "$T/out"
}

sasrec() {
  [ -x "$SEQREC_BIN/seqrec-train" ] || skip "seqrec-train is not built"
  seqrec-train --model sasrec --dim 8 --ffn 8 --epochs 1 -o "$T/s.sqm" "$T/split.sqr" 2>/dev/null
}

@test "item_emb as TSV: n_items rows, dense ids 1..n, dim values each" {
  sasrec
  run -0 seqrec-export -m "$T/s.sqm"
  [ "${#lines[@]}" = 5 ]
  [[ "${lines[0]}" == $'1\t'* ]]
  [[ "${lines[4]}" == $'5\t'* ]]
  [ "$(printf '%s\n' "${lines[0]}" | awk -F'\t' '{print NF}')" = 9 ]
}

@test "--map prints original item ids" {
  sasrec
  run -0 seqrec-export -m "$T/s.sqm" --map "$T/map.tsv"
  [ "${#lines[@]}" = 5 ]
  [[ "${lines[0]}" == $'apple\t'* ]]
  [[ "${lines[4]}" == $'egg\t'* ]]
  # the same vectors as with dense ids
  diff <(seqrec-export -m "$T/s.sqm" | cut -f2-) <(printf '%s\n' "${lines[@]}" | cut -f2-)
}

@test "BERT4Rec: padding and mask rows are left out of TSV, kept in .npy" {
  sasrec
  seqrec-train --model bert4rec --dim 8 --ffn 8 --epochs 1 -o "$T/b.sqm" "$T/split.sqr" 2>/dev/null
  run -0 seqrec-export -m "$T/b.sqm" --list
  [[ "$output" == *$'item_emb\tf32\t7x8'* ]]
  run -0 seqrec-export -m "$T/b.sqm"
  [ "${#lines[@]}" = 5 ]
  seqrec-export -m "$T/b.sqm" -f npy -o "$T/b.npy"
  python3 - "$T/b.npy" <<'PY'
import struct, sys
b = open(sys.argv[1], 'rb').read()
hl = struct.unpack('<H', b[8:10])[0]
assert b"'shape': (7, 8)" in b[10:10 + hl], b[:10 + hl]
assert len(b) == 10 + hl + 7 * 8 * 4
PY
}

@test "item_emb as .npy: format 1.0 header, 64-byte aligned, every row, same values" {
  sasrec
  run -0 seqrec-export -m "$T/s.sqm" -f npy -o "$T/e.npy"
  [ -z "$output" ]
  seqrec-export -m "$T/s.sqm" > "$T/e.tsv"
  python3 - "$T/e.npy" "$T/e.tsv" <<'PY'
import struct, sys
b = open(sys.argv[1], 'rb').read()
assert b[:8] == b'\x93NUMPY\x01\x00', b[:8]
hl = struct.unpack('<H', b[8:10])[0]
assert (10 + hl) % 64 == 0, hl
h = b[10:10 + hl].decode('latin1')
assert h.endswith('\n') and h.startswith("{'descr': '<f4', 'fortran_order': False, 'shape': (6, 8), }"), h
data = b[10 + hl:]
assert len(data) == 6 * 8 * 4
vals = struct.unpack('<48f', data)
assert all(v == 0 for v in vals[:8]), 'row 0 is the zero padding row'
for line in open(sys.argv[2]):
    f = line.rstrip('\n').split('\t')
    i = int(f[0])
    got = [struct.unpack('<f', struct.pack('<f', float(x)))[0] for x in f[1:]]
    assert got == list(vals[i * 8:(i + 1) * 8]), (i, got)
PY
  if python3 -c 'import numpy' 2>/dev/null; then
    run -0 python3 -c 'import numpy, sys; a = numpy.load(sys.argv[1]); print(a.shape, a.dtype, float(abs(a[0]).sum()))' "$T/e.npy"
    [ "$output" = "(6, 8) float32 0.0" ]
  fi
}

@test "--tensor, --list, and a 1-D integer tensor" {
  sasrec
  run -0 seqrec-export -m "$T/s.sqm" --list
  [ "${lines[0]}" = $'item_emb\tf32\t6x8' ]
  [[ "$output" == *$'\npos_emb\tf32\t50x8\n'* ]]
  [[ "$output" == *$'\nwq\tf32\t2x8x8\n'* ]]
  run -0 seqrec-export -m "$T/s.sqm" -t pos_emb
  [ "${#lines[@]}" = 50 ]
  [[ "${lines[0]}" == $'0\t'* ]]
  run -0 seqrec-export -m "$T/s.sqm" -t wq
  [ "${#lines[@]}" = 2 ]
  [ "$(printf '%s\n' "${lines[0]}" | awk -F'\t' '{print NF}')" = 65 ]
  seqrec-train --model pop -o "$T/p.sqm" "$T/split.sqr" >/dev/null 2>&1
  # training counts: apple 2, banana 2, cherry 0, date 1, egg 0
  run -0 seqrec-export -m "$T/p.sqm" -t pop.count --map "$T/map.tsv"
  [ "$output" = $'apple\t2\nbanana\t2\ncherry\t0\ndate\t1\negg\t0' ]
  seqrec-export -m "$T/p.sqm" -t pop.count -f npy -o "$T/c.npy"
  python3 -c "import sys; b=open(sys.argv[1],'rb').read(); assert b\"'descr': '<u8'\" in b and b\"'shape': (6,)\" in b" "$T/c.npy"
}

@test "refusals: missing model 66, damaged 65, unknown tensor 65, bad format 64" {
  sasrec
  run -66 seqrec-export -m "$T/nope.sqm" -o "$T/out/x"
  [ "$output" = "seqrec-export: $T/nope.sqm: cannot open: No such file or directory" ]
  cp "$T/s.sqm" "$T/bad.sqm"
  flip_byte "$T/bad.sqm" 200
  run -65 seqrec-export -m "$T/bad.sqm" -o "$T/out/x"
  [[ "$output" == "seqrec-export: $T/bad.sqm: byte "*"checksum mismatch"* ]]
  head -c 100 "$T/s.sqm" > "$T/short.sqm"
  run -65 seqrec-export -m "$T/short.sqm" -o "$T/out/x"
  [[ "$output" == *"$T/short.sqm: byte "* ]]
  run -65 seqrec-export -m "$T/split.sqr"
  [[ "$output" == *"byte 0: bad magic (not a seqrec model file)"* ]]
  run -65 seqrec-export -m "$T/s.sqm" -t nope -o "$T/out/x"
  [[ "$output" == "seqrec-export: $T/s.sqm: no tensor 'nope' (it has: item_emb, pos_emb, "* ]]
  seqrec-train --model pop -o "$T/p.sqm" "$T/split.sqr" >/dev/null 2>&1
  run -65 seqrec-export -m "$T/p.sqm"
  [ "$output" = "seqrec-export: $T/p.sqm: no tensor 'item_emb' (it has: pop.count)" ]
  run -64 seqrec-export -m "$T/s.sqm" --format csv
  [[ "$output" == *"--format: expected tsv or npy, got 'csv'"* ]]
  run -64 seqrec-export -m "$T/s.sqm" -f npy --map "$T/map.tsv"
  run -64 seqrec-export -m "$T/s.sqm" -t wq --map "$T/map.tsv"
  [[ "$output" == *"not indexed by item"* ]]
  run -64 seqrec-export
  [[ "$output" == *"no model"* ]]
  run -64 seqrec-export -m "$T/s.sqm" extra
  run -64 seqrec-export --bogus
  run -66 seqrec-export -m "$T/s.sqm" --map "$T/nomap.tsv" -o "$T/out/x"
  no_leftovers "$T/out"
}

@test "a map without the model's items: 65, no output" {
  sasrec
  grep -v egg "$T/map.tsv" > "$T/short.map"
  run -65 seqrec-export -m "$T/s.sqm" --map "$T/short.map" -o "$T/out/x.tsv"
  # the check of the map against the model's (idmap.h) says it first
  [[ "$output" == "seqrec-export: $T/short.map is not the id map of $T/s.sqm, nor an extension of it: it has 4 items, the model 5 (model: 5:"* ]]
  no_leftovers "$T/out"
}

@test "unwritable output: 73, nothing left; the output is written atomically" {
  sasrec
  run -73 seqrec-export -m "$T/s.sqm" -o "$T/missing/x.tsv"
  [[ "$output" == "seqrec-export: $T/missing/x.tsv: cannot create: "* ]]
  mkdir -p "$T/ro"
  chmod 555 "$T/ro"
  if ! touch "$T/ro/probe" 2>/dev/null; then
    run -73 seqrec-export -m "$T/s.sqm" -f npy -o "$T/ro/x.npy"
    no_leftovers "$T/ro"
  fi
  rm -f "$T/ro/probe"
  seqrec-export -m "$T/s.sqm" -o "$T/out/x.tsv"
  no_leftovers "$T/out" x.tsv
}

@test "npy is not written to a terminal" {
  command -v script >/dev/null || skip "script(1) not installed"
  sasrec
  run script -qec "$SEQREC_BIN/seqrec-export -m $T/s.sqm -f npy" /dev/null
  [[ "$output" == *"terminal"* ]]
}

@test "--help lists the options of the man page; --version" {
  run -0 seqrec-export --help
  [[ "$output" == *"usage: seqrec-export"* ]]
  help_opts=$(printf '%s\n' "$output" | help_options)
  man_opts=$(man_options "$SEQREC_ROOT/man/man1/seqrec-export.1")
  [ "$help_opts" = "$man_opts" ]
  run -0 seqrec-export --version
  [[ "$output" == "seqrec-export "* ]]
}
