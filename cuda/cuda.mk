# cuda/cuda.mk - the CUDA build hook, included by the top-level Makefile.
#
# CUDA=auto (default) builds the backend when nvcc is on PATH, CUDA=1 forces
# it, CUDA=0 disables it. The backend is a shared object, CUDA_SO, that no
# program links: lib/ops/gpu_load.c dlopens it on the first sq_gpu_probe or
# sq_gpu_open (without it they answer "no CUDA backend"), so cuBLAS is
# loaded only by a run that asks for a GPU. Compiled with hidden
# visibility: its one export is the table of lib/ops/gpu_ops.h.
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
CUDA_SO := $(BUILD)/lib/libseqrec-cuda.so
# -z defs: every symbol the object uses comes from its own libraries, never
# from the program that loads it.
CUDA_SO_LDFLAGS := -shared -cudart shared -Xlinker -z,defs \
  -L$(CUDA_HOME)/lib64 -Xlinker -rpath,$(CUDA_HOME)/lib64
$(BUILD)/cuda/%.o: cuda/%.cu $(wildcard cuda/*.cuh) lib/ops/gpu_ops.h lib/util/err.h
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 --fmad=false $(CUDA_ARCH) -Werror all-warnings -Xptxas -warn-spills,-warn-lmem-usage -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror \
	  -Ilib/ops -Ilib/util -c $< -o $@
# The object's own copy of sq_fail (err.c), hidden like the rest.
$(BUILD)/cuda/err_pic.o: lib/util/err.c lib/util/err.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -fPIC -fvisibility=hidden -Wall -Wextra -Werror -D_DEFAULT_SOURCE \
	  -Ilib/util -c $< -o $@
$(CUDA_SO): $(CUDA_OBJ) $(BUILD)/cuda/err_pic.o
	@mkdir -p $(dir $@)
	$(NVCC) $(CUDA_ARCH) $(CUDA_SO_LDFLAGS) $^ -lcublasLt -lcublas -lcudart -o $@
else
CUDA_OBJ :=
CUDA_SO :=
endif

# The simulated device (tests/sim, HACKING.md "The simulated device"): the
# same cuda/*.cu compiled by the host C++ compiler with -DSQ_SIM against
# the small SIMT runtime tests/sim/sim.cpp (fibers, real barriers, a
# guarded device arena, cuBLAS over OpenBLAS). Built in every build, nvcc
# or not; `make check` runs the unit runner's GPU tests on it (unit-sim).
# Under SANITIZE=1 it carries the sanitizers, like everything else.
# SIM=0 leaves it out: a cross build (arm64-test) has no host C++ side.
SIM ?= 1
ifeq ($(SIM),1)
SIM_SO := $(BUILD)/lib/libseqrec-cuda-sim.so
SIM_OBJ := $(CUDA_SRC:cuda/%.cu=$(BUILD)/sim/%.o) $(BUILD)/sim/sim.o $(BUILD)/sim/err_pic.o
else
SIM_SO :=
SIM_OBJ :=
endif
SIM_CXXFLAGS := -std=c++17 -DSQ_SIM -Itests/sim -Ilib/ops -Ilib/util -fPIC -fvisibility=hidden \
  -O1 -g -Wall -Wextra -Werror $(SANFLAGS)
$(BUILD)/sim/%.o: cuda/%.cu $(wildcard cuda/*.cuh) tests/sim/sim_cuda.h tests/sim/sim_wmma.h lib/ops/gpu_ops.h lib/util/err.h
	@mkdir -p $(dir $@)
	$(CXX) -x c++ $(SIM_CXXFLAGS) -DSQ_SIM_TU=$(basename $(notdir $<)) -c $< -o $@
$(BUILD)/sim/sim.o: tests/sim/sim.cpp tests/sim/sim_cuda.h tests/sim/sim_wmma.h
	@mkdir -p $(dir $@)
	$(CXX) $(SIM_CXXFLAGS) -c $< -o $@
$(BUILD)/sim/err_pic.o: lib/util/err.c lib/util/err.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O1 -g -fPIC -fvisibility=hidden -Wall -Wextra -Werror -D_DEFAULT_SOURCE \
	  $(SANFLAGS) -Ilib/util -c $< -o $@
$(SIM_SO): $(SIM_OBJ)
	@mkdir -p $(dir $@)
	$(CXX) -shared $(SANFLAGS) -Wl,-z,defs $^ -lopenblas -o $@
# The self-test of the runtime (tests/sim/selftest.cu, a program).
$(BUILD)/sim/selftest: tests/sim/selftest.cu $(BUILD)/sim/sim.o tests/sim/sim_cuda.h tests/sim/sim_wmma.h
	@mkdir -p $(dir $@)
	$(CXX) -x c++ $(SIM_CXXFLAGS) -DSQ_SIM_TU=selftest -fvisibility=default -c $< -o $@.o
	$(CXX) $(SANFLAGS) $@.o $(BUILD)/sim/sim.o -lopenblas -o $@
