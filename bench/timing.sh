# bench/timing.sh - sourced by the bench scripts: wall-clock timing helpers.
now() { date +%s.%N; }
best() { # best wall seconds of 3 runs of "$@"
  b=""
  for _ in 1 2 3; do
    t0=$(now); "$@"; t1=$(now)
    b=$(echo "$t0 $t1 $b" | awk '{d=$2-$1; if ($3=="" || d<$3) print d; else print $3}')
  done
  echo "$b"
}
# machine_lines CSV BENCH PEAK: the machine a bench ran on, as CSV lines
# "BENCH,cpu,MODEL", "BENCH,host_isa,SET" (the widest vector set the host
# runs), "BENCH,vector_isa,SET" and "BENCH,vector_bits,N" (the set the
# engine's kernels ran: the host's, or the one a `make ISA=...` build was
# made for), asked of PEAK (bench/sgemm_peak --isa) when given; and
# "BENCH,openblas_coretype,..." when OPENBLAS_CORETYPE narrows OpenBLAS too.
machine_lines() {
  cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1 | tr ',' ' ')
  [ -n "$cpu" ] || cpu=$(uname -m)
  # a VM may say only "AMD EPYC": family and model tell the generation
  fm=$(awk -F': *' '/^cpu family/ {f = $2} /^model[[:space:]]*:/ {m = $2}
    END {if (f != "") printf "family %s model %s", f, m}' /proc/cpuinfo 2>/dev/null)
  [ -z "$fm" ] || cpu="$cpu ($fm)"
  host=x86-64
  grep -qw avx2 /proc/cpuinfo 2>/dev/null && host=avx2
  grep -qw avx512f /proc/cpuinfo 2>/dev/null && host=avx512f
  [ "$(uname -m)" = x86_64 ] || host=$(uname -m)
  isa=$host
  [ -n "${3:-}" ] && [ -x "$3" ] && isa=$("$3" --isa)
  case $isa in avx512f) bits=512 ;; avx2) bits=256 ;; *) bits=128 ;; esac
  { echo "$2,cpu,$cpu"; echo "$2,host_isa,$host"; echo "$2,vector_isa,$isa"
    echo "$2,vector_bits,$bits"
    [ -z "${OPENBLAS_CORETYPE:-}" ] || echo "$2,openblas_coretype,$OPENBLAS_CORETYPE"
  } | tee -a "$1"
}
# torch_python: the first of TORCH_PYTHON (default: python3, then Debian's
# /usr/bin/python3, which a pyenv python3 earlier on PATH hides) that
# imports torch; nothing when none does
torch_python() {
  for _tp in ${TORCH_PYTHON:-python3 /usr/bin/python3}; do
    if "$_tp" -c 'import torch' 2>/dev/null; then echo "$_tp"; return; fi
  done
}
# median: of the numbers on stdin (of an even count: the mean of the middle
# two, so that with 2 epochs seconds and seq/s describe the same two epochs)
median() {
  sort -n | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2];
    else if (NR) printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}
# field NAME LOG: NAME's value on each JSON line of a seqrec-train log
field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" "$2"; }
# ratio A B: A / B to two places, n/a when B is not positive
ratio() { echo "$1 $2" | awk '{if ($2 > 0) printf "%.2f", $1 / $2; else print "n/a"}'; }
