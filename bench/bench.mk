# bench/bench.mk - `make bench` and its parts. Results are CSV lines
# "bench,metric,value" under bench/out/; nothing here is a pass/fail test.
BENCH_OUT := bench/out

.PHONY: bench bench-data
bench: bench-data

bench-data: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p $(BENCH_OUT)
	@rm -f $(BENCH_OUT)/data.csv
	@echo "bench-data: preprocess throughput (1M-interaction synthetic log)"
	@sh bench/bench-preprocess.sh $(BUILD)/bin $(BENCH_OUT)/data.csv
	@echo "bench-data: stream throughput (seqrec-cat --verify, seqrec-pad)"
	@sh bench/bench-stream.sh $(BUILD)/bin $(BENCH_OUT)/data.csv
	@echo "bench-data: results in $(BENCH_OUT)/data.csv"
