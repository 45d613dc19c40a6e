#!/usr/bin/env bats
# The documents' relative links lead to files of the checkout (doc/repro/
# was once ignored by .gitignore's repro/ and never committed: every
# report link of the README was dead on a clone), and, in a git checkout,
# to files git tracks.

load helper

@test "docs: every relative link of README.md, HACKING.md and doc/ names a tracked file" {
  cd "$SEQREC_ROOT"
  tracked=""
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then tracked=1; fi
  bad=0
  for f in README.md HACKING.md doc/*.md doc/*/*.md cuda/README.md; do
    [ -f "$f" ] || continue
    d=$(dirname "$f")
    for l in $(grep -o '](\([^)#: ]*\)[)#]' "$f" | sed 's/^](//; s/[)#]$//' | sort -u); do
      [ -n "$l" ] || continue
      p="$d/$l"
      if [ ! -e "$p" ]; then echo "$f: $l: no such file"; bad=1; continue; fi
      if [ -n "$tracked" ] && [ -f "$p" ] && [ -z "$(git ls-files -- "$p")" ]; then
        echo "$f: $l: not tracked by git (ignored?)"; bad=1
      fi
    done
  done
  [ "$bad" -eq 0 ]
}
