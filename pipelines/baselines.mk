# pipelines/baselines.mk - the papers' baselines (issue 14: GRU4Rec, Caser,
# FPMC, CORE, HSTU, CL4SRec) next to SASRec and popularity, trained and
# scored the same way:
#
#   make -j2 reproduce-baselines DATA_MIRROR=../shared/data \
#     [BASELINES_DATA=beauty|ml-1m-part] [BASELINES_EPOCHS=200] [BASELINES_RUNS="gru4rec caser"]
#
# Protocol: FPARec's (PROTOCOLS.md): leave-one-out, full ranking over every
# item (history not excluded), test HR@10 / NDCG@10 of the checkpoint with
# the best validation NDCG@10; every run batch 128, Adam lr 1e-3 beta2 0.98,
# softmax cross-entropy, validation every epoch, patience 10, seed 1,
# BASELINES_THREADS threads (default 1: two runs side by side with -j2).
# Each model keeps its own defaults (seqrec-train(1): the papers' or
# RecBole's); the sequence models read the newest BASELINES_MAXLEN items
# (Beauty 50, ml-1m-part 200), Caser its 5 and FPMC its 1. SASRec is
# FPARec's: d 64, ffn 64, 2 layers, 1 head, dropout 0.5. The models that
# train every prefix by default (caser, fpmc, core: RecBole's samples) train
# one random prefix per user an epoch here (--target random: the same
# samples over the epochs, an epoch a few times to a hundred times
# cheaper) with patience BASELINES_RANDOM_PATIENCE (default 20).
# BASELINES_EPOCHS caps every run (the table gives the epochs each ran and
# the best one).
# Outputs in repro/baselines/DATA/: per run .log, .sqm, .json; table.md;
# then doc/repro/baselines.md's included tables (pipelines/repro_docs.sh).
BASELINES_DATA ?= beauty
BASELINES_EPOCHS ?= 200
BASELINES_THREADS ?= 1
BASELINES_RUNS ?= pop sasrec gru4rec caser fpmc core hstu cl4srec
BASELINES_OUT := repro/baselines/$(BASELINES_DATA)
BASELINES_BIN := $(BUILD)/bin
baselines_maxlen_beauty := 50
baselines_maxlen_ml-1m-part := 200
BASELINES_MAXLEN ?= $(baselines_maxlen_$(BASELINES_DATA))
BASELINES_RANDOM_PATIENCE ?= 20
BASELINES_COMMON = --loss ce --batch 128 --lr 1e-3 --beta2 0.98 --epochs $(BASELINES_EPOCHS) \
  --eval-every 1 --seed 1 --threads $(BASELINES_THREADS)
BASELINES_RANDOM = --target random --patience $(BASELINES_RANDOM_PATIENCE)
bl_args_sasrec = --model sasrec --dim 64 --ffn 64 --layers 2 --heads 1 --dropout 0.5 \
  --max-len $(BASELINES_MAXLEN) --patience 10
bl_args_gru4rec = --model gru4rec --max-len $(BASELINES_MAXLEN) --patience 10
bl_args_caser = --model caser $(BASELINES_RANDOM)
bl_args_fpmc = --model fpmc $(BASELINES_RANDOM)
bl_args_core = --model core --max-len $(BASELINES_MAXLEN) $(BASELINES_RANDOM)
bl_args_hstu = --model hstu --max-len $(BASELINES_MAXLEN) --patience 10
bl_args_cl4srec = --model cl4srec --max-len $(BASELINES_MAXLEN) --patience 10

.PHONY: reproduce-baselines baselines-table
reproduce-baselines: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory baselines-table
	@$(REPRO_DOCS) doc/repro/baselines.md

$(BASELINES_OUT):
	mkdir -p $@
$(BASELINES_OUT)/data.split: | $(BASELINES_OUT)
	$(if $(filter beauty,$(BASELINES_DATA)),$(DATA_MAKE) beauty && \
	  $(BASELINES_BIN)/seqrec-preprocess --format s3rec --stats data/raw/Beauty.txt.gz \
	  > $(BASELINES_OUT)/data.seq 2> $(BASELINES_OUT)/stats.txt,$(DATA_MAKE) $(BASELINES_DATA) && \
	  $(BASELINES_BIN)/seqrec-preprocess --core 5 --stats --dataset $(BASELINES_DATA) \
	  -o $(BASELINES_OUT)/data.seq data/raw/$(BASELINES_DATA).zip > $(BASELINES_OUT)/stats.txt)
	$(BASELINES_BIN)/seqrec-split --leave-one-out -o $@ $(BASELINES_OUT)/data.seq

$(BASELINES_OUT)/pop.json: $(BASELINES_OUT)/data.split
	$(REPRO_RUN) $(BASELINES_BIN)/seqrec-train --model pop -o $(BASELINES_OUT)/pop.sqm $< 2> $(BASELINES_OUT)/pop.log
	$(REPRO_DONE) $(BASELINES_OUT)/pop.sqm || exit 0; \
	$(REPRO_SCORE) $(BASELINES_BIN)/seqrec-score -m $(BASELINES_OUT)/pop.sqm --target test $< \
	  | $(BASELINES_BIN)/seqrec-metrics -k 10 --json > $@.tmp && mv $@.tmp $@

# One trained run: $(1) the model.
define baselines_run
$(BASELINES_OUT)/$(1).json: $(BASELINES_OUT)/data.split
	$(REPRO_RUN) $(BASELINES_BIN)/seqrec-train $(bl_args_$(1)) $(BASELINES_COMMON) \
	  --log $(BASELINES_OUT)/$(1).log -o $(BASELINES_OUT)/$(1).sqm $$<
	$(REPRO_DONE) $(BASELINES_OUT)/$(1).sqm || exit 0; \
	$(REPRO_SCORE) $(BASELINES_BIN)/seqrec-score -m $(BASELINES_OUT)/$(1).sqm --target test $$< \
	  | $(BASELINES_BIN)/seqrec-metrics -k 10 --json > $$@.tmp && mv $$@.tmp $$@
endef
$(foreach r,$(filter-out pop,$(BASELINES_RUNS)),$(eval $(call baselines_run,$(r))))

# The table: test HR@10 and NDCG@10, epochs run, the best epoch, mean
# seconds an epoch (training and validation, BASELINES_THREADS threads).
baselines-table: $(BASELINES_RUNS:%=$(BASELINES_OUT)/%.json)
	@{ echo "| model | HR@10 | NDCG@10 | epochs | best | s/epoch |"; \
	  echo "| --- | --- | --- | --- | --- | --- |"; \
	  for r in $(BASELINES_RUNS); do \
	    j=$(BASELINES_OUT)/$$r.json; l=$(BASELINES_OUT)/$$r.log; \
	    hr=$$(sed -n 's/.*"hr@10": *\([0-9.]*\).*/\1/p' $$j); \
	    nd=$$(sed -n 's/.*"ndcg@10": *\([0-9.]*\).*/\1/p' $$j); \
	    ep=$$(grep -c '"epoch"' $$l || true); \
	    best=$$(sed -n 's/.*"epoch":\([0-9]*\).*"ndcg@10":\([0-9.]*\).*/\2 \1/p' $$l | sort -g | tail -n 1 | cut -d' ' -f2); \
	    sec=$$(sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p' $$l | awk '{s += $$1; n++} END {if (n) printf "%.1f", s / n}'); \
	    echo "| $$r | $$hr | $$nd | $${ep:-0} | $${best:--} | $${sec:--} |"; \
	  done; } | tee $(BASELINES_OUT)/table.md
