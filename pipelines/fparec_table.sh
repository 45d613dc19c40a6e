#!/bin/sh
# fparec_table.sh [--budget "SPEC"] TITLE DIR PREFIX "RUN:HR10/NDCG10 ..." KIND:LABEL...
#
# FPARec Table 3's layout: one row a KIND, named LABEL ("SASRec, linear"),
# with test HR@10 / NDCG@10 on Beauty and on Sports beside the paper's
# cells. A run's metrics are DIR/PREFIX<DATA>-KIND.json (seqrec-metrics
# --json: keys "hr@10", "ndcg@10"), DATA Beauty or Sports_and_Outdoors; its
# paper cell the one named <DATA>-KIND in the third argument, "-" where the
# paper has none; "(not run)" where the .json is missing or empty. A
# "### TITLE" line first, as paper_table.sh. The last two columns, device
# and budget, are each run's (Beauty / Sports) from its record DIR/PREFIX
# <DATA>-KIND.run against SPEC (pipelines/run_budget.sh; "-" for a row
# with no record).
set -eu
here=$(dirname "$0")
budget=
if [ "${1:-}" = --budget ]; then
  budget=$2
  shift 2
fi
title=$1 dir=$2 prefix=$3 paper=$4
shift 4
sh "$here/run_budget.sh" /dev/null "$budget" > /dev/null # a bad SPEC: exit 65 here
printf '### %s\n\n' "$title"
printf '| model, attention | Beauty HR@10 / NDCG@10 | paper | Sports HR@10 / NDCG@10 | paper | device | budget |\n'
printf '| --- | --- | --- | --- | --- | --- | --- |\n'
tab=$(printf '\t')
for row in "$@"; do
  kind=${row%%:*} label=${row#*:}
  line="| $label"
  devs='' buds=''
  for d in Beauty Sports_and_Outdoors; do
    rb=$(sh "$here/run_budget.sh" "$dir/$prefix$d-$kind.run" "$budget")
    devs="$devs${devs:+ / }${rb%%"$tab"*}" buds="$buds${buds:+ / }${rb#*"$tab"}"
    cell=-
    for c in $paper; do [ "${c%%:*}" = "$d-$kind" ] && cell=${c#*:}; done
    [ "$cell" = - ] || cell="${cell%%/*} / ${cell#*/}"
    json=$dir/$prefix$d-$kind.json
    if [ -s "$json" ]; then
      ours=$(awk '
        function get(s, key,   m) {
          if (match(s, "\"" key "\": *[0-9.e+-]+")) {
            m = substr(s, RSTART, RLENGTH); sub(/.*: */, "", m); return m + 0
          }
          return -1
        }
        { json = json $0 }
        END { printf "%.4f / %.4f", get(json, "hr@10"), get(json, "ndcg@10") }' "$json")
    else
      ours="(not run)"
    fi
    line="$line | $ours | $cell"
  done
  [ "$devs" = "- / -" ] && devs=-
  [ "$buds" = "- / -" ] && buds=-
  printf '%s | %s | %s |\n' "$line" "$devs" "$buds"
done
printf '\n'
