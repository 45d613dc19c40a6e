#!/bin/sh
# pack.sh - builds what `make gpu-check` carries to a borrowed GPU machine
# and packs it into .gpu/pack.tar.xz (git-ignored; `carry` it).
#
# The GPU machine has nvcc, the CUDA libraries and PyTorch but no
# libarchive, xxHash or OpenBLAS, and a newer glibc: the programs are built
# here with libarchive, xxHash and their compressors linked statically (so
# that libarchive's libxml2/ICU, 35 MB, stay behind) and OpenBLAS as the
# shared object it is, carried beside them with its Fortran runtime
# (lib/, which check.sh puts on LD_LIBRARY_PATH). The CUDA backend is
# built for sm_90 (H100, H200). Data: a seeded synthetic split, and the
# Beauty and ml-1m-part splits when DATA_MIRROR has them.
#
# Usage: tests/gpu/pack.sh [DATA_MIRROR]    (from the repository root)
set -eu
mirror=${1:-../shared/data}
B=build-gpu
P=.gpu/pack
L=/lib/x86_64-linux-gnu
rm -rf "$P" && mkdir -p "$P/bin" "$P/lib" "$P/data"
static="-Wl,-Bstatic -larchive -lxxhash -lz -llzma -lbz2 -lnettle -Wl,-Bdynamic"
dyn="$L/libzstd.so.1 $L/liblz4.so.1 $L/libacl.so.1 -lopenblas -lm -ldl -fopenmp"
# MPI=0: the GPU machine has no Open MPI (and LDLIBS_ALL above would drop
# -lmpi); its ranks are NCCL's env jobs (comm.c), which need none
make -s -j"$(nproc)" BUILD=$B CUDA=1 MPI=0 \
  CUDA_ARCH='-gencode arch=compute_90,code=sm_90' \
  LDLIBS_ALL="$static $dyn" \
  all $B/unit_tests $B/bench/attn_bench
cp $B/bin/seqrec-train $B/bin/seqrec-score $B/bin/seqrec-metrics $B/bin/seqrec-cat \
  $B/bin/seqrec-synth $B/bin/seqrec-split $B/bin/seqrec-preprocess $B/bench/attn_bench "$P/bin/"
cp $B/unit_tests "$P/"
cp $B/lib/libseqrec-cuda.so "$P/lib/"
# the shared objects the GPU machine lacks (OpenBLAS and what it needs)
for so in libopenblas.so.0 libgomp.so.1 libgfortran.so.5 libquadmath.so.0 libzstd.so.1 liblz4.so.1 libacl.so.1; do
  cp -L "$L/$so" "$P/lib/"
done
strip "$P"/bin/* "$P/unit_tests" "$P"/lib/*.so* 2>/dev/null || true
# data
./build/bin/seqrec-synth --users 300 --items 100 --seed 7 --format stream \
  | ./build/bin/seqrec-split --leave-one-out -o "$P/data/tiny.split"
./build/bin/seqrec-synth --users 3000 --items 800 --seed 7 --format stream \
  | ./build/bin/seqrec-split --leave-one-out -o "$P/data/synth.split"
if [ -f "$mirror/Beauty.txt.gz" ]; then
  ./build/bin/seqrec-preprocess --format s3rec "$mirror/Beauty.txt.gz" \
    | ./build/bin/seqrec-split --leave-one-out -o "$P/data/beauty.split"
fi
if [ -f "$mirror/ml-1m-part.zip" ]; then
  ./build/bin/seqrec-preprocess "$mirror/ml-1m-part.zip" \
    | ./build/bin/seqrec-split --leave-one-out -o "$P/data/ml1m.split" || true
fi
cp tests/gpu/check.sh tests/gpu/cudalibs.sh "$P/"
cp bench/sasrec_torch.py bench/bert4rec_torch.py bench/attn_torch.py "$P/"
mkdir -p "$P/reference" && cp tests/reference/sasrec_ref.py "$P/reference/" 2>/dev/null || true
tar -C .gpu -cJf .gpu/pack.tar.xz pack
ls -la .gpu/pack.tar.xz
