#!/bin/sh
# tests/bats/run.sh [FILE|DIR]... - `make bats`: the suites (default
# tests/bats) as TAP, line by line as they run, then one summary line
#   bats: N passed, N failed, N skipped
# (a "bats:" line: the unit runner's bare "N passed, N failed" is the line
# CI reads). Exits with bats's status.
[ $# -gt 0 ] || set -- tests/bats
# The files run a core each at once (bats --jobs) where GNU parallel is
# installed, the tests of a file in their order: each test has its own
# directory, and the simulated device's suites use one core (on 2 cores
# the suites took 240 s, not 400). BATS_JOBS=1 runs one file at a time.
jobs=${BATS_JOBS:-$(nproc 2>/dev/null || echo 1)}
if [ "$jobs" -gt 1 ] 2>/dev/null && command -v parallel >/dev/null 2>&1; then
  set -- --jobs "$jobs" --no-parallelize-within-files "$@"
fi
st=$(mktemp) || exit 70
trap 'rm -f "$st"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
{ bats --formatter tap "$@"; echo $? > "$st"; } | {
  p=0 f=0 s=0
  while IFS= read -r line; do
    printf '%s\n' "$line"
    case $line in
      "ok "*"# skip"*) s=$((s + 1)) ;;
      "ok "*) p=$((p + 1)) ;;
      "not ok "*) f=$((f + 1)) ;;
    esac
  done
  echo "bats: $p passed, $f failed, $s skipped"
}
rc=$(cat "$st")
exit "${rc:-70}"
