# pipelines/leaderboard.mk - every registered model on one split, at its
# own defaults and one shared protocol, in one table (issue 34):
#
#   make -j2 leaderboard DATA=beauty DATA_MIRROR=../shared/data [EPOCHS=200]
#   make leaderboard DATA=path/to/my.split EPOCHS=20 MODELS="sasrec cl4srec"
#
# DATA: beauty (Amazon Beauty, S3-Rec's file), ml-1m-part, ml-1m, ml-100k
# (MovieLens zips, 5-core), synth (seqrec-synth --seed 7: 2000 users, 500
# items), each split leave-one-out; or the path of any split (or padded)
# stream, used as it is.
# Protocol: every model of `seqrec-train --list-models` (MODELS narrows)
# with its defaults (seqrec-train(1): the papers' or RecBole's settings,
# loss, length and batch), trained at most EPOCHS epochs (default 200) with
# validation every epoch and early stopping on validation NDCG@10 after
# LEADERBOARD_PATIENCE epochs without a gain (default 10), seed 1,
# LEADERBOARD_THREADS threads (default 1: -j2 trains two side by side);
# the checkpoint of the best validation NDCG@10 is scored on the test targets with full ranking over
# every item (the history not excluded), as FPARec's protocol
# (PROTOCOLS.md). LEADERBOARD_ARGS adds options to every run (options
# every model takes, as --lr: pop has no --max-len).
# Outputs in repro/leaderboard/NAME/ (LEADERBOARD_OUT=DIR elsewhere): per model .log (the epoch lines),
# .sqm, .json (seqrec-metrics), table.md (pipelines/leaderboard.sh: HR@10,
# NDCG@10, MRR@10, epochs, seconds an epoch, peak memory) and quality.png
# (test NDCG@10 against training seconds). In the default folder a run
# refreshes doc/repro/leaderboard.md's table of its data (repro_docs.sh).
EPOCHS ?= 200
LEADERBOARD_PATIENCE ?= 10
LEADERBOARD_THREADS ?= 1
LEADERBOARD_ARGS ?=
LB_NAME := $(if $(wildcard $(DATA)),$(basename $(notdir $(DATA))),$(DATA))
LEADERBOARD_OUT ?= repro/leaderboard/$(LB_NAME)
LB_OUT := $(LEADERBOARD_OUT)
LB_BIN := $(BUILD)/bin
ifneq ($(filter leaderboard leaderboard-table,$(MAKECMDGOALS)),)
ifeq ($(DATA),)
$(error make leaderboard: say DATA=beauty|ml-1m-part|ml-1m|ml-100k|synth|FILE)
endif
# the models: asked of the trainer, built by then (leaderboard builds all
# before its sub-make for the table)
ifneq ($(filter leaderboard-table,$(MAKECMDGOALS)),)
MODELS ?= $(shell $(LB_BIN)/seqrec-train --list-models 2>/dev/null | cut -f1)
endif
endif
LB_COMMON = --epochs $(EPOCHS) --patience $(LEADERBOARD_PATIENCE) --eval-every 1 --seed 1 \
  --threads $(LEADERBOARD_THREADS) $(LEADERBOARD_ARGS)

.PHONY: leaderboard leaderboard-table
leaderboard: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory leaderboard-table

$(LB_OUT):
	mkdir -p $@

# The split: a file as it is, or a dataset's recipe.
$(LB_OUT)/data.split: | $(LB_OUT)
ifneq ($(wildcard $(DATA)),)
	ln -sf $(abspath $(DATA)) $@
else ifeq ($(DATA),beauty)
	$(DATA_MAKE) beauty
	$(LB_BIN)/seqrec-preprocess --format s3rec data/raw/Beauty.txt.gz \
	  | $(LB_BIN)/seqrec-split --leave-one-out -o $@.tmp && mv $@.tmp $@
else ifeq ($(DATA),synth)
	$(LB_BIN)/seqrec-synth --seed 7 --format stream \
	  | $(LB_BIN)/seqrec-split --leave-one-out -o $@.tmp && mv $@.tmp $@
else ifneq ($(filter ml-1m-part ml-1m ml-100k,$(DATA)),)
	$(DATA_MAKE) $(DATA)
	$(LB_BIN)/seqrec-preprocess --core 5 --dataset $(DATA) data/raw/$(DATA).zip \
	  | $(LB_BIN)/seqrec-split --leave-one-out -o $@.tmp && mv $@.tmp $@
else
	@echo "make leaderboard: DATA=$(DATA) is neither a file nor beauty, ml-1m-part, ml-1m, ml-100k or synth" >&2; exit 66
endif

# One model's run: trained (the log kept), its best checkpoint scored on
# the test targets.
$(LB_OUT)/%.json: $(LB_OUT)/data.split
	@rm -f $(LB_OUT)/$*.log.tmp
	$(LB_BIN)/seqrec-train --model $* $(LB_COMMON) --log $(LB_OUT)/$*.log.tmp \
	  -o $(LB_OUT)/$*.sqm $< && mv $(LB_OUT)/$*.log.tmp $(LB_OUT)/$*.log
	$(LB_BIN)/seqrec-score -m $(LB_OUT)/$*.sqm --target test $< \
	  | $(LB_BIN)/seqrec-metrics -k 10 --json > $@.tmp && mv $@.tmp $@

leaderboard-table: $(MODELS:%=$(LB_OUT)/%.json)
	@sh pipelines/leaderboard.sh "$(LB_OUT)" "$(LB_NAME)" $(MODELS)
ifeq ($(LB_OUT),repro/leaderboard/$(LB_NAME))
	@$(REPRO_DOCS) doc/repro/leaderboard.md
endif
