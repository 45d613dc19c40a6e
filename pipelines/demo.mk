# pipelines/demo.mk - `make demo`: the whole pipeline on the embedded
# synthetic dataset (seqrec-synth), end to end, in about a minute on 2 cores.
#
#   synth -> preprocess (--stats, 5-core) -> split (leave-one-out) -> pad -> cat
#   -> train (popularity, SASRec) -> score -> metrics: a small table
#
# Outputs land in demo-out/ (ignored by git). DEMO_EPOCHS (15): SASRec's
# epochs; DEMO_BIN, DEMO_OUT: the programs and the output folder.
DEMO_OUT := demo-out
DEMO_BIN := $(BUILD)/bin
DEMO_EPOCHS ?= 15

.PHONY: demo
demo: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p $(DEMO_OUT)
	@echo "== 1. seqrec-synth: 2000 users with latent interests and Markov transitions"
	$(DEMO_BIN)/seqrec-synth --seed 1 --format text -o $(DEMO_OUT)/log.tsv
	@head -n 3 $(DEMO_OUT)/log.tsv
	@echo "== 2. seqrec-preprocess: 5-core, chronological, dense ids (Table 1 statistics)"
	$(DEMO_BIN)/seqrec-preprocess --format tsv --rating-col 3 --time-col 4 --core 5 \
	  --dataset synth --map $(DEMO_OUT)/map.tsv --stats -o $(DEMO_OUT)/seq.sqr $(DEMO_OUT)/log.tsv
	@echo "== 3. seqrec-split: leave-one-out (validation = second-to-last, test = last)"
	$(DEMO_BIN)/seqrec-split --leave-one-out -o $(DEMO_OUT)/split.sqr $(DEMO_OUT)/seq.sqr
	$(DEMO_BIN)/seqrec-cat $(DEMO_OUT)/split.sqr --no-ts | head -n 3
	@echo "== 4. seqrec-pad: RandomPad to 50, two views per user (Blin), printed by seqrec-cat"
	$(DEMO_BIN)/seqrec-pad --len 50 --mode randompad --copies 2 --seed 7 $(DEMO_OUT)/split.sqr \
	  | $(DEMO_BIN)/seqrec-cat | head -n 4
	@echo "== 5. the stream's provenance: seqrec-cat --header (first lines)"
	$(DEMO_BIN)/seqrec-pad --len 50 $(DEMO_OUT)/split.sqr | $(DEMO_BIN)/seqrec-cat --header | head -n 12
	@echo "== 6. seqrec-train: popularity, then SASRec (causal softmax attention, full-softmax CE)"
	$(DEMO_BIN)/seqrec-train --model pop -o $(DEMO_OUT)/pop.sqm $(DEMO_OUT)/split.sqr
	$(DEMO_BIN)/seqrec-train --model sasrec --loss ce --dim 32 --ffn 32 --layers 2 --heads 1 --max-len 50 \
	  --dropout 0.2 --epochs $(DEMO_EPOCHS) --eval-every 5 --seed 1 --threads 2 -o $(DEMO_OUT)/sasrec.sqm $(DEMO_OUT)/split.sqr
	@echo "== 7. seqrec-score | seqrec-metrics: test targets ranked against all items"
	@for m in pop sasrec; do \
	  $(DEMO_BIN)/seqrec-score -m $(DEMO_OUT)/$$m.sqm --target test $(DEMO_OUT)/split.sqr \
	    | $(DEMO_BIN)/seqrec-metrics -k 10 --json > $(DEMO_OUT)/$$m.json || exit 1; \
	done
	@printf '\n%-12s %8s %8s\n' model HR@10 NDCG@10
	@for m in pop sasrec; do \
	  printf '%-12s %8s %8s\n' $$m \
	    $$(sed 's/.*"hr@10": \([0-9.]*\).*/\1/' $(DEMO_OUT)/$$m.json) \
	    $$(sed 's/.*"ndcg@10": \([0-9.]*\).*/\1/' $(DEMO_OUT)/$$m.json); \
	done
	@echo "demo: done (outputs in $(DEMO_OUT)/)"
