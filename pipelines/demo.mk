# pipelines/demo.mk - `make demo`: the whole pipeline on the embedded
# synthetic dataset (seqrec-synth), end to end, in a few seconds.
#
#   synth -> preprocess (--stats, 5-core) -> split (leave-one-out) -> pad -> cat
#
# Outputs land in demo-out/ (ignored by git).
DEMO_OUT := demo-out
DEMO_BIN := $(BUILD)/bin

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
	@echo "== 5. the stream's provenance: seqrec-cat --header"
	$(DEMO_BIN)/seqrec-pad --len 50 $(DEMO_OUT)/split.sqr | $(DEMO_BIN)/seqrec-cat --header
	@echo "demo: done (training joins this pipeline with the training engine)"
