#!/usr/bin/env bats
# The checkout itself: what git ignores, the summary line of make bats, and
# the suites' one way to the data mirror.

load helper

setup() { common_setup; }

@test "the README examples' outputs are git-ignored at the top level; no tracked file is" {
  git -C "$SEQREC_ROOT" rev-parse --git-dir >/dev/null 2>&1 || skip "not a git checkout"
  # the files the README's example commands write (-o, --map, --log, >)
  names=$(grep '^    ' "$SEQREC_ROOT/README.md" | grep -o -E '(-o|--output|--map|--log|>) +[^ ]+' |
          awk '{ print $2 }' | grep -v / | grep '\.' | sort -u)
  [ -n "$names" ]
  for n in $names; do
    git -C "$SEQREC_ROOT" check-ignore -q "$n" || { echo "not ignored: $n"; false; }
    case $n in *.sqm) git -C "$SEQREC_ROOT" check-ignore -q "$n.ckpt" || { echo "not ignored: $n.ckpt"; false; } ;; esac
  done
  run -0 git -C "$SEQREC_ROOT" ls-files -ci --exclude-standard
  [ -z "$output" ] || { echo "tracked but ignored: $output"; false; }
  # top level only: the same names under tests/ are not ignored
  ! git -C "$SEQREC_ROOT" check-ignore -q tests/golden/x.sqm || false
}

@test "make bats ends with 'bats: N passed, N failed, N skipped' and keeps bats's status" {
  printf '%s\n' '@test "passes" { true; }' '@test "fails" { false; }' \
    '@test "skips" { skip "no reason"; }' > "$T/x.bats"
  # (a clean environment: the BATS_ variables of this run, and its libexec
  # on PATH, would mislead it)
  PATH=$(tr : '\n' <<< "$PATH" | grep -v bats-core | paste -sd :)
  run -1 env -i PATH="$PATH" HOME="$HOME" sh "$SEQREC_ROOT/tests/bats/run.sh" "$T/x.bats"
  [ "${lines[-1]}" = "bats: 1 passed, 1 failed, 1 skipped" ]
  [[ "$output" == *$'\nok 1 passes\n'* ]]
  sed -i '/fails/d' "$T/x.bats"
  run -0 env -i PATH="$PATH" HOME="$HOME" sh "$SEQREC_ROOT/tests/bats/run.sh" "$T/x.bats"
  [ "${lines[-1]}" = "bats: 1 passed, 0 failed, 1 skipped" ]
  # and make bats runs through it
  run -0 make -n -s -C "$SEQREC_ROOT" bats BATS_FILES="$T/x.bats"
  [[ "$output" == *"sh tests/bats/run.sh $T/x.bats"* ]]
}

@test "need_mirror: DATA_MIRROR (relative: of the checkout), else ../shared/data; skips, saying where" {
  mkdir -p "$T/m"
  : > "$T/m/a.zip"
  DATA_MIRROR=$T/m need_mirror a.zip
  [ "$MIRROR" = "$T/m" ]
  rel=$(realpath --relative-to="$SEQREC_ROOT" "$T/m")
  DATA_MIRROR=$rel need_mirror a.zip
  [ "$MIRROR" = "$SEQREC_ROOT/$rel" ]
  (unset DATA_MIRROR; skip() { echo "skip: $*"; exit 3; }; need_mirror nothing.zip; echo "no skip") > "$T/o" || true
  [ "$(cat "$T/o")" = "skip: no nothing.zip in the data mirror $SEQREC_ROOT/../shared/data (set DATA_MIRROR=DIR)" ]
  (skip() { echo "skip: $*"; exit 3; }; DATA_MIRROR=$T/m need_mirror a.zip b.zip) > "$T/o" || true
  [ "$(cat "$T/o")" = "skip: no b.zip in the data mirror $T/m (set DATA_MIRROR=DIR)" ]
}

@test "no suite names a data-mirror path of its own (need_mirror does)" {
  cd "$SEQREC_ROOT/tests/bats"
  run grep -l -e 'shared/data' -e '\.\./shared' -- *.bats
  output=$(grep -vx checkout.bats <<< "$output" || true)
  [ -z "$output" ] || { echo "fixed mirror paths in: $output"; false; }
}

@test "plain make's goal is 'all', also with nvcc on PATH (issue 40: cuda.mk's first rule was the default)" {
  mkdir -p "$T/fakebin"
  printf '#!/bin/sh\nexit 0\n' > "$T/fakebin/nvcc"
  chmod +x "$T/fakebin/nvcc"
  for cuda in auto 0; do
    PATH="$T/fakebin:$PATH" run make -pn -C "$SEQREC_ROOT" CUDA=$cuda BUILD="$T/build"
    [[ "$output" == *$'\n.DEFAULT_GOAL := all\n'* ]]
  done
}
