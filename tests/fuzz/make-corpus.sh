#!/bin/sh
# make-corpus.sh - regenerates the committed seed corpora tests/fuzz/corpus/
# with the project's own programs (build/bin: run `make all` first) plus
# awk, gzip, bzip2, xz, zip and tar for the raw formats and archives.
# Every file is small (a few KB) and the output is deterministic.
set -eu
cd "$(dirname "$0")/../.."
B=build/bin
C=tests/fuzz/corpus
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
rm -rf "$C"
mkdir -p "$C/stream" "$C/raw" "$C/model" "$C/text"
export TZ=UTC SOURCE_DATE_EPOCH=0

# ---- raw logs: 2 option bytes (see fuzz_raw.c), then the file ----
$B/seqrec-synth --users 8 --items 15 --clusters 3 --min-len 3 --mean-len 5 --max-len 8 \
  --seed 3 > "$T/u.data"                        # user item rating ts, tabs (ml-100k)
# seed FILE B0 B1: B0/B1 in octal
seed() { { printf "\\$2\\$3"; cat "$1"; } > "$C/raw/$4"; }
awk -F'\t' -v OFS='::' '{print $1,$2,$3,$4}' "$T/u.data" > "$T/ratings.dat"
{ echo userId,movieId,rating,timestamp; tr '\t' , < "$T/u.data"; } > "$T/ratings.csv"
{ printf 'user_id:token\titem_id:token\trating:float\ttimestamp:float\n'; cat "$T/u.data"; } > "$T/x.inter"
cut -f1,2 "$T/u.data" | tr '\t' ' ' > "$T/sasrec.txt"
awk -F'\t' '{ s[$1] = s[$1] " " $2 } END { for (u in s) print u s[u] }' "$T/u.data" | sort -n > "$T/s3rec.txt"
{ echo user,item,rating,timestamp; tr '\t' , < "$T/u.data"; } > "$T/named.csv"
tr '\t' ';' < "$T/u.data" > "$T/semi.csv"
seed "$T/u.data"      001 000 movielens-u.data
seed "$T/ratings.dat" 001 001 movielens-ratings.dat
seed "$T/ratings.csv" 001 002 movielens-ratings.csv
seed "$T/x.inter"     002 003 recbole-x.inter
seed "$T/sasrec.txt"  003 007 sasrec
seed "$T/s3rec.txt"   004 004 s3rec-Beauty.txt
seed "$T/named.csv"   055 007 csv-header-names        # csv, --header, named columns
seed "$T/ratings.csv" 135 020 csv-header-numbers-minrating # csv, --header, numbered, --min-rating, dedup last
seed "$T/semi.csv"    205 120 csv-semicolon-last-core2 # csv, --sep ';', dedup last, --core 2
seed "$T/u.data"      006 110 tsv-dedup-first-core2
seed "$T/u.data"      000 000 auto-u.data
seed "$T/x.inter"     007 003 auto-x.inter
seed "$T/s3rec.txt"   007 007 auto-s3rec
gzip -9n < "$T/u.data" > "$T/u.data.gz"
seed "$T/u.data.gz"   000 005 gz-u.data
bzip2 -9 < "$T/sasrec.txt" > "$T/sasrec.bz2"
seed "$T/sasrec.bz2"  003 007 bz2-sasrec
xz -9 < "$T/ratings.dat" > "$T/ratings.xz"
seed "$T/ratings.xz"  001 007 xz-movielens
mkdir -p "$T/ml-100k"
cp "$T/u.data" "$T/ml-100k/u.data"
printf 'a small synthetic log\n' > "$T/ml-100k/README"
touch -d @0 "$T/ml-100k" "$T/ml-100k/u.data" "$T/ml-100k/README"
(cd "$T" && zip -qX -9 ml.zip ml-100k/README ml-100k/u.data)
seed "$T/ml.zip"      000 006 zip-ml-100k
seed "$T/ml.zip"      000 206 zip-member-u.data
(cd "$T" && tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - ratings.dat | xz -9 > ml.tar.xz)
seed "$T/ml.tar.xz"   000 007 tar-xz-ratings.dat

# ---- streams: every kind, from the pipeline ----
S=$C/stream
$B/seqrec-synth --users 8 --items 15 --clusters 3 --min-len 3 --mean-len 5 --max-len 8 \
  --seed 3 --format stream -o "$S/sequences-ts"
$B/seqrec-preprocess --format sasrec --map "$T/sasrec.map" -o "$S/sequences" "$T/sasrec.txt"
$B/seqrec-split --leave-one-out -o "$S/split-ts" "$S/sequences-ts"
$B/seqrec-split --leave-one-out -o "$T/split" "$S/sequences"
cp "$T/split" "$S/split"
$B/seqrec-pad --len 5 -o "$S/padded-zero" "$T/split"
$B/seqrec-pad --len 5 --mode randompad --copies 2 --seed 7 -o "$S/padded-randompad" "$T/split"

# ---- models: small ones of every family, and a checkpoint ----
M=$C/model
train() { out=$1; shift; $B/seqrec-train --threads 1 --epochs 1 --batch 8 --seed 1 "$@" \
  --log /dev/null -o "$T/$out.sqm" "$T/split"; cp "$T/$out.sqm" "$M/$out.sqm"; }
small="--dim 4 --ffn 4 --layers 1 --max-len 4"
train pop --model pop
train sasrec-softmax --model sasrec $small
train sasrec-fpositional --model sasrec --attn fpositional --rank 2 $small
train sasrec-mixing --model sasrec --attn mixing $small
train sasrec-linrec-2heads --model sasrec --attn linrec --heads 2 $small
train bert4rec-hydra --model bert4rec --attn hydra --heads 4 --causal $small
cp "$T/sasrec-softmax.sqm.ckpt" "$M/sasrec-softmax.ckpt"

$B/seqrec-score -m "$M/sasrec-softmax.sqm" --target test -o "$S/ranks" "$T/split"
$B/seqrec-score -m "$M/pop.sqm" --topk 3 --format stream -o "$S/topk" "$T/split"
# ---- text: 2 option bytes (see fuzz_text.c), then the text ----
X=$C/text
# text B0 B1 NAME < TEXT: B0/B1 in octal
text() { { printf "\\$1\\$2"; cat; } > "$X/$3"; }
$B/seqrec-cat "$S/sequences-ts" | text 010 000 sequences-ts
$B/seqrec-cat "$S/sequences" | text 000 000 sequences
$B/seqrec-cat "$S/split-ts" | text 011 000 split-ts
$B/seqrec-cat "$S/split" | text 021 024 split-n-items-20
$B/seqrec-cat "$S/padded-zero" | text 042 005 padded-max-len-5
$B/seqrec-cat "$S/padded-randompad" | text 042 005 padded-randompad
$B/seqrec-cat "$S/ranks" | text 003 000 ranks
$B/seqrec-cat "$S/topk" | text 004 000 topk
text 005 000 map < "$T/sasrec.map"
printf '3\n7\r\n15\n99\n' | text 006 017 exclude-items
printf '1\n2\n3\n' | text 106 017 allow-items
ls -l "$C"/*
