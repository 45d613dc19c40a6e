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
