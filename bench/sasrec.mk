# bench/sasrec.mk - `make bench-sasrec`: SASRec epoch speed with CE and BCE,
# C vs PyTorch, the GEMM share and GFLOP/s of the C epochs against
# OpenBLAS's sgemm peak (bench/sgemm_peak.c), and 1 vs 2 thread scaling,
# on Amazon Beauty (fetched by data/, DATA_MIRROR=DIR to copy it instead).
# EPOCHS (default 2), C_BCE_EPOCHS (default 10: the C BCE runs) and THREADS
# (default 2), given on the command line or in
# the environment, reach bench/bench-sasrec.sh.
.PHONY: bench-sasrec bench-score bench-bert4rec
bench: bench-sasrec bench-score bench-bert4rec
BENCH_BEAUTY := data/raw/Beauty.txt.gz

$(BUILD)/bench/sgemm_peak: $(BUILD)/bench/sgemm_peak.o $(BUILD)/libseqrec.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $^ $(LDLIBS_ALL) -o $@

# Beauty's split for the benches (remade every time: cheap, and the build
# that makes it may have changed)
BENCH_BEAUTY_SPLIT = @$(MAKE) --no-print-directory all && mkdir -p bench/out && \
  { [ -f $(BENCH_BEAUTY) ] || $(DATA_MAKE) beauty; } && \
  $(BUILD)/bin/seqrec-preprocess --format s3rec $(BENCH_BEAUTY) | \
  $(BUILD)/bin/seqrec-split -o bench/out/beauty.split

bench-sasrec: deps $(BUILD)/bench/sgemm_peak
	$(BENCH_BEAUTY_SPLIT)
	@rm -f bench/out/sasrec.csv
	sh bench/bench-sasrec.sh $(BUILD)/bin bench/out/sasrec.csv bench/out/beauty.split $(BUILD)/bench/sgemm_peak
	@echo "bench-sasrec: results in bench/out/sasrec.csv"

# make bench-bert4rec: BERT4Rec epoch speed, C against its PyTorch twin
# (bench/bert4rec_torch.py) on Beauty, EPOCHS (default 2) and THREADS
# (default 2) (bench/bench-bert4rec.sh).
bench-bert4rec: deps
	$(BENCH_BEAUTY_SPLIT)
	@rm -f bench/out/bert4rec.csv
	sh bench/bench-bert4rec.sh $(BUILD)/bin bench/out/bert4rec.csv bench/out/beauty.split
	@echo "bench-bert4rec: results in bench/out/bert4rec.csv"

# make bench-score: seqrec-score over every Beauty user at 1 and THREADS
# (default 2) threads, ranks and top-10 lists, users a minute, and the
# scoring GEMM against OpenBLAS's sgemm on its shape (bench/bench-score.sh).
bench-score: deps $(BUILD)/bench/sgemm_peak
	$(BENCH_BEAUTY_SPLIT)
	@rm -f bench/out/score.csv
	sh bench/bench-score.sh $(BUILD)/bin bench/out/score.csv bench/out/beauty.split $(BUILD)/bench/sgemm_peak
	@echo "bench-score: results in bench/out/score.csv"

-include $(BUILD)/bench/sgemm_peak.d
