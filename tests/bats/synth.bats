#!/usr/bin/env bats
# seqrec-synth: both formats, determinism, the documented generator pinned by
# its first lines, bad arguments, and outputs that cannot be created.

load helper

setup() {
  common_setup
}

@test "synth writes TSV: user, item, rating, timestamp in time order" {
  run -0 seqrec-synth --users 50 --items 40 --clusters 4 -o "$T/s.tsv"
  # four integer columns, users 1..50, items 1..40, ratings 4 or 5
  run -0 awk -F'\t' 'NF != 4 || $1 < 1 || $1 > 50 || $2 < 1 || $2 > 40 || ($3 != 4 && $3 != 5) { print "bad: " NR ": " $0 }
      $1 == u && $4 <= t { print "time goes back: " NR }
      $1 < u { print "users out of order: " NR }
      { u = $1; t = $4 }' "$T/s.tsv"
  [ -z "$output" ]
  [ "$(cut -f1 "$T/s.tsv" | sort -u | wc -l)" = 50 ]
  no_leftovers "$T" s.tsv
}

@test "synth default output starts with the documented generator's lines" {
  # Pins the generator: a change here breaks "same seed, same bytes".
  run -0 bash -c "seqrec-synth --users 1 | head -3"
  [ "$output" = $'1\t495\t5\t983114611\n1\t166\t5\t983174701\n1\t251\t5\t983188850' ]
}

@test "synth lengths respect --min-len and --max-len" {
  seqrec-synth --users 300 --min-len 4 --mean-len 9 --max-len 12 > "$T/s.tsv"
  run -0 bash -c "cut -f1 '$T/s.tsv' | uniq -c | awk '\$1 < 4 || \$1 > 12'"
  [ -z "$output" ]
}

@test "synth --format stream writes a checked sequences stream with its options in meta" {
  run -0 seqrec-synth --users 20 --seed 9 --p-next 0.25 --format stream -o "$T/s.sqr"
  run -0 seqrec-cat --verify "$T/s.sqr"
  run -0 seqrec-cat --header "$T/s.sqr"
  [[ "$output" == *$'kind\tsequences'* ]]
  [[ "$output" == *$'n_items\t500'* ]]
  [[ "$output" == *$'timestamps\tyes'* ]]
  [[ "$output" == *$'meta\tdataset=synth'* ]]
  [[ "$output" == *$'meta\tsynth.seed=9'* ]]
  [[ "$output" == *$'meta\tsynth.p-next=0.25'* ]]
  [[ "$output" == *$'meta\tsynth.users=20'* ]]
  [[ "$output" == *$'meta\tseqrec.version='* ]]
  [[ "$output" == *$'records\t20'* ]]
}

@test "synth text and stream hold the same sequences" {
  seqrec-synth --users 30 > "$T/s.tsv"
  seqrec-synth --users 30 --format stream | seqrec-cat --no-ts > "$T/from-stream.txt"
  awk -F'\t' '$1 != u { if (u) print u "\t" s; u = $1; s = $2; next } { s = s " " $2 }
              END { print u "\t" s }' "$T/s.tsv" > "$T/from-text.txt"
  cmp "$T/from-text.txt" "$T/from-stream.txt"
}

@test "synth is deterministic: same seed same bytes, another seed other bytes" {
  seqrec-synth --users 200 --seed 5 -o "$T/a.tsv"
  seqrec-synth --users 200 --seed 5 -o "$T/b.tsv"
  seqrec-synth --users 200 --seed 6 -o "$T/c.tsv"
  cmp "$T/a.tsv" "$T/b.tsv"
  ! cmp -s "$T/a.tsv" "$T/c.tsv" || false
  seqrec-synth --users 200 --seed 5 --format stream -o "$T/a.sqr"
  seqrec-synth --users 200 --seed 5 --format stream > "$T/b.sqr"
  cmp "$T/a.sqr" "$T/b.sqr"
}

@test "synth: fewer users give a prefix of the same data" {
  seqrec-synth --users 10 > "$T/small.tsv"
  seqrec-synth --users 40 > "$T/big.tsv"
  run -0 cmp -n "$(file_size "$T/small.tsv")" "$T/small.tsv" "$T/big.tsv"
}

@test "synth --help lists every option and exits 0" {
  run -0 seqrec-synth --help
  for o in --users --items --clusters --user-clusters --min-len --mean-len --max-len \
           --zipf --p-next --p-stay --seed --format --output --help --version; do
    [[ "$output" == *"$o"* ]] || { echo "missing $o"; return 1; }
  done
  run -0 seqrec-synth --version
  [[ "$output" == "seqrec-synth "* ]]
}

@test "synth refuses bad arguments with status 64" {
  run -64 seqrec-synth --users 0
  [[ "$output" == *"--users must be at least 1"* ]]
  run -64 seqrec-synth --users abc
  [[ "$output" == *"--users: invalid number 'abc'"* ]]
  run -64 seqrec-synth --users -5
  run -64 seqrec-synth --items 1
  run -64 seqrec-synth --clusters 600
  run -64 seqrec-synth --p-next 1.5
  run -64 seqrec-synth --p-stay nan
  run -64 seqrec-synth --mean-len 3
  [[ "$output" == *"--mean-len must be in 5..200"* ]]
  run -64 seqrec-synth --format json
  run -64 seqrec-synth --bogus
  [[ "$output" == *"unknown option"* ]]
  run -64 seqrec-synth --users
  run -64 seqrec-synth extra-argument
  [[ "$output" == *"--help"* ]]
}

@test "synth: an output that cannot be created is status 73 and leaves nothing" {
  run -73 seqrec-synth -o "$T/no/such/dir/s.tsv"
  [[ "$output" == *"s.tsv: cannot create"* ]]
  run -73 seqrec-synth --format stream -o "$T/no/such/dir/s.sqr"
  no_leftovers "$T"
}

@test "synth: a write error (full disk) is status 74" {
  [ -w /dev/full ] || skip "no /dev/full here"
  run -74 bash -c "seqrec-synth --users 5000 > /dev/full"
  [[ "$output" == *"<stdout>: write error"* ]]
  run -74 bash -c "seqrec-synth --users 5000 --format stream > /dev/full"
}

@test "synth: a catalogue of a million items, long-tailed: items in range, top 1% of the seen items over 20% of interactions" {
  seqrec-synth --items 1000000 --users 20000 --seed 3 > "$T/big.tsv"
  cut -f2 "$T/big.tsv" | sort -n | uniq -c | sort -rn > "$T/pop"
  max=$(cut -f2 "$T/big.tsv" | sort -n | tail -n 1)
  [ "$max" -le 1000000 ] && [ "$max" -gt 900000 ]
  awk '{ c[NR] = $1; t += $1 } END { k = int(NR / 100); for (i = 1; i <= k; i++) s += c[i];
        printf "distinct %d top1%% %.3f\n", NR, s / t; exit !(s / t > 0.2 && NR > 50000) }' "$T/pop"
}
