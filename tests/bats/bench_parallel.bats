#!/usr/bin/env bats
# bench/parallel.mk and bench/bench-parallel.sh (make bench-parallel, issue
# 36) on a tiny synthetic split: the machine lines, the table's columns,
# each launcher run the model bytes of one process with as many parts, and
# a plot without a gnuplot warning; without mpirun the launcher's rows say
# so. Timings are printed, never judged.

load helper

setup() {
  common_setup
  "$SEQREC_BIN/seqrec-synth" --users 200 --items 60 --seed 1 --format stream |
    "$SEQREC_BIN/seqrec-split" 2>/dev/null > "$T/s.sqr"
  HEAD="bench,dataset,run,processes,threads,parts,epoch_seconds,speedup_vs_p1,same_bytes_as,same_bytes"
  PEAK=${SEQREC_BIN%/bin}/bench/sgemm_peak
  [ -x "$PEAK" ] || PEAK=""
  export EPOCHS=1 MODEL_ARGS="--dim 8 --ffn 16 --batch 32"
  # SANITIZE=1: no leak check in Open MPI's processes (helper.bash need_mpi)
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0"
}

bench() { sh "$SEQREC_ROOT/bench/bench-parallel.sh" "$SEQREC_BIN" "$T/out" "$PEAK" "$@"; }

# the table's rows of CSV (after the header line)
rows() { sed -n "/^$HEAD\$/,\$p" "$1" | tail -n +2; }

# gnuplot on the CSV, again: not a line of output (no warning)
plots_quietly() {
  command -v gnuplot >/dev/null || return 0
  [ -s "$T/out/parallel.png" ]
  gnuplot -e "csv='$T/out/parallel.csv'; out='$T/p.png'; pngcall='$SEQREC_ROOT/pipelines/png.gp'" \
    "$SEQREC_ROOT/bench/parallel.gnuplot" > "$T/gp.out" 2>&1
  [ ! -s "$T/gp.out" ] || { cat "$T/gp.out"; false; }
  [ -s "$T/p.png" ]
}

@test "bench-parallel.sh: machine lines, the columns, four runs a dataset, the launcher runs' bytes the same" {
  need_mpi
  run -0 bench synth:12:"$T/s.sqr" tiny:8:"$T/s.sqr"
  csv=$T/out/parallel.csv
  for m in cpu host_isa vector_isa vector_bits launcher epochs model; do
    grep -q "^parallel,$m,." "$csv" || { echo "no $m"; cat "$csv"; false; }
  done
  head -n 1 "$csv" | grep -q '^parallel,cpu,'
  grep -q '^parallel,epochs,1$' "$csv"
  [ "$(grep -c "^$HEAD\$" "$csv")" -eq 1 ]
  rows "$csv" > "$T/rows"
  [ "$(wc -l < "$T/rows")" -eq 8 ]
  awk -F, 'NF != 10 || $1 != "parallel" { print "bad row: " $0; bad = 1 } END { exit bad }' "$T/rows"
  # dataset, run, processes, threads, parts; then the bytes
  diff <(cut -d, -f2-6 "$T/rows") - <<EOF
synth,threads1,1,1,1
synth,threads2,1,2,2
synth,mpi-np1,1,1,1
synth,mpi-np2,2,1,2
tiny,threads1,1,1,1
tiny,threads2,1,2,2
tiny,mpi-np1,1,1,1
tiny,mpi-np2,2,1,2
EOF
  diff <(cut -d, -f3,9,10 "$T/rows" | sort -u) - <<EOF
mpi-np1,threads1,yes
mpi-np2,threads2,yes
threads1,-,-
threads2,-,-
EOF
  # seconds and speedups are numbers; the launcher's P = 1 is 1.00x
  awk -F, '$7 !~ /^[0-9]+(\.[0-9]+)?$/ || $8 !~ /^[0-9]+\.[0-9][0-9]$/ { print "bad: " $0; bad = 1 }
    $3 == "mpi-np1" && $8 != "1.00" { print "P = 1 not 1.00: " $0; bad = 1 } END { exit bad }' "$T/rows"
  plots_quietly
}

@test "bench-parallel.sh without a launcher: the one-process runs, the launcher's rows say why" {
  run -0 env MPIRUN=no-such-mpirun sh "$SEQREC_ROOT/bench/bench-parallel.sh" "$SEQREC_BIN" "$T/out" "$PEAK" \
    synth:12:"$T/s.sqr"
  csv=$T/out/parallel.csv
  grep -q '^parallel,launcher,skipped (no no-such-mpirun)$' "$csv"
  rows "$csv" > "$T/rows"
  grep -Eq '^parallel,synth,threads2,1,2,2,[0-9.]+,,-,-$' "$T/rows"
  grep -q '^parallel,synth,mpi-np2,2,1,2,,,threads2,skipped (no no-such-mpirun)$' "$T/rows"
  plots_quietly
}

@test "bench-parallel.sh: a missing split is named (66)" {
  run -66 bench synth:12:"$T/none.sqr"
  [[ "$output" == *"synth: no split $T/none.sqr"* ]]
}

# -n: a recipe line that runs $(MAKE) (beauty's and MovieLens's splits)
# would still run, so only synth and a bad name here.
@test "make -n bench-parallel: DATASETS picks the splits and their lengths; an unknown name is refused" {
  run -0 mk -n bench-parallel DATASETS="synth nope" BUILD="${SEQREC_BIN%/bin}" BENCH_OUT="$T/out"
  [[ "$output" == *"seqrec-synth --seed 7 --format stream"*"-o $T/out/synth.split"* ]]
  [[ "$output" == *"DATASETS: nope is none of beauty ml-1m-part ml-1m ml-100k synth"*"exit 64"* ]]
  [[ "$output" == *"bench/bench-parallel.sh"*" synth:50:$T/out/synth.split nope:50:"* ]]
  [ ! -e "$T/out/synth.split" ]
}
