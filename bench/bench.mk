# bench/bench.mk - `make bench` and its parts. Results under bench/out/:
# data.csv (lines "bench,metric,value") and the attention sweep's attn.csv,
# attn_slopes.csv, attn_time.png, attn_mem.png; nothing here is a pass/fail
# test.
BENCH_OUT := bench/out

.PHONY: bench bench-data bench-attn
bench: bench-data bench-attn

bench-data: deps $(BUILD)/bench/sgemm_peak
	@$(MAKE) --no-print-directory all
	@mkdir -p $(BENCH_OUT)
	@rm -f $(BENCH_OUT)/data.csv
	@. bench/timing.sh && machine_lines $(BENCH_OUT)/data.csv data $(BUILD)/bench/sgemm_peak
	@echo "bench-data: preprocess throughput (1M-interaction synthetic log)"
	@sh bench/bench-preprocess.sh $(BUILD)/bin $(BENCH_OUT)/data.csv
	@echo "bench-data: stream throughput (seqrec-cat --verify, seqrec-pad)"
	@sh bench/bench-stream.sh $(BUILD)/bin $(BENCH_OUT)/data.csv
	@echo "bench-data: results in $(BENCH_OUT)/data.csv"

# Attention: seconds per training step and peak memory of one attention
# sublayer for every kind, N = 64 .. 16384, d = 64 and 128 (one process per
# configuration, see bench/attn_bench.c and bench/bench-attn.sh; ATTN_*
# variables there narrow the sweep). Writes attn.csv, attn_slopes.csv,
# attn_time.png and attn_mem.png under $(BENCH_OUT).
$(BUILD)/bench/attn_bench: $(BUILD)/bench/attn_bench.o $(BUILD)/libseqrec.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $^ $(LDLIBS_ALL) -o $@

# Timings must not overlap: under `make -j bench` the sweep waits for
# bench-data.
ifneq ($(filter bench,$(MAKECMDGOALS)),)
bench-attn: | bench-data
endif
bench-attn: deps $(BUILD)/bench/attn_bench $(BUILD)/bench/sgemm_peak
	@mkdir -p $(BENCH_OUT)
	@sh bench/bench-attn.sh $(BUILD)/bench/attn_bench $(BENCH_OUT) $(BUILD)/bench/sgemm_peak

-include $(BUILD)/bench/attn_bench.d

# ELASTIC's leakage (bench/elastic_leak.c): the model trained on every
# position (what seqrec-train refuses), on one random prefix a user an epoch
# (its default) and on every prefix, same seed: training loss and
# validation NDCG@10 by epoch into $(BENCH_OUT)/elastic_leak.csv. On the
# synthetic data by default; LEAK_DATA=SPLIT LEAK_EPOCHS=N LEAK_OPTS="dim=64
# max_len=256" for another.
LEAK_EPOCHS ?= 20
LEAK_OPTS ?= dim=32 ffn=64 max_len=50 pool=8x8 topk_experts=4 dropout=0.2
LEAK_DATA ?=
$(BUILD)/bench/elastic_leak: $(BUILD)/bench/elastic_leak.o $(BUILD)/libseqrec.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $^ $(LDLIBS_ALL) -o $@

.PHONY: bench-elastic-leak
bench-elastic-leak: deps all $(BUILD)/bench/elastic_leak
	@mkdir -p $(BENCH_OUT)
	@data="$(LEAK_DATA)"; if [ -z "$$data" ]; then data=$(BENCH_OUT)/leak_synth.split; \
	  $(BUILD)/bin/seqrec-synth --users 2000 --items 500 --seed 1 --format stream \
	  | $(BUILD)/bin/seqrec-split > $$data; fi; \
	  $(BUILD)/bench/elastic_leak $$data $(LEAK_EPOCHS) $(LEAK_OPTS) > $(BENCH_OUT)/elastic_leak.csv
	@awk -F, 'NR > 1 { last[$$1] = $$0; if ($$4 > best[$$1]) best[$$1] = $$4 } \
	  END { for (t in last) printf "%s: last epoch %s, best valid NDCG@10 %s\n", t, last[t], best[t] }' \
	  $(BENCH_OUT)/elastic_leak.csv

-include $(BUILD)/bench/elastic_leak.d

# Every vectorised kernel's throughput on the instruction set of this build
# (bench/isa_ops.c); make isa-test runs it for each set the host can run.
$(BUILD)/bench/isa_ops: $(BUILD)/bench/isa_ops.o $(BUILD)/libseqrec.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $^ $(LDLIBS_ALL) -o $@

-include $(BUILD)/bench/isa_ops.d
