#!/usr/bin/env bats
# The dispatcher, and what every program owes its users: --help, a man page.

load helper

setup() { common_setup; }

@test "seqrec NAME runs seqrec-NAME" {
  run -0 seqrec cat --version
  [[ "$output" == "seqrec-cat "* ]]
}

@test "seqrec without a command prints usage and exits 64" {
  run -64 seqrec
  [[ "$output" == *"usage: seqrec COMMAND"* ]]
}

@test "seqrec with an unknown command exits 64" {
  run -64 seqrec frobnicate
  [[ "$output" == *"'frobnicate' is not a seqrec command"* ]]
}

@test "every program has --help, --version and a man page that renders" {
  for p in "$SEQREC_BIN"/seqrec-*; do
    name=${p##*/}
    run -0 "$p" --help
    [[ "${output,,}" == *"usage: $name"* ]] || { echo "$name --help: $output"; false; }
    run -0 "$p" --version
    [ -f "$SEQREC_ROOT/man/man1/$name.1" ] || { echo "no man page for $name"; false; }
    run -0 man -l "$SEQREC_ROOT/man/man1/$name.1"
  done
  [ -f "$SEQREC_ROOT/man/man5/seqrec.5" ]
}

# The programs built, as NAMEs of seqrec-NAME: the list a new program joins
# by being built (the Makefile's PROGS: one per tools/*.c).
built_commands() {
  local p
  for p in "$SEQREC_BIN"/seqrec-*; do echo "${p##*/seqrec-}"; done
}

@test "seqrec --help and seqrec(1) list every program, and nothing else" {
  run -0 seqrec --help
  help=$output
  man=$(sed 's/\\-/-/g' "$SEQREC_ROOT/man/man1/seqrec.1")
  # the COMMANDS section's .B entries and the SEE ALSO references
  cmds=$(awk '/^\.SH/ { c = ($2 == "COMMANDS") } c && tp && /^\.B / { print $2 } { tp = ($0 == ".TP") }' \
         <<< "$man")
  n=0
  for name in $(built_commands); do
    n=$((n + 1))
    grep -qE "^  $name +[a-z]" <<< "$help" || { echo "seqrec --help omits $name"; false; }
    grep -qx "$name" <<< "$cmds" || { echo "seqrec(1) COMMANDS omits $name"; false; }
    grep -qF ".BR seqrec-$name (1)" <<< "$man" || { echo "seqrec(1) SEE ALSO omits $name"; false; }
  done
  [ "$n" -ge 9 ]
  # and no entry without a program
  for name in $(sed -n '/^commands:/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p' <<< "$help") $cmds; do
    [ -x "$SEQREC_BIN/seqrec-$name" ] || { echo "listed but not built: $name"; false; }
  done
}

@test "every program takes -V and --version and prints 'PROGRAM (seqrec) VERSION'" {
  version=$(sed -n 's/^VERSION := //p' "$SEQREC_ROOT/Makefile")
  [ -n "$version" ]
  for p in "$SEQREC_BIN"/seqrec "$SEQREC_BIN"/seqrec-*; do
    name=${p##*/}
    for o in -V --version; do
      run -0 "$p" "$o"
      [ "$output" = "$name (seqrec) $version" ] || { echo "$name $o: '$output'"; false; }
    done
  done
}

@test "every program's --help and --version to a full disk: 74 and a message, not 0" {
  [ -c /dev/full ] || skip "no /dev/full"
  for p in "$SEQREC_BIN"/seqrec "$SEQREC_BIN"/seqrec-*; do
    for o in --help --version; do
      run "$p" "$o"
      [ "$status" -eq 0 ] || { echo "${p##*/} $o: $status"; false; }
      run bash -c '"$1" "$2" > /dev/full' _ "$p" "$o"
      [ "$status" -eq 74 ] || { echo "${p##*/} $o > /dev/full: $status"; false; }
      [[ "$output" == *"rror"* ]] || { echo "${p##*/} $o: no message: '$output'"; false; }
    done
  done
}
