# bench/gpuhost.mk - `make bench-gpu-host`: the host's own work an epoch of
# seqrec-train --device cuda, on this machine and without a GPU: the
# simulated device with its kernels skipped (SEQREC_SIM_HOST_ONLY,
# bench/bench-gpu-host.sh), on gpu-check's bench configs (Beauty and
# ml-1m-part as the GPU pack makes them). A real GPU's epoch takes at least
# this long on this host. Into $(BENCH_OUT)/gpu-host.csv. Knob: EPOCHS.
.PHONY: bench-gpu-host
bench-gpu-host: deps $(SIM_SO)
	$(BENCH_BEAUTY_SPLIT)
	@$(DATA_MAKE) ml-1m-part
	$(BUILD)/bin/seqrec-preprocess data/raw/ml-1m-part.zip | \
	  $(BUILD)/bin/seqrec-split --leave-one-out -o $(BENCH_OUT)/ml-1m-part-all.split
	sh bench/bench-gpu-host.sh $(BUILD)/bin $(SIM_SO) $(BENCH_OUT) bench/out/beauty.split \
	  $(BENCH_OUT)/ml-1m-part-all.split
	@echo "bench-gpu-host: results in $(BENCH_OUT)/gpu-host.csv"
