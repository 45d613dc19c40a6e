# bench/catalogue.mk - `make bench-catalogue` (issue 38): SASRec's epoch
# time and peak memory against the catalogue's size (10k, 100k, 1M and 10M
# items of seqrec-synth) for full CE, the sampled softmax (K = 128, 1024,
# 4096) and gBCE, and the validation quality each loss reaches on the
# synthetic data within a fixed budget of training seconds
# (bench/bench-catalogue.sh). Into $(BENCH_OUT)/catalogue.csv (after the
# machine lines) and catalogue.png. Not part of `make bench` (pause other
# work first: the runs share the cores). Knobs, on the command line or in
# the environment (bench/bench-catalogue.sh says each): CAT_ITEMS,
# CAT_USERS (default 500: the data stays small, the point is the
# catalogue's cost), CAT_LEN, CAT_LOSSES, CAT_SAMPLER, CAT_CE_MAX,
# CAT_EPOCHS, CAT_QUALITY_ITEMS, CAT_QUALITY_USERS, CAT_BUDGET,
# CAT_MODEL_ARGS.
.PHONY: bench-catalogue
bench-catalogue: deps $(BUILD)/bench/sgemm_peak
	@$(MAKE) --no-print-directory all
	@mkdir -p $(BENCH_OUT)
	sh bench/bench-catalogue.sh $(BUILD)/bin $(BENCH_OUT) $(BUILD)/bench/sgemm_peak
	@echo "bench-catalogue: results in $(BENCH_OUT)/catalogue.csv and catalogue.png"

# `make bench-losses` (issue 38): the quality of each loss against full CE
# at equal epochs on DATASETS (parallel.mk's names and splits: default
# beauty ml-1m-part), SASRec at the README's settings
# (bench/bench-losses.sh: LOSS_SET, LOSS_EPOCHS, LOSS_MODEL_ARGS). Into
# $(BENCH_OUT)/losses.csv.
.PHONY: bench-losses
bench-losses: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p $(BENCH_OUT)
	$(foreach d,$(DATASETS),$(call parallel_split,$(d)))
	sh bench/bench-losses.sh $(BUILD)/bin $(BENCH_OUT) \
	  $(foreach d,$(DATASETS),$(d):$(call parallel_maxlen,$(d)):$(call parallel_splitfile,$(d)))
	@echo "bench-losses: results in $(BENCH_OUT)/losses.csv"
