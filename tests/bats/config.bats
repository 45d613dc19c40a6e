#!/usr/bin/env bats
# seqrec-train --config: a model file (or its header's text) as the settings
# of a run, the command line over it, refusals naming the file and line,
# and the man page's key lists against the option tables.

load helper

setup() {
  common_setup
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
  TINY=(--dim 16 --ffn 32 --max-len 20 --batch 32)
}

@test "config: a model's header as config trains the bytes of the original command line" {
  seqrec-train "${TINY[@]}" --dropout 0.3 --lr 3e-3 --attn linrec --epochs 2 --threads 2 \
    --log "$T/log0" -o "$T/m.sqm" "$T/s.sqr"
  seqrec-cat --header "$T/m.sqm" > "$T/h.txt"
  # the parts a step was cut into, recorded: the --threads that gives the bits
  parts=$(sed -n 's/^config\ttrain\.parts=//p' "$T/h.txt")
  [ "$parts" = 2 ]
  # the model file itself, the header's text, its config lines alone
  grep '^config' "$T/h.txt" | cut -f2 > "$T/c.conf"
  for c in "$T/m.sqm" "$T/h.txt" "$T/c.conf"; do
    seqrec-train --config "$c" --threads "$parts" --log "$T/log1" -o "$T/m1.sqm" "$T/s.sqr"
    cmp "$T/m.sqm" "$T/m1.sqm"
    diff <(strip_times "$T/log0") <(strip_times "$T/log1")
    rm "$T/m1.sqm"*
  done
}

@test "config: every model's file trains its bytes again as a config" {
  for m in $(seqrec-train --list-models | cut -f1); do
    a=(--dim 16 --max-len 20)
    [ "$m" = pop ] && a=()
    seqrec-train --model "$m" "${a[@]}" --epochs 1 --threads 2 --log /dev/null -o "$T/$m.sqm" "$T/s.sqr"
    seqrec-train --config "$T/$m.sqm" --threads 2 --log /dev/null -o "$T/$m.2.sqm" "$T/s.sqr"
    cmp "$T/$m.sqm" "$T/$m.2.sqm" || { echo "model $m"; false; }
  done
}

@test "config: the command line wins over the file, before or after --config" {
  seqrec-train "${TINY[@]}" --epochs 1 --threads 2 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  seqrec-train "${TINY[@]}" --dim 8 --lr 5e-3 --epochs 1 --threads 2 --log /dev/null \
    -o "$T/want.sqm" "$T/s.sqr"
  seqrec-train --dim 8 --config "$T/m.sqm" --lr 5e-3 --threads 2 --log /dev/null \
    -o "$T/a.sqm" "$T/s.sqr"
  seqrec-train --config "$T/m.sqm" --lr 5e-3 --dim 8 --threads 2 --log /dev/null \
    -o "$T/b.sqm" "$T/s.sqr"
  cmp "$T/want.sqm" "$T/a.sqm"
  cmp "$T/want.sqm" "$T/b.sqm"
  # a later line of a key wins within the file; comments and blank lines
  printf '# two dims\ndim=32\n\ntrain.epochs=1\ndim=8\ntrain.lr=5e-3\nffn=32\nmax_len=20\ntrain.batch=32\n' > "$T/c.conf"
  seqrec-train --config "$T/c.conf" --threads 2 --log /dev/null -o "$T/c.sqm" "$T/s.sqr"
  cmp "$T/want.sqm" "$T/c.sqm"
}

@test "config: the records of a run are skipped, the model key picks the model" {
  printf 'model=gru4rec\nn_items=5\nn_users=7\ndata.dataset=other\nseqrec.version=0.0.1\ntrain.best_epoch=9\nvalid.hr@10=1\ndim=16\nhidden=16\nmax_len=20\ntrain.epochs=1\n' > "$T/g.conf"
  seqrec-train --config "$T/g.conf" --threads 2 --log /dev/null -o "$T/g.sqm" "$T/s.sqr"
  seqrec-cat --header "$T/g.sqm" > "$T/h.txt"
  grep -qx 'config	model=gru4rec' "$T/h.txt"
  grep -qx 'config	n_items=100' "$T/h.txt"
  grep -qx 'config	data.dataset=synth' "$T/h.txt"
  grep -qx 'config	hidden=16' "$T/h.txt"
}

# refused CODE MESSAGE CONFIG-TEXT [ARGS...]: seqrec-train --config of that
# text exits CODE saying MESSAGE and leaves no model.
refused() {
  local code=$1 msg=$2
  printf "$3" > "$T/bad.conf"
  shift 3
  mkdir -p "$T/o"
  run -"$code" seqrec-train --config "$T/bad.conf" "$@" -o "$T/o/x.sqm" "$T/s.sqr"
  [[ "$output" == *"$msg"* ]] || { echo "$output"; false; }
  no_leftovers "$T/o"
}

@test "config: unknown keys, other models' keys and bad values are refused with the file and line" {
  refused 64 "bad.conf:2: unknown key 'bogus'" 'dim=16\nbogus=1\n'
  refused 64 "bad.conf:3: unknown key 'lr' (the key of --lr is train.lr)" 'dim=16\n\nlr=3\n'
  refused 64 "bad.conf:2: hidden is a setting of --model gru4rec, not of --model sasrec" 'dim=16\nhidden=3\n'
  refused 64 "bad.conf:1: bad train.lr=abc" 'train.lr=abc\n'
  refused 64 "bad.conf:2: bad dim=0" '# c\ndim=0\n'
  refused 64 "bad.conf:1: threads is not a setting of a config" 'threads=2\n'
  refused 64 "bad.conf:1: unknown model 'nope'" 'model=nope\n'
  refused 65 "bad.conf:2: not a key=value line" 'dim=16\ndim 16\n'
  refused 65 "bad.conf:1: not a key=value line" ' dim=16\n'
  # --model over the file's model: the file's keys of that model are refused
  refused 64 "bad.conf:2: hidden is a setting of --model gru4rec, not of --model sasrec" \
    'model=gru4rec\nhidden=16\n' --model sasrec
  # a model file of another model: named by the file and key
  seqrec-train --model gru4rec --epochs 1 --max-len 20 --log /dev/null -o "$T/g.sqm" "$T/s.sqr"
  run -64 seqrec-train --config "$T/g.sqm" --model sasrec -o "$T/o/x.sqm" "$T/s.sqr"
  [[ "$output" == *"g.sqm: key "*" is a setting of --model gru4rec, not of --model sasrec"* ]]
  no_leftovers "$T/o"
}

@test "config: a missing file, a bad model file and --resume are refused" {
  mkdir "$T/o"
  run -66 seqrec-train --config "$T/none.conf" -o "$T/o/x.sqm" "$T/s.sqr"
  [[ "$output" == *"none.conf: cannot open"* ]]
  seqrec-train "${TINY[@]}" --epochs 1 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  head -c 200 "$T/m.sqm" > "$T/cut.sqm"
  run -65 seqrec-train --config "$T/cut.sqm" -o "$T/o/x.sqm" "$T/s.sqr"
  [[ "$output" == *"cut.sqm"* ]]
  run -64 seqrec-train --config "$T/m.sqm" --resume "$T/m.sqm.ckpt" -o "$T/o/x.sqm" "$T/s.sqr"
  [[ "$output" == *"--config cannot be given with --resume"* ]]
  no_leftovers "$T/o"
}

@test "config: --config-keys lists every option of the model and the trainer, and each is taken" {
  run -0 seqrec-train --model gru4rec --config-keys
  [[ "$output" == *$'hidden\t--hidden'* ]]
  [[ "$output" == *$'train.lr\t--lr'* ]]
  [[ "$output" != *threads* ]]
  run -0 seqrec-train --config-keys
  [[ "$output" == *$'ln_eps\t-'* ]]
  [[ "$output" == *$'rank\t--rank'* ]]
  # the keys of a model file are the keys it lists (records aside)
  seqrec-train "${TINY[@]}" --epochs 1 --log /dev/null -o "$T/m.sqm" "$T/s.sqr"
  keys=$(printf '%s\n' "$output" | cut -f1)
  seqrec-cat --header "$T/m.sqm" | sed -n 's/^config\t\([^=]*\)=.*/\1/p' |
    grep -v -e '^model$' -e '^n_items$' -e '^data\.' -e '^seqrec\.' -e '^valid\.' -e '^train\.best_epoch$' \
      -e '^train\.epochs_done$' -e '^train\.stop$' -e '^train\.parts$' |
    while read -r k; do grep -qx "$k" <<< "$keys" || { echo "not listed: $k"; false; }; done
}

# `make man-config-keys` rewrites the page's block when this fails.
@test "config: seqrec-train(1) lists each model's keys as the option tables give them" {
  diff <(sed -n '/^\.\\" BEGIN CONFIG KEYS/,/^\.\\" END CONFIG KEYS/p' "$SEQREC_ROOT/man/man1/seqrec-train.1") \
       <(sh "$SEQREC_ROOT/pipelines/config_keys.sh" "$SEQREC_BIN/seqrec-train")
}
