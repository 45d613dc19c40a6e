# bench/bench.mk - `make bench` and its parts. Results under bench/out/:
# data.csv (lines "bench,metric,value") and the attention sweep's attn.csv,
# attn_slopes.csv, attn_time.png, attn_mem.png; nothing here is a pass/fail
# test.
BENCH_OUT := bench/out

.PHONY: bench bench-data bench-attn
bench: bench-data bench-attn

bench-data: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p $(BENCH_OUT)
	@rm -f $(BENCH_OUT)/data.csv
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
	$(CC) $(CFLAGS_ALL) $^ $(LDLIBS_ALL) $(CUDA_LDLIBS) -o $@

# Timings must not overlap: under `make -j bench` the sweep waits for
# bench-data.
ifneq ($(filter bench,$(MAKECMDGOALS)),)
bench-attn: | bench-data
endif
bench-attn: deps $(BUILD)/bench/attn_bench
	@mkdir -p $(BENCH_OUT)
	@sh bench/bench-attn.sh $(BUILD)/bench/attn_bench $(BENCH_OUT)

-include $(BUILD)/bench/attn_bench.d
