# pipelines/nightly.mk - the nightly job: yesterday's model on today's log.
#
#   make nightly NIGHTLY_LOG=today.tsv NIGHTLY_MODEL=model.sqm NIGHTLY_DIR=/srv/reco
#
# builds the programs, then execs seqrec-nightly (pipelines/nightly.sh; every
# setting, step and exit status is in seqrec-nightly(1)). It scores the top
# NIGHTLY_TOPK items of every user whose history changed since the last
# publication (all users when the model, the top-K options or the item map
# changed; NIGHTLY_FULL=1: always), and publishes NIGHTLY_DIR/pub/topK-DATE.tsv
# with the link NIGHTLY_DIR/latest switched to it atomically. Relative paths
# are the caller's (with make -C, the directory make was started in).
#
#   NIGHTLY_LOG         today's raw log: the full history (required)
#   NIGHTLY_MODEL       the model file (required)
#   NIGHTLY_DIR         the job's directory (required)
#   NIGHTLY_LOG_KIND    full (a shrunken log is refused, 65), delta or replace
#   NIGHTLY_PREPROCESS  seqrec-preprocess options for the log (e.g. --format tsv)
#   NIGHTLY_TOPK        items per user (10)
#   NIGHTLY_SCORE       more seqrec-score options (e.g. --include-history)
#   NIGHTLY_EXCLUDE     a file of items never recommended (original ids)
#   NIGHTLY_ALLOW       a file of the only items recommended (the exclusions win)
#   NIGHTLY_SHARDS      shards in parallel (2)
#   NIGHTLY_LAUNCH      a launcher command ('mpirun -np 4', 'srun -n 4'): the
#                       scoring runs as one job of it, its ranks the shards
#                       and rank 0 writing them all, instead of NIGHTLY_SHARDS
#                       local processes; the publication is the same bytes.
#                       NIGHTLY_THREADS / NIGHTLY_SHARDS threads a rank
#   NIGHTLY_THREADS     cores in all, divided among the shards (all)
#   NIGHTLY_FULL        1: score every user
#   NIGHTLY_FINETUNE    1: fine-tune first; NIGHTLY_TRAIN its options (--epochs 1),
#                       NIGHTLY_HOLDOUT its held-out users (0.05)
#   NIGHTLY_WAIT        seconds to wait for a running job (0: exit 75 at once)
#   NIGHTLY_DATE        the date stamp of the publication (today, UTC)
#   NIGHTLY_KEEP        days of publications kept (30; 0: all)
#
# GNU make exits 2 whatever the job's status: the job's last stderr line
# says it ("nightly: exit 75: another run holds the lock ..."). Cron can run
# the program itself and get the status:
#   30 2 * * * /opt/seqrec/build/bin/seqrec-nightly NIGHTLY_LOG=/data/log.tsv \
#     NIGHTLY_MODEL=/srv/reco/model.sqm NIGHTLY_DIR=/srv/reco >> /srv/reco/cron.out 2>&1
#
# The recipe execs the job, so that make's SIGTERM reaches it, and names
# make's pid: for SIGINT and SIGHUP make forwards nothing but waits, and the
# job's watchdog sees the signal in make's blocked mask.

NIGHTLY_VARS := NIGHTLY_LOG NIGHTLY_MODEL NIGHTLY_DIR NIGHTLY_LOG_KIND NIGHTLY_PREPROCESS \
  NIGHTLY_TOPK NIGHTLY_SCORE NIGHTLY_SHARDS NIGHTLY_LAUNCH NIGHTLY_THREADS NIGHTLY_FULL NIGHTLY_FINETUNE \
  NIGHTLY_TRAIN NIGHTLY_HOLDOUT NIGHTLY_WAIT NIGHTLY_DATE NIGHTLY_KEEP NIGHTLY_BIN NIGHTLY_EXCLUDE \
  NIGHTLY_ALLOW
export $(NIGHTLY_VARS)

.PHONY: nightly
nightly:
	@$(MAKE) --no-print-directory all
	@cd '$(or $(PWD),$(CURDIR))' && NIGHTLY_MAKE_PID=$$PPID exec '$(CURDIR)/$(BUILD)/bin/seqrec-nightly'
