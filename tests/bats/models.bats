#!/usr/bin/env bats
# The engine's contract, for every registered model at once (issue 35: one
# table instead of the same three tests in every model's file): the same
# seed and threads give the same model bytes and log, another seed others;
# a model file scores the same on 1 and 2 threads and seeds --init; a run
# resumed from its checkpoint ends with the uninterrupted run's bytes.
# A new model is one line of contract_args; a registered model without one
# fails the first test. Each model's own behaviour stays in its own file.

load helper

setup() {
  common_setup
  # 300 users, 100 items: a strong successor signal (seqrec-synth(1))
  seqrec-synth --users 300 --items 100 --seed 1 --format stream | seqrec-split 2>/dev/null > "$T/s.sqr"
}

# contract_args MODEL: the model's tiny settings | the checks it takes
# (seed, file, resume) | a model option its resumed run must refuse (the
# options are the checkpoint's); nothing for a model not in the table.
contract_args() {
  case $1 in
    sasrec)   echo "--dim 16 --ffn 32 --max-len 20 --batch 32|seed file resume|--heads 2" ;;
    bert4rec) echo "--dim 16 --ffn 32 --max-len 20 --batch 32|seed file resume|--mask-prob 0.5" ;;
    blin)     echo "--dim 16 --ffn 32 --max-len 20 --batch 32|seed file resume|--bkl-lambda 1" ;;
    elastic)  echo "--dim 16 --ffn 32 --max-len 20 --pool 4x4 --topk-experts 2 --batch 32|seed resume|--pool 8x8" ;;
    gru4rec)  echo "--dim 16 --hidden 24 --max-len 20 --batch 32|seed resume|--hidden 8" ;;
    caser)    echo "--dim 16 --nh 4 --nv 2 --batch 64|seed resume|--nh 8" ;;
    fpmc)     echo "--dim 16 --batch 64|seed resume|--dim 8" ;;
    hstu)     echo "--dim 16 --heads 2 --max-len 20 --batch 32|seed resume|--heads 4" ;;
    core)     echo "--dim 16 --ffn 32 --max-len 20 --batch 32 --target random|seed file resume|--temperature 1" ;;
    cl4srec)  echo "--dim 16 --ffn 32 --max-len 20 --batch 32|seed file resume|--cl-weight 1" ;;
    # popularity counts once: no seed, no epochs, nothing to resume
    pop)      echo "||" ;;
  esac
}

# run_contract CHECK: CHECK (seed, file or resume) for every model that
# takes it. The checks run under errexit, never inside `||` (which would
# turn errexit off inside them): the last "--model" line of the output
# names the model that failed.
run_contract() {
  local m a checks refuse
  for m in $(seqrec-train --list-models | cut -f1); do
    a=$(contract_args "$m")
    checks=${a#*|} refuse=${checks#*|} checks=${checks%%|*}
    [[ " $checks " == *" $1 "* ]] || continue
    read -r -a args <<< "${a%%|*}"
    echo "--model $m: $1"
    rm -f "$T"/*.sqm "$T"/*.ckpt
    case $1 in
      seed)
        same_seed_same_model --model "$m" "${args[@]}" --threads 2
        scores_invariant "$T/m1.sqm" ;;
      file) roundtrip_and_init --model "$m" "${args[@]}" --threads 2 ;;
      resume)
        resume_same_model --model "$m" "${args[@]}" --threads 2
        read -r -a bad <<< "$refuse"
        run -64 seqrec-train --resume "$T/r.sqm.ckpt" "${bad[@]}" "$T/s.sqr" ;;
    esac
  done
}

@test "models: every registered model has a line in the contract table" {
  for m in $(seqrec-train --list-models | cut -f1); do
    [ -n "$(contract_args "$m")" ] || { echo "no contract_args line for $m"; false; }
  done
}

@test "models: same seed and threads give the same model and log, another seed another; scores independent of threads and batch" {
  run_contract seed
}

@test "models: a model file scores the same on 1 and 2 threads and seeds --init" {
  run_contract file
}

@test "models: a run resumed from its checkpoint ends with the uninterrupted run's model and refuses other model options" {
  run_contract resume
}
