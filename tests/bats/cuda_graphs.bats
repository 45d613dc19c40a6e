#!/usr/bin/env bats
# seqrec-train --cuda-graphs on the simulated device (tests/sim): each step's
# forward and backward one CUDA graph of its padded size, recorded, captured
# and replayed (cuda/graph.cu). The replays give the bytes of the same padded
# steps run without graphs (SEQREC_CUDA_GRAPHS=eager), the padding leaves the
# loss of the unpadded run, and what cannot run as graphs is refused up front.
# The real GPU's timings are `make gpu-check`'s (its graphs part).

load helper

setup() {
  sim_setup
  # histories of at least 10: the full batches fill one bucket, so the
  # epoch's 5 steps record, capture twice and replay
  seqrec-synth --users 60 --items 40 --min-len 10 --seed 1 --format stream |
    seqrec-split 2>/dev/null > "$T/s.sqr"
  SMALL=(--dim 8 --ffn 8 --max-len 8 --layers 1 --heads 1 --batch 12 --threads 2 --epochs 1)
  TINY=("${SMALL[@]}" --loss ce --device cuda)
}

@test "cuda_graphs: SASRec replays its steps with the bytes of the padded steps without graphs, the unpadded loss" {
  run --separate-stderr seqrec-train "${TINY[@]}" --cuda-graphs --log "$T/g.log" -o "$T/g.sqm" "$T/s.sqr"
  [ "$status" -eq 0 ]
  [[ "$stderr" =~ --cuda-graphs:\ 2\ batch\ sizes\ captured,\ ([0-9]+)\ steps\ replayed ]]
  [ "${BASH_REMATCH[1]}" -ge 1 ]
  SEQREC_CUDA_GRAPHS=eager seqrec-train "${TINY[@]}" --cuda-graphs -o "$T/e.sqm" "$T/s.sqr" 2>/dev/null
  cmp "$T/g.sqm" "$T/e.sqm"
  # the padding sequences add nothing but zeros: the loss of the plain run
  seqrec-train "${TINY[@]}" --log "$T/p.log" -o "$T/p.sqm" "$T/s.sqr" 2>/dev/null
  awk -v a="$(log_loss "$T/g.log")" -v b="$(log_loss "$T/p.log")" \
    'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-5 * b) }'
  run -0 seqrec-score --device cuda -m "$T/g.sqm" --target test "$T/s.sqr"
  # its checkpoint resumes on the CPU (without graphs)
  run -0 seqrec-train --resume "$T/g.sqm.ckpt" --epochs 2 --device cpu -o "$T/g.sqm" "$T/s.sqr"
}

@test "cuda_graphs: BERT4Rec with LinRec attention, and SASRec's BCE with negatives, replay with the bytes of their padded steps" {
  for opts in "--model bert4rec --attn linrec" "--loss bce"; do
    # shellcheck disable=SC2086
    seqrec-train "${TINY[@]}" $opts --cuda-graphs -o "$T/g.sqm" "$T/s.sqr" 2> "$T/err"
    grep -Eq 'captured, [1-9][0-9]* steps replayed' "$T/err"
    # shellcheck disable=SC2086
    SEQREC_CUDA_GRAPHS=eager seqrec-train "${TINY[@]}" $opts --cuda-graphs -o "$T/e.sqm" \
      "$T/s.sqr" 2>/dev/null
    cmp "$T/g.sqm" "$T/e.sqm"
  done
}

@test "cuda_graphs: Blin's two views (full and sampled softmax) and CL4SRec's three replay with the bytes of their padded steps, the unpadded losses" {
  # each view's sequences stay in place, the padding after them; a step's
  # loss is its values' weighted sum, made on the device (sq_ctx_loss_mix)
  for opts in "--model blin" "--model blin --bkl-lambda 0" "--model blin --softmax sampled --neg 4" \
    "--model cl4srec" "--model cl4srec --cl-negatives distinct --cl-sim dot"; do
    # shellcheck disable=SC2086
    seqrec-train "${TINY[@]}" $opts --epochs 2 --cuda-graphs --log "$T/g.log" -o "$T/g.sqm" \
      "$T/s.sqr" 2> "$T/err"
    grep -Eq 'captured, [1-9][0-9]* steps replayed' "$T/err"
    # shellcheck disable=SC2086
    SEQREC_CUDA_GRAPHS=eager seqrec-train "${TINY[@]}" $opts --epochs 2 --cuda-graphs \
      -o "$T/e.sqm" "$T/s.sqr" 2>/dev/null
    cmp "$T/g.sqm" "$T/e.sqm"
    # shellcheck disable=SC2086
    seqrec-train "${TINY[@]}" $opts --epochs 2 --log "$T/p.log" -o "$T/p.sqm" "$T/s.sqr" 2>/dev/null
    paste <(log_loss "$T/g.log") <(log_loss "$T/p.log") |
      awk '{ d = $1 - $2; if (d < 0) d = -d; if (!($1 > 0 && d <= 1e-5 * $2)) bad = 1 }
           END { exit bad || NR != 2 }'
  done
}

@test "cuda_graphs: ELASTIC (query network, mean query, no IMR) replays with the bytes of its padded steps, the unpadded loss" {
  # its query network runs each level on the most groups of the bucket
  # (elastic.h FIXED LEVELS); one random prefix a user, two epochs: the
  # buckets repeat
  for opts in "" "--query mean" "--no-imr"; do
    # shellcheck disable=SC2086
    seqrec-train "${TINY[@]}" --model elastic --epochs 2 $opts --cuda-graphs --log "$T/g.log" \
      -o "$T/g.sqm" "$T/s.sqr" 2> "$T/err"
    grep -Eq 'captured, [1-9][0-9]* steps replayed' "$T/err" || { cat "$T/err"; false; }
    # shellcheck disable=SC2086
    seqrec-train "${TINY[@]}" --model elastic --epochs 2 $opts --cuda-graphs -o "$T/a.sqm" \
      "$T/s.sqr" 2>/dev/null
    cmp "$T/g.sqm" "$T/a.sqm"
    # shellcheck disable=SC2086
    SEQREC_CUDA_GRAPHS=eager seqrec-train "${TINY[@]}" --model elastic --epochs 2 $opts \
      --cuda-graphs -o "$T/e.sqm" "$T/s.sqr" 2>/dev/null
    cmp "$T/g.sqm" "$T/e.sqm"
    # shellcheck disable=SC2086
    seqrec-train "${TINY[@]}" --model elastic --epochs 2 $opts --log "$T/p.log" -o "$T/p.sqm" \
      "$T/s.sqr" 2>/dev/null
    paste <(log_loss "$T/g.log") <(log_loss "$T/p.log") | awk -v o="$opts" '
      { d = $1 - $2; if (d < 0) d = -d; if (!($1 > 0 && d <= 1e-3 * $2)) bad = 1; n++ }
      END { if (bad || n != 2) { print "elastic " o ": losses differ"; exit 1 } }'
  done
}

@test "cuda_graphs: the sampled softmax and gBCE (one set a position, a sequence, a batch), and --lazy-adam, replay with the bytes of their padded steps, the unpadded loss" {
  # (a sequence's set: the padded batch's per-entry copies, one call)
  for opts in "--loss sampled-softmax --neg 6 --neg-sampler mixed" "--loss gbce --neg 6 --neg-share batch" \
              "--loss sampled-softmax --neg 6 --neg-sampler mixed --neg-share sequence --lazy-adam"; do
    # shellcheck disable=SC2086
    seqrec-train "${SMALL[@]}" --device cuda $opts --epochs 2 --cuda-graphs --log "$T/g.log" \
      -o "$T/g.sqm" "$T/s.sqr" 2> "$T/err"
    grep -Eq 'captured, [1-9][0-9]* steps replayed' "$T/err"
    # shellcheck disable=SC2086
    SEQREC_CUDA_GRAPHS=eager seqrec-train "${SMALL[@]}" --device cuda $opts --epochs 2 \
      --cuda-graphs -o "$T/e.sqm" "$T/s.sqr" 2>/dev/null
    cmp "$T/g.sqm" "$T/e.sqm"
    # shellcheck disable=SC2086
    seqrec-train "${SMALL[@]}" --device cuda $opts --epochs 2 --log "$T/p.log" -o "$T/p.sqm" \
      "$T/s.sqr" 2>/dev/null
    paste <(log_loss "$T/g.log") <(log_loss "$T/p.log") |
      awk '{ d = $1 - $2; if (d < 0) d = -d; if (!($1 > 0 && d <= 1e-5 * $2)) bad = 1 }
           END { exit bad || NR != 2 }'
  done
}

@test "cuda_graphs: refused without a GPU (64, no model); --max-loss stops (70)" {
  run -64 seqrec-train "${SMALL[@]}" --loss ce --device cpu --cuda-graphs -o "$T/m.sqm" "$T/s.sqr"
  [[ "$output" == *"--cuda-graphs needs --device cuda"* ]]
  [ ! -e "$T/m.sqm" ] && [ ! -e "$T/m.sqm.ckpt" ]
  # the update in the graph is gated on the device; the host stops as ever
  run -70 seqrec-train "${TINY[@]}" --cuda-graphs --max-loss 0.01 -o "$T/m.sqm" "$T/s.sqr"
  [[ "$output" == *"loss above --max-loss"* ]]
  [ ! -e "$T/m.sqm" ]
}
