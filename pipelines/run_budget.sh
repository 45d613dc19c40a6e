#!/bin/sh
# run_budget.sh RECORD "SPEC" - the device a reproduction run trained on and
# whether it ran at the paper's training budget, as "DEVICE<TAB>VERDICT".
#
# RECORD is the run's record from pipelines/repro_run.sh (MODEL without
# .sqm, plus .run: lines `device: DEV` and `args: ARG...`). SPEC is the
# paper's budget as seqrec-train options, words of three forms:
#   --OPT>=N     the option given, at least N        (--epochs>=500)
#   --OPT=A|B    the option given, one of the values (--batch=2048,
#                --target=last|windows)
#   --OPT!=V     not V (an option not given meets it: --target!=random)
# VERDICT is "paper" when the recorded options meet every word, else what
# falls short, e.g. "epochs 200 of 500, batch 256 (paper 2048)"; "-" for
# an empty SPEC. A run that --patience ended before its --epochs (the
# record's `stop: patience N`) meets every --epochs word: a larger cap
# trains the same model (seqrec-train(1), train.stop). Without a RECORD (a
# run made before records, or by hand): "-<TAB>-". The options a run did
# not give take seqrec-train's defaults, which SPEC cannot see: the
# pipelines give the budget's options.
set -eu
[ $# -eq 2 ] || { echo "usage: run_budget.sh RECORD SPEC" >&2; exit 64; }
rec=$1
[ -s "$rec" ] || rec=/dev/null # no record: "-" for both, the SPEC still checked
awk -v budget="$2" '
  BEGIN {
    n = split(budget, w, " ")
    for (i = 1; i <= n; i++)
      if (w[i] !~ /^--[a-z0-9-]+(>=[0-9.]+|!=[^ ]+|=[^ ]+)$/) {
        printf "run_budget.sh: bad budget word \"%s\" (--OPT>=N, --OPT=A|B or --OPT!=V)\n", w[i] > "/dev/stderr"
        bad = 1; exit 65
      }
  }
  # the value of option o in the recorded args (its last), "" if not given
  function opt(o,   i, v) {
    v = ""
    for (i = 1; i < na; i++) if (args[i] == o) v = args[i + 1]
    return v
  }
  # "paper", or what of the budget this run fell short of
  function verdict(   n, w, i, o, want, v, m, out, k, alts, ok, j) {
    if (budget == "") return "-"
    out = ""
    n = split(budget, w, " ")
    for (i = 1; i <= n; i++) {
      match(w[i], /(>=|!=|=)/)
      o = substr(w[i], 1, RSTART - 1); k = substr(w[i], RSTART, RLENGTH)
      want = substr(w[i], RSTART + RLENGTH); v = opt(o); m = ""
      sub(/^--/, "", o)
      if (k == ">=") {
        if (o == "epochs" && stopped == "patience") m = "" # the cap did not bind
        else if (v == "" || v + 0 < want + 0) m = o " " (v == "" ? "unset" : v) " of " want
      } else if (k == "!=") {
        if (v == want) m = o " " v
      } else {
        ok = 0; j = split(want, alts, "|")
        for (; j >= 1; j--) if (v == alts[j]) ok = 1
        gsub(/\|/, " or ", want) # a | would end the Markdown cell
        if (!ok) m = o " " (v == "" ? "unset" : v) " (paper " want ")"
      }
      if (m != "") out = out (out == "" ? "" : ", ") m
    }
    return out == "" ? "paper" : out
  }
  /^device: / { dev = substr($0, 9) }
  /^args: / { na = split(substr($0, 7), args, " ") }
  /^stop: / { split(substr($0, 7), st, " "); stopped = st[1] }
  END {
    if (bad) exit 65
    printf "%s\t%s\n", dev == "" ? "-" : dev, (na ? verdict() : "-")
  }' "$rec"
