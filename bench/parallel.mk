# bench/parallel.mk - `make bench-parallel` (issue 36): SASRec's epoch on one
# process (--threads 1, --threads 2) and under mpirun (-np 1 and -np 2 of
# --threads 1), per dataset; seconds an epoch, the speedup over mpirun -np 1
# and whether each launcher run wrote the model bytes of the one process
# with as many parts (bench/bench-parallel.sh). Into
# $(BENCH_OUT)/parallel.csv (after the machine lines) and parallel.png.
# Not part of `make bench` (pause other work first: the runs share the
# cores). Knobs, on the command line or in the environment:
#   DATASETS  (default "beauty ml-1m-part") any of beauty (bench-sasrec's
#             split, Amazon Beauty), ml-1m-part, ml-1m, ml-100k (MovieLens
#             zips, 5-core; fetched by data/, DATA_MIRROR=DIR copies them)
#             and synth (seqrec-synth --seed 7, seconds); max length 50
#             (beauty, synth) or 200 (MovieLens), as the pipelines train them
#   EPOCHS    (default 2) epochs a run; the least train_seconds is kept
#   MODEL_ARGS, MPIRUN, MPIRUN_FLAGS  (bench/bench-parallel.sh)
# DATASETS reaches data/'s make too (a command-line variable), where it
# only names the targets a plain `make -C data` lists.
.PHONY: bench-parallel
DATASETS ?= beauty ml-1m-part
parallel_movielens := ml-1m-part ml-1m ml-100k
parallel_maxlen = $(if $(filter $(parallel_movielens),$(1)),200,50)
parallel_splitfile = $(if $(filter beauty,$(1)),bench/out/beauty.split,$(BENCH_OUT)/$(1).split)
# one recipe line a dataset: its split
define parallel_split
$(if $(filter beauty,$(1)),$(BENCH_BEAUTY_SPLIT),$(if $(filter synth,$(1)),\
@$(BUILD)/bin/seqrec-synth --seed 7 --format stream | \
  $(BUILD)/bin/seqrec-split --leave-one-out -o $(BENCH_OUT)/synth.split,$(if $(filter $(parallel_movielens),$(1)),\
@$(DATA_MAKE) $(1) && $(BUILD)/bin/seqrec-preprocess --core 5 --dataset $(1) data/raw/$(1).zip | \
  $(BUILD)/bin/seqrec-split --leave-one-out -o $(BENCH_OUT)/$(1).split,\
@echo "bench-parallel: DATASETS: $(1) is none of beauty $(parallel_movielens) synth" >&2; exit 64)))

endef

bench-parallel: deps $(BUILD)/bench/sgemm_peak
	@$(MAKE) --no-print-directory all
	@mkdir -p $(BENCH_OUT)
	$(foreach d,$(DATASETS),$(call parallel_split,$(d)))
	sh bench/bench-parallel.sh $(BUILD)/bin $(BENCH_OUT) $(BUILD)/bench/sgemm_peak \
	  $(foreach d,$(DATASETS),$(d):$(call parallel_maxlen,$(d)):$(call parallel_splitfile,$(d)))
	@echo "bench-parallel: results in $(BENCH_OUT)/parallel.csv and parallel.png"
