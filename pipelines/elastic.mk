# pipelines/elastic.mk - ELASTIC (elastic.txt) Table 2 (the ML-1M rows of
# SASRec, BERT4Rec, LinRec and ELASTIC), Table 3 (ablations), Figure 5 (the
# interest pool and top-k sweeps, with the key usage rate) and Figure 3
# (step time, memory and inference cost against SASRec by length), with
# the paper's protocol (../shared/PROTOCOLS.md, ELASTIC): ML-1M 5-core,
# leave-one-out, full ranking over every item, test NDCG/HR/MRR @10 and @20
# of the checkpoint with the best validation NDCG@10 (patience 10), cross-
# entropy, Adam 1e-3, N = 256, interest pool 16x16 with top-8 experts.
#
#   make -j2 reproduce-elastic DATA_MIRROR=../shared/data [EPOCHS=20]
#
# Data: ELASTIC_DATA=ml-1m-part (the default) is the development mirror's
# partial ML-1M, users 1-2999 only (2,999 users, 3,266 items after 5-core):
# NOT the paper's data, and the tables say so. ELASTIC_DATA=ml-1m fetches
# the complete ML-1M zip from GroupLens (6,040 users, 3,416 items after
# 5-core, as the paper's Table 1). seqrec-preprocess --core 5 reads the zip
# (ELASTIC_RAW, default data/raw/$(ELASTIC_DATA).zip) in place; DIR/stats.tsv
# keeps its --stats.
#
# Models: d = 64, ffn 256, 2 layers, 2 heads (RecBole's defaults, on which
# the paper's baselines run); dropout 0.5 and Adam beta2 0.999 (RecBole's
# SASRec and Adam) for SASRec, LinRec (--attn linrec) and ELASTIC; BERT4Rec
# dropout 0.2, mask 0.2 (RecBole's). Each trains with its default target:
# SASRec and LinRec every position, BERT4Rec the cloze task, ELASTIC one
# random prefix a user an epoch (its interest tokens see the whole input:
# training every position would leak); ELASTIC_TARGET=last trains ELASTIC
# on every prefix (RecBole's protocol, ~160x the samples on ML-1M).
#
# Batch: the paper's 2048 is RecBole's default. With one sample a user an
# epoch (ELASTIC's random target, SASRec's all positions) it would give 2
# optimiser steps an epoch on ml-1m-part's 3k users (3 on ML-1M's 6k), so
# few that 200 epochs barely train; ELASTIC_BATCH (default 256) gives 12
# (24). Set ELASTIC_BATCH=2048 for the paper's number.
#
# Scoring: `seqrec-score --candidates full -x`: every item, the items of
# the user's history left out, as RecBole's full-sort evaluation masks them
# (the paper's baselines ran in RecBole; ML-1M users never rate a movie
# twice, so a history item is never the answer). ELASTIC_SCORE="--target
# test --candidates full" keeps them (as seqrec-train's validation does).
# ELASTIC runs also write RUN.experts.tsv (--expert-stats:
# expert<TAB>count) for Figures 4 and 5.
#
# EPOCHS caps every run (default 200); ELASTIC_RUNS="sasrec elastic" runs a
# subset (the tables mark the others "not run"); ELASTIC_THREADS threads a
# run (default 1: two 1-thread runs side by side use 2 cores better than one
# 2-thread run; -j runs them side by side). ELASTIC_MODEL is the one place
# that names the model (--model elastic). Outputs in
# repro/elastic/$(ELASTIC_DATA)/: the split and its stats, the runs' logs,
# models, metrics and expert counts, table2.md, table3.md, fig5.md,
# fig5.png, fig4.md and fig4.png (the load per expert of the ELASTIC run);
# Figure 3 in repro/elastic/fig3/ (`make elastic-fig3`, run alone
# after the others: see pipelines/len_cost.sh; ELASTIC_FIG3_NS,
# ELASTIC_FIG3_USERS, ELASTIC_FIG3_BATCH and ELASTIC_FIG3_ITEMS size it);
# then doc/repro/elastic.md's included tables (pipelines/repro_docs.sh).
ELASTIC_DATA ?= ml-1m-part
ELASTIC_OUT ?= repro/elastic/$(ELASTIC_DATA)
ELASTIC_RAW ?= data/raw/$(ELASTIC_DATA).zip
ELASTIC_FIG3_OUT ?= repro/elastic/fig3
ELASTIC_BIN := $(BUILD)/bin
ELASTIC_THREADS ?= 1
ELASTIC_BATCH ?= 256
ELASTIC_MAXLEN ?= 256
ELASTIC_TARGET ?=
EPOCHS ?= 200
# Early stopping after ELASTIC_PATIENCE validations without a better NDCG@10
# (the paper: 10). An epoch of ELASTIC's random prefixes is one sample a
# user (RecBole's epochs, every prefix, are ~160x as many): 10 such epochs
# can pass on the plateau at popularity's level before it learns, so a
# capped run may want more (ELASTIC_PATIENCE=100).
ELASTIC_PATIENCE ?= 10
ELASTIC_MODEL ?= --model elastic
ELASTIC_TRAIN = --loss ce --batch $(ELASTIC_BATCH) --lr 1e-3 --beta2 0.999 --epochs $(EPOCHS) \
  --patience $(ELASTIC_PATIENCE) --eval-every 1 --seed 1 --threads $(ELASTIC_THREADS)
ELASTIC_COMMON = --dim 64 --ffn 256 --layers 2 --heads 2 --max-len $(ELASTIC_MAXLEN) $(ELASTIC_TRAIN)
# The baselines of Table 2 that are not transformers: d 64, their own
# defaults otherwise (seqrec-train(1)), ELASTIC_TRAIN's training options;
# FPMC trains one random prefix a user an epoch (its default, every prefix,
# is ~160x the samples an epoch on ML-1M).
elastic_full_fpmc = --model fpmc --dim 64 --target random $(ELASTIC_TRAIN)
elastic_full_gru4rec = --model gru4rec --dim 64 --max-len $(ELASTIC_MAXLEN) $(ELASTIC_TRAIN)
elastic_full_hstu = --model hstu --dim 64 --layers 2 --heads 2 --max-len $(ELASTIC_MAXLEN) \
  $(ELASTIC_TRAIN)
ELASTIC_SCORE ?= --target test --candidates full -x
ELASTIC_POOLS := 8x8 16x16 32x32 64x64 128x128 256x256 512x512
ELASTIC_TOPKS := 4 8 16

# The options of each run. elastic_args POOL,TOPK: an ELASTIC run.
elastic_args = $(ELASTIC_MODEL) --dropout 0.5 --pool $(1) --topk-experts $(2) \
  $(if $(ELASTIC_TARGET),--target $(ELASTIC_TARGET))
elastic_args_sasrec = --model sasrec --attn softmax --dropout 0.5
# SASRec trained as ELASTIC is (one random prefix a user an epoch, its
# newest position): the same samples, so the rows compare the models and
# not the training protocols (SASRec's every-position training sees ~160x
# the targets an epoch)
elastic_args_sasrecrand = --model sasrec --attn softmax --dropout 0.5 --target random
elastic_args_bert4rec = --model bert4rec --attn softmax --dropout 0.2 --mask-prob 0.2
elastic_args_linrec = --model sasrec --attn linrec --dropout 0.5
elastic_args_elastic = $(call elastic_args,16x16,8)
elastic_args_noquery = $(call elastic_args,16x16,8) --query mean
elastic_args_noimr = $(call elastic_args,16x16,8) --no-imr
elastic_args_nodisp = $(call elastic_args,16x16,8) --no-dispatcher
# the decision the paper leaves open: Algorithm 1's plain gather of the
# experts (the sub-keys and the query network get no gradient) against
# our default, each expert scaled by the softmax of its score
elastic_args_gather = $(call elastic_args,16x16,8) --expert-weights none
$(foreach p,$(filter-out 16x16,$(ELASTIC_POOLS)),$(eval elastic_args_pool$(p) = $$(call elastic_args,$(p),8)))
$(foreach k,$(filter-out 8,$(ELASTIC_TOPKS)),$(eval elastic_args_topk$(k) = $$(call elastic_args,16x16,$(k))))
# runs whose scoring counts the experts
ELASTIC_EXPERT_RUNS := elastic noquery nodisp gather $(ELASTIC_POOLS:%=pool%) $(ELASTIC_TOPKS:%=topk%)

ELASTIC_ALL_RUNS := fpmc gru4rec sasrec sasrecrand bert4rec linrec hstu elastic noquery noimr nodisp gather \
  $(filter-out pool16x16,$(ELASTIC_POOLS:%=pool%)) $(filter-out topk8,$(ELASTIC_TOPKS:%=topk%))
ELASTIC_RUNS ?= $(ELASTIC_ALL_RUNS)
ELASTIC_JSON := $(ELASTIC_RUNS:%=$(ELASTIC_OUT)/%.json)

$(ELASTIC_OUT):
	mkdir -p $@
$(ELASTIC_OUT)/$(ELASTIC_DATA).split: | $(ELASTIC_OUT)
	$(ELASTIC_BIN)/seqrec-preprocess --core 5 --stats --dataset $(ELASTIC_DATA) \
	  -o $(ELASTIC_OUT)/$(ELASTIC_DATA).seq $(ELASTIC_RAW) > $(ELASTIC_OUT)/stats.tsv
	$(ELASTIC_BIN)/seqrec-split --leave-one-out -o $@ $(ELASTIC_OUT)/$(ELASTIC_DATA).seq

# One run: $(1) its name.
define elastic_run
$(ELASTIC_OUT)/$(1).json: $(ELASTIC_OUT)/$(ELASTIC_DATA).split
	$(REPRO_RUN) $(ELASTIC_BIN)/seqrec-train $(or $(elastic_full_$(1)),$(elastic_args_$(1)) $(ELASTIC_COMMON)) \
	  --log $(ELASTIC_OUT)/$(1).log -o $(ELASTIC_OUT)/$(1).sqm $$<
	$(REPRO_DONE) $(ELASTIC_OUT)/$(1).sqm || exit 0; \
	$(REPRO_SCORE) $(ELASTIC_BIN)/seqrec-score -m $(ELASTIC_OUT)/$(1).sqm $(ELASTIC_SCORE) --threads $(ELASTIC_THREADS) \
	  $(if $(filter $(1),$(ELASTIC_EXPERT_RUNS)),--expert-stats $(ELASTIC_OUT)/$(1).experts.tsv) $$< \
	  | $(ELASTIC_BIN)/seqrec-metrics -k 10,20 --json > $$@.tmp && mv $$@.tmp $$@
endef
$(foreach r,$(ELASTIC_ALL_RUNS),$(eval $(call elastic_run,$(r))))

# Paper cells, HR@10/HR@20/NDCG@10/NDCG@20/MRR@10/MRR@20 on ML-1M
# (elastic.txt Tables 2 and 3); Figure 5's, NDCG@10/usage%: the text gives
# only ELASTIC's own NDCG@10 and the usage at 512x512.
ELASTIC_PAPER := fpmc:0.5233/0.6760/0.3220/0.3606/0.2599/0.2705 \
  gru4rec:0.6382/0.7603/0.4033/0.4343/0.3300/0.3386 \
  sasrec:0.6606/0.7712/0.4190/0.4471/0.3435/0.3512 \
  sasrecrand:0.6606/0.7712/0.4190/0.4471/0.3435/0.3512 \
  bert4rec:0.5389/0.6623/0.3182/0.3494/0.2497/0.2583 \
  linrec:0.6556/0.7689/0.4158/0.4444/0.3412/0.3490 \
  hstu:0.6586/0.7662/0.4090/0.4364/0.3312/0.3388 \
  elastic:0.6619/0.7767/0.4256/0.4546/0.3517/0.3597 \
  noquery:0.6558/0.7677/0.4097/0.4381/0.3328/0.3406 \
  noimr:0.6515/0.7699/0.4132/0.4433/0.3387/0.3470 \
  nodisp:0.6366/0.7443/0.4099/0.4370/0.3390/0.3464
ELASTIC_FIG5_PAPER := elastic:0.4256/- pool512x512:-/55.76
# The paper's training budget (the tables' budget column,
# pipelines/run_budget.sh): up to 500 epochs at batch 2048, every target an
# epoch (not one random prefix a user).
ELASTIC_BUDGET := --epochs>=500 --batch=2048 --target!=random
# The line under each table: what data the cells come from.
elastic_note_ml-1m = Data: the complete ML-1M, 5-core, as the paper (6,040 users and 3,416 items \
  in its Table 1; ours in $(ELASTIC_OUT)/stats.tsv).
elastic_note_ml-1m-part = Data: ml-1m-part is NOT the paper data: it holds the users 1-2999 of ML-1M \
  only (2,999 of 6,040); the paper cells are on the complete ML-1M, so the ratios compare unlike \
  data (ELASTIC_DATA=ml-1m runs on the complete set).
# ... and the numbers of ours (from seqrec-preprocess --stats).
elastic_stats = if [ -s $(ELASTIC_OUT)/stats.tsv ]; then awk -F'\t' '{ v[$$1] = $$2 } END { \
  printf "Ours: %s users, %s items, %s interactions, average length %s (5-core).\n", \
  v["users"], v["items"], v["interactions"], v["avg_length"] }' $(ELASTIC_OUT)/stats.tsv; fi
ELASTIC_NOTE = $(or $(elastic_note_$(ELASTIC_DATA)),Data: $(ELASTIC_DATA) (not the paper data).) \
  Batch $(ELASTIC_BATCH) (the paper: 2048). Each run trained the epochs of its row (EPOCHS caps a run when it is made; best: the epoch of the best validation NDCG@10).

.PHONY: reproduce-elastic elastic-runs elastic-tables elastic-fig3
reproduce-elastic: deps
	@$(MAKE) --no-print-directory all
	@$(DATA_MAKE) $(ELASTIC_DATA)
	@$(MAKE) --no-print-directory elastic-runs
	@$(MAKE) --no-print-directory elastic-fig3
	@$(MAKE) --no-print-directory elastic-tables
	@$(REPRO_DOCS) doc/repro/elastic.md
elastic-runs: $(ELASTIC_JSON)

# The tables and Figure 5 from whatever runs are done (the others: "not run").
elastic-tables:
	@mkdir -p $(ELASTIC_OUT)
	@{ sh pipelines/paper_table.sh --mrr --budget "$(ELASTIC_BUDGET)" "ELASTIC Table 2, $(ELASTIC_DATA) (test, full ranking)" \
	  $(ELASTIC_OUT) "$(ELASTIC_PAPER)" fpmc gru4rec sasrec sasrecrand bert4rec linrec hstu elastic; \
	  echo '$(ELASTIC_NOTE)'; $(elastic_stats); echo; } > $(ELASTIC_OUT)/table2.md
	@{ sh pipelines/paper_table.sh --mrr --budget "$(ELASTIC_BUDGET)" "ELASTIC Table 3, $(ELASTIC_DATA): w/o Query Net (--query mean), w/o IMR (--no-imr), w/o Dispatcher (--no-dispatcher); gather: --expert-weights none (Algorithm 1)" \
	  $(ELASTIC_OUT) "$(ELASTIC_PAPER)" elastic noquery noimr nodisp gather; \
	  echo '$(ELASTIC_NOTE)'; $(elastic_stats); echo; } > $(ELASTIC_OUT)/table3.md
	@sh pipelines/elastic_fig5.sh $(ELASTIC_OUT) "$(ELASTIC_POOLS)" "$(ELASTIC_TOPKS)" "$(ELASTIC_FIG5_PAPER)"
	@sh pipelines/elastic_fig4.sh $(ELASTIC_OUT) elastic
	@cat $(ELASTIC_OUT)/table2.md $(ELASTIC_OUT)/table3.md $(ELASTIC_OUT)/fig5.md $(ELASTIC_OUT)/fig4.md
	@if [ -s $(ELASTIC_FIG3_OUT)/fig3.md ]; then cat $(ELASTIC_FIG3_OUT)/fig3.md; fi

# Figure 3, on synthetic long sequences (pipelines/len_cost.sh): kept
# once made; remove $(ELASTIC_FIG3_OUT) to measure again.
ELASTIC_FIG3_NS ?= 64 128 256 512 1024
ELASTIC_FIG3_USERS ?= 256
ELASTIC_FIG3_ITEMS ?= 1000
ELASTIC_FIG3_BATCH ?= 64
ELASTIC_FIG3_SASREC ?= --model sasrec --attn softmax --target random
ELASTIC_FIG3_ELASTIC ?= $(ELASTIC_MODEL) --pool 32x32 --topk-experts 16
elastic-fig3: $(ELASTIC_FIG3_OUT)/fig3.md
$(ELASTIC_FIG3_OUT)/fig3.md:
	SEQREC_BIN=$(ELASTIC_BIN) FIG3_NS="$(ELASTIC_FIG3_NS)" FIG3_USERS=$(ELASTIC_FIG3_USERS) \
	  FIG3_ITEMS=$(ELASTIC_FIG3_ITEMS) FIG3_BATCH=$(ELASTIC_FIG3_BATCH) FIG3_THREADS=$(ELASTIC_THREADS) \
	  FIG3_SASREC="$(ELASTIC_FIG3_SASREC)" FIG3_ELASTIC="$(ELASTIC_FIG3_ELASTIC)" \
	  sh pipelines/len_cost.sh $(ELASTIC_FIG3_OUT)
