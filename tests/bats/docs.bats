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

# GitHub's anchor of each heading of a Markdown file: lower case, every
# character but letters, digits, spaces, hyphens and underscores dropped,
# spaces made hyphens (duplicates are not numbered: the documents have none
# that a link names).
anchors() {
  grep -E '^#{1,6} ' "$1" | sed -E 's/^#+ +//' | tr 'A-Z' 'a-z' |
    sed -E 's/[^a-z0-9 _-]//g; s/ /-/g'
}

@test "docs: every link to a section (FILE#anchor or #anchor) names a heading of that file" {
  cd "$SEQREC_ROOT"
  bad=0
  for f in README.md HACKING.md doc/*.md doc/*/*.md cuda/README.md; do
    [ -f "$f" ] || continue
    d=$(dirname "$f")
    for l in $(grep -o '](\([^)#: ]*\)#[^) ]*)' "$f" | sed 's/^](//; s/)$//' | sort -u); do
      p=${l%%#*} a=${l#*#}
      if [ -z "$p" ]; then t=$f; else t="$d/$p"; fi
      case "$t" in *.md) ;; *) continue ;; esac
      [ -f "$t" ] || continue # the file check above reports it
      anchors "$t" | grep -qx -- "$a" || { echo "$f: $l: no heading #$a in $t"; bad=1; }
    done
  done
  [ "$bad" -eq 0 ]
}

@test "docs: README.md stays a user's document of at most 250 lines" {
  n=$(wc -l < "$SEQREC_ROOT/README.md")
  echo "README.md: $n lines"
  [ "$n" -le 250 ]
}
