# bench/sasrec.mk - `make bench-sasrec`: SASRec epoch speed, C vs PyTorch,
# on Amazon Beauty (fetched by data/, DATA_MIRROR=DIR to copy it instead).
.PHONY: bench-sasrec
bench: bench-sasrec
BENCH_BEAUTY := data/raw/Beauty.txt.gz
bench-sasrec: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p bench/out
	@[ -f $(BENCH_BEAUTY) ] || $(DATA_MAKE) beauty
	$(BUILD)/bin/seqrec-preprocess --format s3rec $(BENCH_BEAUTY) | $(BUILD)/bin/seqrec-split -o bench/out/beauty.split
	@rm -f bench/out/sasrec.csv
	sh bench/bench-sasrec.sh $(BUILD)/bin bench/out/sasrec.csv bench/out/beauty.split
	@echo "bench-sasrec: results in bench/out/sasrec.csv"
