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
