#!/bin/sh
# tests/bats/run.sh [FILE|DIR]... - `make bats`: the suites (default
# tests/bats) as TAP, line by line as they run, then one summary line
#   bats: N passed, N failed, N skipped
# (a "bats:" line: the unit runner's bare "N passed, N failed" is the line
# CI reads). Exits with bats's status.
[ $# -gt 0 ] || set -- tests/bats
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
