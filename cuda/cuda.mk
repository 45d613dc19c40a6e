# cuda/cuda.mk - the CUDA build hook, included by the top-level Makefile.
#
# CUDA=auto (default) builds the backend when nvcc is on PATH, CUDA=1 forces
# it, CUDA=0 disables it (lib/ops/gpu_stub.c then answers "no CUDA backend").
# Code for sm_80 and sm_90 (A100, H100/H200), plus PTX for newer devices.
CUDA ?= auto
NVCC ?= nvcc
ifeq ($(CUDA),auto)
CUDA := $(if $(shell command -v $(NVCC) 2>/dev/null),1,0)
endif
CUDA_SRC := $(wildcard cuda/*.cu)
ifeq ($(CUDA),1)
CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC))))
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
CUDA_OBJ := $(CUDA_SRC:%.cu=$(BUILD)/%.o)
CUDA_LDLIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
CFLAGS_ALL += -DSEQREC_CUDA=1
$(BUILD)/cuda/%.o: cuda/%.cu lib/ops/gpu.h lib/util/err.h
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 $(CUDA_ARCH) -Xcompiler -Wall,-Wextra,-Werror -Ilib/ops -Ilib/util -c $< -o $@
else
CUDA_OBJ :=
CUDA_LDLIBS :=
endif
