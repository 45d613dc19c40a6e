#!/bin/sh
# runs.sh OUTDIR - the engine's reference runs (issue 9): short seeded runs
# of every backbone and a spread of attention kinds on the synthetic data,
# one thread. For each run it writes OUTDIR/NAME.log (the epoch lines
# without the timings and MRR@10) and OUTDIR/NAME.top (the top 5 items and
# scores of every user, %.9g: the trained parameters to the last bit that
# matters).
# tests/golden/engine/ holds the model files and top-5 lists this script
# wrote on the engine as it was before the engine refactor, and runs/ its
# logs and top-5 lists since issue 16's dropout generator (engine.bats says
# why); tests/bats/engine.bats reruns it and requires the same bytes. The
# programs come from PATH.
set -eu
out=$1
mkdir -p "$out"
seqrec-synth --users 120 --items 50 --seed 3 --format stream | seqrec-split 2>/dev/null > "$out/data.sqr"
TINY="--dim 8 --ffn 16 --max-len 10 --batch 32 --threads 1 --epochs 3 --dropout 0.3 --seed 5"
run() {
  name=$1; shift
  seqrec-train $TINY "$@" --log "$out/$name.raw" -o "$out/$name.sqm" "$out/data.sqr"
  # MRR@10 joined the line later (issue 15): not in the recorded logs
  sed -e 's/,"seconds".*$/}/' -e 's/,"mrr@10":[0-9.]*//' "$out/$name.raw" > "$out/$name.log"
  seqrec-score -m "$out/$name.sqm" --topk 5 --include-history "$out/data.sqr" > "$out/$name.top"
  rm -f "$out/$name.raw" "$out/$name.sqm.ckpt"
}
run sasrec-softmax --model sasrec --attn softmax
run sasrec-softmax-bce --model sasrec --attn softmax --loss bce --neg 2 --target last
run sasrec-linrec --model sasrec --attn linrec --heads 2
run sasrec-fpositional --model sasrec --attn fpositional --rank 3 --heads 2
run sasrec-mixing --model sasrec --attn mixing
run bert4rec-softmax --model bert4rec --attn softmax --heads 2
run bert4rec-hydra --model bert4rec --attn hydra
run bert4rec-softmax-causal --model bert4rec --attn softmax --heads 2 --causal
run bert4rec-hydra-causal --model bert4rec --attn hydra --causal
seqrec-train --model pop --threads 1 --log "$out/pop.log" -o "$out/pop.sqm" "$out/data.sqr"
seqrec-score -m "$out/pop.sqm" --topk 5 --include-history "$out/data.sqr" > "$out/pop.top"
rm -f "$out/data.sqr"
