#!/usr/bin/env bats
# pipelines/repro_docs.sh (make repro-docs): the blocks of a report between
# `<!-- include repro/PATH -->` and `<!-- end include -->` take the current
# repro/PATH when it is there, and stay as committed when it is not; on
# temporary copies (REPRO_DOCS_ROOT=$T), never the real docs. Then the real
# doc/repro/*.md: every block closed, every PATH one a pipeline writes, and
# every reproduce-* target ending with its report's refresh.

load helper

setup() {
  common_setup
  RD="$SEQREC_ROOT/pipelines/repro_docs.sh"
  export REPRO_DOCS_ROOT="$T"
  mkdir -p "$T/repro/p" "$T/d"
}

# rd DOC...: repro_docs.sh on DOC... in $T/d
rd() { (cd "$T/d" && sh "$RD" "$@"); }

# inode FILE: a rewrite (mv) gives the file a new one
inode() { stat -c %i "$1"; }

@test "repro_docs: a block is replaced by its file, the markers kept, one line a block" {
  printf '### P Table 2\n\n| run | HR@10 |\n|---|---|\n| a | 0.5000 |\n\nData: synthetic.\n\n' > "$T/repro/p/table2.md"
  printf '# Report\n\nProse.\n\n<!-- include repro/p/table2.md -->\n### old title\n\n| run | HR@10 |\n|---|---|\n| a | 0.1000 |\n\n<!-- end include -->\n\nMore prose.\n' > "$T/d/r.md"
  run -0 rd r.md
  [ "$output" = "r.md:5: repro/p/table2.md (updated)" ]
  { printf '# Report\n\nProse.\n\n<!-- include repro/p/table2.md -->\n'
    cat "$T/repro/p/table2.md"
    printf '<!-- end include -->\n\nMore prose.\n'; } > "$T/want"
  cmp "$T/want" "$T/d/r.md"
  no_leftovers "$T/d" r.md
  # again: the same contents, the file not rewritten
  ino=$(inode "$T/d/r.md")
  run -0 rd r.md
  [ "$output" = "r.md:5: repro/p/table2.md (unchanged)" ]
  [ "$(inode "$T/d/r.md")" = "$ino" ]
  cmp "$T/want" "$T/d/r.md"
}

@test "repro_docs: a block whose file is missing or empty stays byte-identical, the doc not rewritten" {
  : > "$T/repro/p/empty.md"
  printf 'a\n<!-- include repro/p/none.md -->\n### kept\n\n| x |\n|---|\n| 1 |\n\n<!-- end include -->\n<!-- include repro/p/empty.md -->\n  odd   spacing\t\n<!-- end include -->\nno final newline' > "$T/d/r.md"
  cp "$T/d/r.md" "$T/orig"
  ino=$(inode "$T/d/r.md")
  run -0 rd r.md
  [ -z "$output" ]
  cmp "$T/orig" "$T/d/r.md"
  [ "$(inode "$T/d/r.md")" = "$ino" ]
  # one block of two replaced: the other kept as it was
  printf 'new\n' > "$T/repro/p/empty.md"
  run -0 rd r.md
  [ "$output" = "r.md:10: repro/p/empty.md (updated)" ]
  grep -qx '### kept' "$T/d/r.md"
  diff <(sed -n 2,9p "$T/orig") <(sed -n 2,9p "$T/d/r.md")
  [ "$(sed -n 10,12p "$T/d/r.md")" = "$(printf '<!-- include repro/p/empty.md -->\nnew\n<!-- end include -->')" ]
}

@test "repro_docs: a file with no markers is unchanged" {
  printf '# Doc\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n<!-- a comment -->\n`<!-- include repro/p/x.md -->` in a line of prose\n' > "$T/d/n.md"
  printf 'x\n' > "$T/repro/p/x.md"
  cp "$T/d/n.md" "$T/orig"
  ino=$(inode "$T/d/n.md")
  run -0 rd n.md
  [ -z "$output" ]
  cmp "$T/orig" "$T/d/n.md"
  [ "$(inode "$T/d/n.md")" = "$ino" ]
}

@test "repro_docs: a missing end marker fails with exit 65 naming the file and line, the doc untouched" {
  printf 'x\n' > "$T/repro/p/x.md"
  printf 'one\ntwo\n<!-- include repro/p/x.md -->\nold\n' > "$T/d/bad.md"
  printf '<!-- include repro/p/x.md -->\nold\n<!-- end include -->\n' > "$T/d/good.md"
  cp "$T/d/bad.md" "$T/orig"
  run -65 rd bad.md good.md
  [[ "$output" == *"bad.md:3: include repro/p/x.md without its <!-- end include -->"* ]]
  cmp "$T/orig" "$T/d/bad.md"
  # the other docs are still done
  [ "$(cat "$T/d/good.md")" = "$(printf '<!-- include repro/p/x.md -->\nx\n<!-- end include -->')" ]
  no_leftovers "$T/d" bad.md good.md
}

@test "repro_docs: a nested include, a stray end marker, a path outside repro/: exit 65 with the line" {
  printf 'x\n' > "$T/repro/p/x.md"
  printf 'a\n<!-- include repro/p/x.md -->\nb\n<!-- include repro/p/x.md -->\n<!-- end include -->\n' > "$T/d/nest.md"
  run -65 rd nest.md
  [[ "$output" == *"nest.md:4: include inside the block opened at line 2"* ]]
  printf 'a\n\n<!-- end include -->\n' > "$T/d/stray.md"
  run -65 rd stray.md
  [[ "$output" == *"stray.md:3: <!-- end include --> outside a block"* ]]
  for p in ../x.md repro/../x.md README.md; do
    printf '<!-- include %s -->\n<!-- end include -->\n' "$p" > "$T/d/out.md"
    run -65 rd out.md
    [[ "$output" == *"out.md:1: include $p: not a path under repro/"* ]]
  done
  run -66 rd nosuch.md
  run -64 rd
  no_leftovers "$T/d" nest.md stray.md out.md
}

@test "repro_docs: by default the files are the checkout's repro/ (the folder above the script)" {
  mkdir -p "$T/co/pipelines" "$T/co/repro/p"
  cp "$RD" "$T/co/pipelines/"
  printf 'checkout\n' > "$T/co/repro/p/x.md"
  printf '<!-- include repro/p/x.md -->\n<!-- end include -->\n' > "$T/d/r.md"
  (unset REPRO_DOCS_ROOT; cd "$T/d" && sh "$T/co/pipelines/repro_docs.sh" r.md)
  grep -qx checkout "$T/d/r.md"
}

# The include markers of the real reports, as "DOC:LINE:PATH".
includes() {
  grep -Hn '^<!-- include ' "$SEQREC_ROOT"/doc/repro/*.md | sed 's/<!-- include \([^ ]*\) -->.*/\1/'
}

@test "repro_docs: every block of doc/repro/*.md is closed, and with no repro/ the reports stay byte-identical" {
  mkdir "$T/docs"
  cp "$SEQREC_ROOT"/doc/repro/*.md "$T/docs/"
  cp -r "$T/docs" "$T/orig"
  rm -rf "$T/repro"
  run -0 sh "$RD" "$T"/docs/*.md
  [ -z "$output" ]
  diff -r "$T/orig" "$T/docs"
}

@test "repro_docs: every include of doc/repro/*.md names a file that a pipelines/*.mk writes" {
  n=0
  while IFS=: read -r doc line path; do
    n=$((n + 1))
    base=${path##*/} dir=${path#repro/}
    dir=${dir%%/*}
    # a pipeline that names the file and writes under repro/DIR
    mks=$(grep -lF -- "$base" "$SEQREC_ROOT"/pipelines/*.mk | xargs -r grep -lF -- "repro/$dir" || true)
    [ -n "$mks" ] || { echo "$doc:$line: $path: no pipelines/*.mk writes $base under repro/$dir"; false; }
  done < <(includes)
  echo "$n includes"
  [ "$n" -ge 1 ]
}

@test "repro_docs: make repro-docs covers doc/repro/*.md; each reproduce-* target ends with its own report" {
  run -0 mk -n repro-docs
  [ "$output" = "sh pipelines/repro_docs.sh doc/repro/*.md" ]
  for t in linrec:linrec elastic:elastic hydrarec:hydrarec blin:blin baselines:baselines \
           fparec-sasrec:fparec fparec-attn:fparec; do
    run -0 mk -n "reproduce-${t%%:*}"
    last=$(tail -n 1 <<< "$output")
    [ "$last" = "sh pipelines/repro_docs.sh doc/repro/${t#*:}.md" ] || { echo "reproduce-${t%%:*}: $last"; false; }
  done
  # every report with an include has its reproduce-* target
  for doc in $(includes | cut -d: -f1 | sort -u); do
    grep -q "REPRO_DOCS) doc/repro/${doc##*/}" "$SEQREC_ROOT"/pipelines/*.mk
  done
}
