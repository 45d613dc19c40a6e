# shellcheck shell=bash disable=SC2154 # $here: the sourcing script's pack
# cudalibs.sh - sourced by check.sh and repro.sh on the GPU machine, with
# $here the unpacked pack (pack.sh): the CUDA libraries wherever this image
# keeps them, then the pack's lib/ and bin/ first.
cudalib=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 \
         /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib \
         /opt/torch/.venv/lib/python3*/site-packages/nvidia/cublas/lib; do
  [ -e "$d/libcublas.so.13" ] && cudalib="$cudalib:$d"
done
if [ -z "$cudalib" ]; then
  d=$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)
  [ -n "$d" ] && cudalib=":$(dirname "$d")"
fi
for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/cuda_runtime/lib \
         /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib; do
  [ -e "$d/libcudart.so.13" ] && cudalib="$cudalib:$d"
done
export LD_LIBRARY_PATH="$here/lib$cudalib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SEQREC_CUDA_LIB="$here/lib/libseqrec-cuda.so"
export PATH="$here/bin:$PATH"
