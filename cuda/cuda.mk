# cuda/cuda.mk - the CUDA build hook, included by the top-level Makefile.
#
# CUDA=auto (default) builds the backend when nvcc is on PATH, CUDA=1 forces
# it, CUDA=0 disables it. The backend itself arrives with the training engine;
# until then there is nothing to compile and CUDA_OBJ stays empty.
CUDA ?= auto
NVCC ?= nvcc
ifeq ($(CUDA),auto)
CUDA := $(if $(shell command -v $(NVCC) 2>/dev/null),1,0)
endif
CUDA_SRC := $(wildcard cuda/*.cu)
ifeq ($(CUDA),1)
CUDA_OBJ := $(CUDA_SRC:%.cu=$(BUILD)/%.o)
CUDA_LDLIBS := $(if $(CUDA_SRC),-L$(dir $(shell command -v $(NVCC)))../lib64 -lcudart -lcublas -lstdc++,)
$(BUILD)/cuda/%.o: cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -Ilib -c $< -o $@
else
CUDA_OBJ :=
CUDA_LDLIBS :=
endif
