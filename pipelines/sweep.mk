# pipelines/sweep.mk - a hyper-parameter sweep of seqrec-train (issue 39):
#
#   make -j2 sweep SPLIT=beauty.split GRID='lr=1e-3,3e-4 dim=64,128 dropout=0.2,0.5'
#        [MODEL=sasrec] [EPOCHS=N] [SAMPLES=n] [SWEEP_SEED=1]
#        [SWEEP_CONFIG=FILE] [SWEEP_THREADS=1] [SWEEP_OUT=DIR] [SWEEP_BEST=3]
#
# GRID: words KEY=V1,V2,... whose KEY is a seqrec-train option (lr,
# weight-decay) or its config key (train.lr); every combination is a run
# (SAMPLES=n: n of them drawn by SWEEP_SEED, the same n for the same seed).
# Each run is seqrec-train --config RUN/run.conf: SWEEP_CONFIG's lines (the
# settings every run shares: a config file or a model file,
# seqrec-train(1) CONFIGURATION FILES), then model=MODEL,
# train.epochs=EPOCHS (when given) and the run's grid point, with
# --threads SWEEP_THREADS (default 1: -jN trains N side by side).
# Outputs in SWEEP_OUT (default repro/sweep/SPLIT's name):
#   runs/RUN/   run.conf, log.jsonl (seqrec-train --log), model.sqm (+.ckpt),
#               test.json (seqrec-metrics of the test targets), result.json
#   table.md, table.tsv  every run, best validation NDCG@10 first: its
#               settings, best epoch, valid and test HR@10 and NDCG@10, seconds
#   best.conf   the best run's config (seqrec-train --config best.conf)
#   curves.png  seqrec-plot of the SWEEP_BEST best runs
# Each run is a rule to runs/RUN/result.json: -j runs them side by side, a
# finished run is not run again, a stopped one resumes from its checkpoint
# (seqrec-train --resume), and a run whose run.conf changed starts afresh.
# pipelines/sweep.sh does the work; seqrec-train(1) SWEEPS documents it.
SWEEP_SEED ?= 1
SWEEP_THREADS ?= 1
SWEEP_BEST ?= 3
SWEEP_CONFIG ?=
# MODEL: given, else SWEEP_CONFIG's model key, else sasrec
SW_MODEL := $(if $(filter command line environment,$(origin MODEL)),$(MODEL))
SAMPLES ?=
SW_NAME := $(basename $(notdir $(SPLIT)))
SWEEP_OUT ?= repro/sweep/$(SW_NAME)
SW_OUT := $(SWEEP_OUT)
SW_BIN := $(BUILD)/bin
# EPOCHS has a default in other pipelines: only one given counts here
SW_EPOCHS := $(if $(filter command line environment,$(origin EPOCHS)),$(EPOCHS))
SW_ENV = SWEEP_BIN=$(SW_BIN) SWEEP_THREADS=$(SWEEP_THREADS)

.PHONY: sweep sweep-table sweep-plan sweep-runs
sweep: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory sweep-table

# the sweep with the programs as built (what tests/bats/sweep.bats runs)
sweep-table:
	@$(MAKE) --no-print-directory sweep-plan
	@$(MAKE) --no-print-directory sweep-runs SW_PLANNED=1

sweep-plan:
	@test -n "$(SPLIT)" || { echo "make sweep: say SPLIT=FILE (a split stream)" >&2; exit 64; }
	@test -r "$(SPLIT)" || { echo "make sweep: SPLIT=$(SPLIT): cannot read it" >&2; exit 66; }
	@$(SW_ENV) sh pipelines/sweep.sh plan "$(SW_OUT)" "$(SW_MODEL)" "$(SW_EPOCHS)" "$(SAMPLES)" \
	  "$(SWEEP_SEED)" "$(SWEEP_CONFIG)" "$(GRID)"

ifneq ($(SW_PLANNED),)
include $(SW_OUT)/runs.mk
endif

$(SW_OUT)/runs/%/result.json: $(SW_OUT)/runs/%/run.conf $(SPLIT)
	@$(SW_ENV) sh pipelines/sweep.sh run "$(SW_OUT)/runs/$*" "$(SPLIT)"

sweep-runs: $(SWEEP_RUNS:%=$(SW_OUT)/runs/%/result.json)
	@$(SW_ENV) SWEEP_BEST=$(SWEEP_BEST) sh pipelines/sweep.sh table "$(SW_OUT)"
