#!/bin/sh
# repro_docs.sh DOC... - the reports' tables from the pipelines' outputs.
#
# In each Markdown DOC, a block from a line
#   <!-- include repro/PATH -->
# to the next line
#   <!-- end include -->
# gets, between those two lines, the current contents of repro/PATH (of
# the checkout: the folder above this script, or REPRO_DOCS_ROOT) when that
# file exists and is not empty; otherwise the block stays as it is (the
# committed table stands until a run writes the file). A DOC is rewritten
# (a temporary file beside it, then mv) only when a block's contents
# changed. One line on stdout per block replaced:
#   DOC:LINE: repro/PATH (updated|unchanged)
#
# Exit 65 (EX_DATAERR), naming DOC and the line on stderr, for an include
# without its end marker, an include inside a block, an end marker outside
# one, or a PATH that is not under repro/ (or climbs out with ".."): that
# DOC is left as it was, the others are still done. 66: a DOC that is not
# a file; 64: no DOC.
set -euf # -f: no globbing of the include paths
if [ $# -eq 0 ]; then
  echo "usage: repro_docs.sh DOC..." >&2
  exit 64
fi
root=${REPRO_DOCS_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}

# awk's exit status: 0 nothing changed, 10 a block changed (the new
# document in the file "out"), 65 a marker error.
prog='
function fail(line, msg) {
  printf "%s:%d: %s\n", doc, line, msg | "cat 1>&2"
  bad = 1
  exit 65
}
BEGIN { inblock = 0; changed = 0; bad = 0 }
/^<!-- include [^ ]+ -->[ \t\r]*$/ {
  if (inblock)
    fail(FNR, "include inside the block opened at line " start " (no <!-- end include --> before it)")
  path = $0
  sub(/^<!-- include /, "", path)
  sub(/ -->[ \t\r]*$/, "", path)
  if (path !~ /^repro\/./ || path ~ /(^|\/)\.\.(\/|$)/)
    fail(FNR, "include " path ": not a path under repro/")
  inblock = 1; start = FNR; opening = $0; old = ""
  next
}
/^<!-- end include -->[ \t\r]*$/ {
  if (!inblock)
    fail(FNR, "<!-- end include --> outside a block")
  inblock = 0
  f = root "/" path
  new = ""
  if (index(files, " " path " ")) {
    while ((getline l < f) > 0)
      new = new l "\n"
    close(f)
  }
  if (new == "") {
    new = old
  } else {
    printf "%s:%d: %s (%s)\n", doc, start, path, new == old ? "unchanged" : "updated"
    if (new != old)
      changed = 1
  }
  printf "%s\n%s%s\n", opening, new, $0 > out
  next
}
inblock { old = old $0 "\n"; next }
{ print > out }
END {
  if (bad)
    exit 65
  if (inblock)
    fail(start, "include " path " without its <!-- end include -->")
  close(out)
  exit changed ? 10 : 0
}'

rc=0 tmp=
trap 'if [ -n "$tmp" ]; then rm -f "$tmp"; fi' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for doc in "$@"; do
  if [ ! -f "$doc" ]; then
    echo "repro_docs.sh: $doc: no such file" >&2
    [ "$rc" -ne 0 ] || rc=66
    continue
  fi
  # beside DOC (mv stays atomic) and with its mode (awk truncates it)
  tmp=$doc.tmp.$$
  cp -p "$doc" "$tmp"
  # the included files that are there: regular and not empty
  files=" "
  for p in $(sed -n 's/^<!-- include \([^ ]*\) -->.*/\1/p' "$doc"); do
    if [ -f "$root/$p" ] && [ -s "$root/$p" ]; then files="$files$p "; fi
  done
  st=0
  awk -v doc="$doc" -v root="$root" -v out="$tmp" -v files="$files" "$prog" "$doc" || st=$?
  case $st in
    0) rm -f "$tmp" ;;
    10) mv -f "$tmp" "$doc" ;;
    65) rm -f "$tmp"; rc=65 ;;
    *) rm -f "$tmp"; echo "repro_docs.sh: $doc: awk failed ($st)" >&2; exit 70 ;;
  esac
  tmp=
done
exit "$rc"
