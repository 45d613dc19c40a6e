# tests/gpu/gpu.mk - `make gpu-check`: the CUDA backend checked on a real
# GPU, sized for one borrowed for ten minutes (HACKING.md, "GPU checks").
#
#   make gpu-pack     builds .gpu/pack.tar.xz here (tests/gpu/pack.sh): the
#                     programs, the unit runner, libseqrec-cuda.so for sm_90,
#                     the shared objects the GPU machine lacks, the data
#   make gpu-check    the pack, then the check: on this machine when it has
#                     a GPU, else the one command to run on the GPU machine
#                     (carrying .gpu): it writes $OUT/summary.txt
#   make bench-gpu    gpu-check's bench, attn and models parts (doc/bench.md,
#                     "GPU"): seqrec against PyTorch by epoch, and every
#                     attention kind against PyTorch's fused attention at
#                     N = 256 ... 16384 (bench-attn-gpu.csv)
#   make gpu-check-dry  the check's command here on the simulated device
#                     (tests/gpu/dry.sh), tiny data: a part that would fail
#                     for a reason of its own fails here first
#   GPU_PARTS=...     the parts to (re)run: parity sanitize train nccl score bench bf16 attn
#                     (the default), models (every model's epoch on its paper's data,
#                     GPU against the CPU: only when named)
GPU_PARTS ?=
.PHONY: gpu-pack gpu-check gpu-check-dry bench-gpu
gpu-pack:
	tests/gpu/pack.sh $(DATA_MIRROR)
gpu-check: gpu-pack
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
	  rm -rf /tmp/seqrec-gpu && mkdir -p /tmp/seqrec-gpu && \
	  tar -xJf .gpu/pack.tar.xz -C /tmp/seqrec-gpu && /tmp/seqrec-gpu/pack/check.sh $(GPU_PARTS); \
	else \
	  echo "no GPU here: on the GPU machine (carry .gpu) run"; \
	  echo "  mkdir -p /tmp/g && tar -xJf .gpu/pack.tar.xz -C /tmp/g && /tmp/g/pack/check.sh $(GPU_PARTS)"; \
	fi
gpu-check-dry: gpu-pack $(SIM_SO)
	tests/gpu/dry.sh $(SIM_SO) $(GPU_PARTS)
# bench-gpu: the bench part (seqrec on the GPU, the PyTorch twins of SASRec
# and BERT4Rec on the same GPU in the same run, seqrec on the CPU for (a)): bench.csv in the
# logs; the attn part (attn_bench on the GPU for every kind, attn_torch.py's
# scaled_dot_product_attention): bench-attn-gpu.csv; and the models part
# (every model's epoch on its paper's data, GPU against the CPU):
# bench-models.csv
bench-gpu:
	$(MAKE) gpu-check GPU_PARTS="bench attn models"

# gpu-repro-splits: every reproduction's split made here, in its repro/
# folder (the GPU machine has no data mirror), for tests/gpu/repro.sh: a
# reproduction's runs on a borrowed GPU within GPU_MINUTES, carried there
# as repro/NAME and back as $OUT/repro.tar.gz (HACKING.md, "GPU checks")
.PHONY: gpu-repro-splits
gpu-repro-splits: $(PROGS)
	$(DATA_MAKE) ml-1m-part beauty sports beauty-bert4rec
	$(MAKE) --no-print-directory $(ELASTIC_OUT)/$(ELASTIC_DATA).split $(LINREC_OUT)/data.split \
	  $(foreach d,$(HYDRAREC_DATASETS),$(call hydrarec_out,$(d))/data.split) \
	  $(BLIN_DATASETS:%=$(BLIN_OUT)/%.split) $(FPAREC_DATASETS:%=$(FPAREC_OUT)/%.split)
	du -sh repro/*
