# pipelines/nightly.mk - the nightly job: yesterday's model on today's log.
#
#   make nightly NIGHTLY_LOG=today.tsv NIGHTLY_MODEL=model.sqm NIGHTLY_DIR=/srv/reco
#
# scores the top NIGHTLY_TOPK items of every user whose history changed since
# the last published run (NIGHTLY_FULL=1: every user), in NIGHTLY_SHARDS
# shards side by side, and publishes NIGHTLY_DIR/pub/topK-DATE.tsv with the
# link NIGHTLY_DIR/latest switched to it atomically. Users and items keep
# their dense ids from day to day through NIGHTLY_DIR/ids.map
# (seqrec-preprocess --map-in); items the model does not know are dropped,
# or (NIGHTLY_FINETUNE=1) get new ids and the model is fine-tuned on them
# (seqrec-train --init). A lock keeps runs from overlapping; a failed run
# exits non-zero and leaves the last publication in place. Every knob:
#
#   NIGHTLY_LOG         today's raw log (required)
#   NIGHTLY_MODEL       the model file (required)
#   NIGHTLY_DIR         the job's directory (required)
#   NIGHTLY_PREPROCESS  seqrec-preprocess options for the log (e.g. --format tsv)
#   NIGHTLY_TOPK        items per user (10)
#   NIGHTLY_SHARDS      shards in parallel (2)
#   NIGHTLY_THREADS     cores in all, divided among the shards (all)
#   NIGHTLY_FULL        1: score every user
#   NIGHTLY_FINETUNE    1: fine-tune first; NIGHTLY_TRAIN its options (--epochs 1)
#   NIGHTLY_WAIT        seconds to wait for a running job (0: exit 75 at once)
#   NIGHTLY_DATE        the date stamp of the publication (today, UTC)
#
# A crontab line (02:30 every night, the log of the day before):
#   30 2 * * * make -C /opt/seqrec nightly NIGHTLY_LOG=/data/log.tsv \
#     NIGHTLY_MODEL=/srv/reco/model.sqm NIGHTLY_DIR=/srv/reco >> /srv/reco/cron.out 2>&1
#
# The steps are pipelines/nightly.sh; each logs one JSON line.

NIGHTLY_VARS := NIGHTLY_LOG NIGHTLY_MODEL NIGHTLY_DIR NIGHTLY_PREPROCESS NIGHTLY_TOPK \
  NIGHTLY_SHARDS NIGHTLY_THREADS NIGHTLY_FULL NIGHTLY_FINETUNE NIGHTLY_TRAIN NIGHTLY_WAIT \
  NIGHTLY_DATE
export $(NIGHTLY_VARS)

.PHONY: nightly
nightly:
	@$(MAKE) --no-print-directory all
	NIGHTLY_BIN=$(CURDIR)/$(BUILD)/bin sh pipelines/nightly.sh
