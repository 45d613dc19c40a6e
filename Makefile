# seqrec - build, test, demo and benchmark entry points.
#
#   make            build every program into build/bin
#   make check      unit tests + bats suites (SANITIZE=1: under ASan+UBSan)
#   make demo       the whole pipeline on synthetic data
#   make bench      benchmarks, CSV under bench/out
#   make install    PREFIX=/usr/local
#
# Sources are found by wildcard: a new lib/LAYER/*.c, tools/*.c, tests/ref/*.c,
# tests/unit/test_*.c or tests/bats/*.bats needs no edit here. lib/ is one
# folder per layer (HACKING.md); every one is on the include path.

SANITIZE ?= 0
PREFIX ?= /usr/local
VERSION := 0.2.0

# ISA=avx2 or ISA=base: every kernel built for that instruction set alone
# (no clones: vec.h SQ_NO_CLONES), into build-ISA/ - an AVX2 or a baseline
# x86-64 machine's code, timed natively on a wider host (make isa-bench).
ISA ?=
ISA_FLAGS_avx2 := -DSQ_NO_CLONES -march=x86-64-v3
ISA_FLAGS_base := -DSQ_NO_CLONES -march=x86-64
ifneq ($(ISA),)
ifeq ($(ISA_FLAGS_$(ISA)),)
$(error ISA=$(ISA): say avx2 or base)
endif
endif

# An AVX2 (or baseline) machine's libraries too: OpenBLAS's kernels, and
# PyTorch's for the benchmarks that run it beside the engine.
ifeq ($(ISA),avx2)
export OPENBLAS_CORETYPE ?= Haswell
export ATEN_CPU_CAPABILITY ?= avx2
export DNNL_MAX_CPU_ISA ?= AVX2
endif
ifeq ($(ISA),base)
export OPENBLAS_CORETYPE ?= Prescott
export ATEN_CPU_CAPABILITY ?= default
export DNNL_MAX_CPU_ISA ?= SSE41
endif

ifeq ($(SANITIZE),1)
BUILD := build-san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
OPT := -O1
else
BUILD := build$(if $(ISA),-$(ISA))
SANFLAGS :=
OPT := -O2
endif

# MPI=auto (default) builds with MPI when mpicc is on PATH (Open MPI from
# Debian: openmpi-bin libopenmpi-dev), MPI=1 requires it, MPI=0 leaves it out.
# Every program links it then, but only a process that a launcher started
# as one of several initialises it (lib/util/comm.h).
MPI ?= auto
MPICC ?= mpicc
ifeq ($(MPI),auto)
MPI := $(if $(shell command -v $(MPICC) 2>/dev/null),1,0)
endif
ifeq ($(MPI),1)
MPI_CFLAGS := -DSQ_HAVE_MPI $(patsubst -I%,-isystem %,$(shell $(MPICC) --showme:compile 2>/dev/null || $(MPICC) -compile_info | cut -d' ' -f2- | tr ' ' '\n' | grep '^-[ID]' | tr '\n' ' '))
MPI_LIBS := $(shell $(MPICC) --showme:link 2>/dev/null || $(MPICC) -link_info | cut -d' ' -f2- | tr ' ' '\n' | grep '^-[lLW]' | tr '\n' ' ')
ifeq ($(strip $(MPI_CFLAGS) $(MPI_LIBS)),-DSQ_HAVE_MPI)
$(error MPI=1: $(MPICC) gives no compile or link flags)
endif
endif

LIB_DIRS := $(sort $(patsubst %/,%,$(dir $(wildcard lib/*/*.h lib/*/*.c))))
LIB_INC := $(LIB_DIRS:%=-I%)
# -ffp-contract=off: no fused multiply-add, the same bits on every ISA.
# -fno-trapping-math: no program here reads the floating-point exception
# flags, and without it GCC will not turn a compare-and-select (the clamps
# of vec.h's exp, erf) into a blend on AVX2 or SSE: those clones stayed
# scalar, GELU ran 10x slower on AVX2 than on AVX-512 (issue 33). Values
# are unchanged (clang's default). -fno-math-errno: sqrtf inline.
CFLAGS_ALL := -std=c11 $(OPT) -g -Wall -Wextra -Werror -Wshadow -Wvla \
  -ffp-contract=off -fno-math-errno -fno-trapping-math \
  -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 -DSEQREC_VERSION='"$(VERSION)"' \
  -fopenmp $(LIB_INC) $(MPI_CFLAGS) $(SANFLAGS) $(ISA_FLAGS_$(ISA)) $(CFLAGS)
# The flags the objects of $(BUILD) were compiled with: when they change
# (a new flag here, CFLAGS=..., ISA=...), every object is rebuilt, not only
# those whose sources changed.
BUILD_FLAGS := $(BUILD)/.cflags
ifneq ($(CFLAGS_ALL),$(file < $(BUILD_FLAGS)))
$(shell mkdir -p $(BUILD))
$(file > $(BUILD_FLAGS),$(CFLAGS_ALL))
endif
# -ldl: lib/ops/gpu_load.c dlopens the CUDA backend (cuda/cuda.mk) on demand.
LDLIBS_ALL := -larchive -lz -lxxhash -lopenblas -lm -ldl -fopenmp $(MPI_LIBS) $(LDLIBS)

LIB_SRC := $(sort $(wildcard lib/*/*.c))
# Sources written over real.h's `real` (they start with `#define SQ_REAL
# float`) are compiled twice: as float, and as double into NAME_f64.o (the
# _f64 twins the finite-difference checks use).
REAL_SRC := $(shell grep -l '^\#define SQ_REAL float' $(LIB_SRC) /dev/null)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(REAL_SRC:%.c=$(BUILD)/%_f64.o)
TOOL_SRC := $(sort $(wildcard tools/*.c))
TOOL_NAMES := $(filter-out seqrec,$(notdir $(TOOL_SRC:.c=)))
PROGS := $(BUILD)/bin/seqrec $(TOOL_NAMES:%=$(BUILD)/bin/seqrec-%)
SCRIPTS := $(BUILD)/bin/seqrec-nightly $(BUILD)/bin/seqrec-plot
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
# tests/ref/*.c: the naive references of the ops (ref_ops.h), linked into the
# unit runner; a test includes them by name (-Itests/ref).
REF_SRC := $(sort $(wildcard tests/ref/*.c))
UNIT_OBJ := $(UNIT_SRC:%.c=$(BUILD)/%.o) $(REF_SRC:%.c=$(BUILD)/%.o) $(BUILD)/tests/unit/main.o

# `make` alone builds the programs: the included files' first rules (cuda.mk's
# err_pic.o with nvcc on PATH) must not become the default goal (issue 40).
.DEFAULT_GOAL := all
include cuda/cuda.mk
include tests/gpu/gpu.mk

# tags for editors: .ctags.d/ teaches ctags the R(name) functions of real.h.
tags: $(LIB_SRC) $(TOOL_SRC)
	ctags -R lib tools tests/unit tests/ref

.PHONY: all tags check unit unit-sim unit-sim-order dup-check bats demo bench bench-data deps install clean clang-check arm64-check arm64-test isa-test man-check man-config-keys fnlen-check
all: $(PROGS) $(SCRIPTS) $(CUDA_SO) $(SIM_SO)

# seqrec-nightly is pipelines/nightly.sh with the version filled in.
$(BUILD)/bin/seqrec-nightly: pipelines/nightly.sh
	@mkdir -p $(dir $@)
	sed 's/@VERSION@/$(VERSION)/' $< > $@.tmp && chmod 755 $@.tmp && mv $@.tmp $@

# seqrec-plot is pipelines/plot.sh, the same way.
$(BUILD)/bin/seqrec-plot: pipelines/plot.sh
	@mkdir -p $(dir $@)
	sed 's/@VERSION@/$(VERSION)/' $< > $@.tmp && chmod 755 $@.tmp && mv $@.tmp $@

$(BUILD)/%.o: %.c $(BUILD_FLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(BUILD)/%_f64.o: %.c $(BUILD_FLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DSQ_REAL=double -MMD -MP -c $< -o $@

$(BUILD)/libseqrec.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/bin/seqrec: $(BUILD)/tools/seqrec.o $(BUILD)/libseqrec.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $^ $(LDLIBS_ALL) -o $@

$(BUILD)/bin/seqrec-%: $(BUILD)/tools/%.o $(BUILD)/libseqrec.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $^ $(LDLIBS_ALL) -o $@

# The unit runner's table is generated from the UNIT_TEST(name) lines.
$(BUILD)/tests/unit/list.h: $(UNIT_SRC)
	@mkdir -p $(dir $@)
	grep -ho '^UNIT_TEST([a-z0-9_]*)' $(UNIT_SRC) /dev/null | sed 's/UNIT_TEST(\(.*\))/X(\1)/' > $@

$(BUILD)/tests/unit/main.o: tests/unit/main.c $(BUILD)/tests/unit/list.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -I$(BUILD)/tests/unit -Itests/unit -c $< -o $@

$(BUILD)/tests/unit/%.o: tests/unit/%.c $(BUILD_FLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/unit -Itests/ref -MMD -MP -c $< -o $@

$(BUILD)/tests/ref/%.o: tests/ref/%.c $(BUILD_FLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/ref -MMD -MP -c $< -o $@

# It loads the CUDA backend from $(BUILD)/lib when a test asks for a GPU.
$(BUILD)/unit_tests: $(UNIT_OBJ) $(BUILD)/libseqrec.a | $(CUDA_SO)
	$(CC) $(CFLAGS_ALL) $^ $(LDLIBS_ALL) -o $@

deps:
	@sh .ci/deps

unit: $(BUILD)/unit_tests
	$(BUILD)/unit_tests

# No global symbol defined twice among the objects of the library (every
# program links them) or of the simulated backend: a static archive would
# silently link the first of two ops of one name. Weak symbols (the stubs,
# C++ inline functions) do not count; the _f64 twins have their own names.
dup-check: $(LIB_OBJ) $(SIM_OBJ)
	@for set in "$(LIB_OBJ)" "$(SIM_OBJ)"; do \
	  d=$$(nm -g --defined-only $$set | awk 'NF == 3 && $$2 ~ /^[TDBRGS]$$/ {print $$3}' | sort | uniq -d); \
	  if [ -n "$$d" ]; then echo "dup-check: defined twice: $$d"; exit 1; fi; \
	done; echo "dup-check: no global symbol defined twice"

# The GPU tests (names with gpu or cuda) on the simulated device
# (cuda/cuda.mk, tests/sim), and the runtime's own self-test.
unit-sim: $(BUILD)/unit_tests $(SIM_SO) $(BUILD)/sim/selftest
	$(BUILD)/sim/selftest
	SEQREC_CUDA_LIB=$(CURDIR)/$(SIM_SO) SEQREC_SIMULATED_DEVICE=1 $(BUILD)/unit_tests gpu cuda | tee $(BUILD)/unit-sim.txt
	@grep -q ' 0 failed' $(BUILD)/unit-sim.txt
	@# the allocation cache on a device it can fill (test_devmem_cache_small_device)
	SEQREC_SIM_ARENA_GIB=1 SEQREC_CUDA_LIB=$(CURDIR)/$(SIM_SO) SEQREC_SIMULATED_DEVICE=1 \
	  $(BUILD)/unit_tests devmem_cache > $(BUILD)/unit-sim-cache.txt 2>&1 || \
	  { cat $(BUILD)/unit-sim-cache.txt; exit 1; }
	@tail -n 1 $(BUILD)/unit-sim-cache.txt
	@grep -q '^1 passed, 0 failed' $(BUILD)/unit-sim-cache.txt || { cat $(BUILD)/unit-sim-cache.txt; exit 1; }

# The GPU tests again with the blocks, and a block's threads between
# barriers, run backwards and shuffled (SEQREC_SIM_ORDER, tests/sim): a
# kernel whose result follows the order would differ from its CPU twin.
# These runs turn the allocation cache off (SEQREC_GPU_PLAIN=cache,
# cuda/alloc.cu), so the arena's guards see every block at its own size,
# and a freed block's NaN bytes, or its freed address, in a kernel.
SIM_ORDERS ?= reverse shuffle:1
unit-sim-order: $(BUILD)/unit_tests $(SIM_SO)
	@for o in $(SIM_ORDERS); do \
	  echo "unit-sim-order: SEQREC_SIM_ORDER=$$o"; \
	  SEQREC_GPU_PLAIN=cache SEQREC_SIM_ORDER=$$o SEQREC_CUDA_LIB=$(CURDIR)/$(SIM_SO) SEQREC_SIMULATED_DEVICE=1 \
	    $(BUILD)/unit_tests gpu cuda > $(BUILD)/unit-sim-order.txt 2>&1; \
	  tail -n 1 $(BUILD)/unit-sim-order.txt; \
	  grep -q ' 0 failed' $(BUILD)/unit-sim-order.txt || { grep -v '^ok ' $(BUILD)/unit-sim-order.txt; exit 1; }; \
	done

# TAP, ended by the line "bats: N passed, N failed, N skipped"
# (tests/bats/run.sh); BATS_FILES=tests/bats/x.bats runs fewer suites.
BATS_FILES ?= tests/bats
bats: $(PROGS) $(SCRIPTS) $(CUDA_SO) $(BUILD)/bench/attn_bench $(BUILD)/bench/sgemm_peak \
  $(BUILD)/bench/isa_ops
	SEQREC_BIN=$(CURDIR)/$(BUILD)/bin SEQREC_ROOT=$(CURDIR) sh tests/bats/run.sh $(BATS_FILES)

# Every source must also compile warning-free with clang (when present).
clang-check:
	@if command -v clang >/dev/null 2>&1; then \
	  printf '%s\n' $(LIB_SRC) $(TOOL_SRC) $(UNIT_SRC) $(REF_SRC) | xargs -P $(NPROC) -n 8 \
	    clang -std=c11 -fsyntax-only -fopenmp -Wall -Wextra -Werror -Wshadow -Wvla -D_DEFAULT_SOURCE \
	      -D_FILE_OFFSET_BITS=64 -DSEQREC_VERSION='"$(VERSION)"' $(LIB_INC) -Itests/unit -Itests/ref \
	      -I$(BUILD)/tests/unit || exit 1; \
	  printf '%s\n' $(CUDA_SRC) tests/sim/sim.cpp tests/sim/selftest.cu | xargs -P $(NPROC) -n 8 \
	    clang++ -x c++ -fsyntax-only $(filter-out $(SANFLAGS),$(SIM_CXXFLAGS)) || exit 1; \
	  echo "clang: all sources clean (the simulated device's C++ too)"; \
	else echo "clang not found: skipping the clang warning check"; fi

# arm64 (the SQ_VEC kernels' one-function branch, vec.h): every library
# and program source compiles warning-free with the aarch64 cross compiler,
# float and double (real.h), when it is installed (.ci/run installs it).
# OpenBLAS's cblas.h is the host's: it declares the same functions.
ARM64_CC ?= aarch64-linux-gnu-gcc
arm64-check:
	@if command -v $(ARM64_CC) >/dev/null 2>&1; then \
	  blas=$$(pkg-config --cflags-only-I openblas 2>/dev/null); \
	  for f in $(LIB_SRC) $(TOOL_SRC); do for r in float double; do \
	    $(ARM64_CC) -std=c11 -fsyntax-only -fopenmp -Wall -Wextra -Werror -Wshadow -Wvla \
	      -ffp-contract=off -fno-math-errno -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 \
	      -DSEQREC_VERSION='"$(VERSION)"' -DSQ_REAL=$$r $(LIB_INC) $$blas $$f || exit 1; \
	  done; done; echo "arm64: all sources compile"; \
	else echo "$(ARM64_CC) not found: skipping the arm64 compile check"; fi

# arm64, run (.ci/run; not part of make check: about 6 minutes under
# emulation): every program and the unit runner cross-built for aarch64
# into ARM64_BUILD against Debian's arm64 libraries (multiarch
# libopenblas-dev:arm64, libarchive-dev:arm64, libxxhash-dev:arm64,
# zlib1g-dev:arm64), then
# the unit tests and `make demo` (2 SASRec epochs) run under qemu-aarch64 user emulation
# (qemu-user). Skipped with a message when any of these is missing.
ARM64_BUILD ?= build-arm64
ARM64_LIBS := /usr/lib/aarch64-linux-gnu
ARM64_RUN := env OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1 qemu-aarch64 -L /
arm64-test:
	@if ! command -v $(ARM64_CC) >/dev/null 2>&1 || ! command -v qemu-aarch64 >/dev/null 2>&1 || \
	  ! ls $(ARM64_LIBS)/libopenblas.so $(ARM64_LIBS)/libarchive.so $(ARM64_LIBS)/libxxhash.so $(ARM64_LIBS)/libz.so $(ARM64_LIBS)/libgomp.so.1 >/dev/null 2>&1; then \
	  echo "arm64-test: skipped (needs $(ARM64_CC), qemu-aarch64 and the arm64 libopenblas-dev, libarchive-dev, libxxhash-dev, zlib1g-dev, libgomp1)"; \
	else \
	  $(MAKE) --no-print-directory BUILD=$(ARM64_BUILD) CC=$(ARM64_CC) CUDA=0 SIM=0 MPI=0 all $(ARM64_BUILD)/unit_tests && \
	  mkdir -p $(ARM64_BUILD)/qemu && \
	  for p in $(notdir $(PROGS)); do \
	    printf '#!/bin/sh\nexec $(ARM64_RUN) %s "$$@"\n' "$(CURDIR)/$(ARM64_BUILD)/bin/$$p" > $(ARM64_BUILD)/qemu/$$p && \
	    chmod +x $(ARM64_BUILD)/qemu/$$p || exit 1; \
	  done && \
	  $(ARM64_RUN) $(ARM64_BUILD)/unit_tests | tail -n 1 | tee $(ARM64_BUILD)/unit.txt && \
	  grep -q ' 0 failed' $(ARM64_BUILD)/unit.txt && \
	  $(MAKE) --no-print-directory demo BUILD=$(ARM64_BUILD) CC=$(ARM64_CC) CUDA=0 SIM=0 MPI=0 \
	    DEMO_BIN=$(ARM64_BUILD)/qemu DEMO_OUT=$(ARM64_BUILD)/demo-out DEMO_EPOCHS=2 && \
	  echo "arm64-test: the unit tests and the demo ran on aarch64 (qemu-aarch64)"; \
	fi

# x86-64 levels, run (.ci/run; not part of make check: about 5 minutes
# under emulation). The vector kernels (SQ_VEC: target_clones avx512f, avx2
# and default) promise the same bits at every width. With OpenBLAS held to
# one kernel (OPENBLAS_CORETYPE=Prescott: its own kernels differ by width),
# a seeded SASRec epoch must write the same model file natively (this
# processor's clones), under qemu-x86_64 -cpu Haswell (the avx2 clones) and
# under -cpu qemu64 (baseline x86-64: the default clones), and the unit
# tests must pass on the baseline. The qemu64 CPU says GenuineIntel:
# OpenBLAS reads an AMD qemu64 as a 3DNow! Athlon. Skipped without qemu-user.
# Then, natively and without qemu: the builds for AVX2 alone and baseline
# alone (make ISA=avx2, ISA=base) write the same models again, and every
# vectorised kernel's throughput on each set the host runs is printed and
# kept in bench/out/isa.csv (bench/isa-speed.sh, bench/isa_ops.c).
ISA_RUN := env OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=Prescott
ISA_BASE := qemu-x86_64 -cpu qemu64,vendor=GenuineIntel
# The attention kinds trained (ATTN, or ATTN:OPTION:VALUE for one more
# option; linrec and linear with 2 heads of 16 dimensions: their sweeps'
# blocked state products).
ISA_ATTNS := softmax linrec:--heads:2 linear:--heads:2
ISA_TRAIN := --model sasrec --loss ce --dim 32 --ffn 32 --layers 2 --heads 4 --max-len 30 \
  --dropout 0.2 --epochs 1 --seed 1 --threads 2
isa-test: $(PROGS) $(BUILD)/unit_tests $(BUILD)/bench/isa_ops $(BUILD)/bench/sgemm_peak
	@if ! command -v qemu-x86_64 >/dev/null 2>&1; then \
	  echo "isa-test: skipped (needs qemu-x86_64: apt-get install qemu-user)"; \
	else \
	  d=$(BUILD)/isa-test; b=$(BUILD)/bin; mkdir -p $$d && \
	  $(ISA_RUN) $(ISA_BASE) $(BUILD)/unit_tests 2>/dev/null | tail -n 1 | tee $$d/unit.txt && \
	  grep -q ' 0 failed' $$d/unit.txt && \
	  $$b/seqrec-synth --users 400 --seed 3 | $$b/seqrec-preprocess --format tsv --core 5 - | \
	    $$b/seqrec-split --leave-one-out -o $$d/split.sqr && \
	  for a in $(ISA_ATTNS); do \
	    t="$(ISA_TRAIN) --attn $$(echo $$a | tr : ' ')"; n=$${a%%:*}; \
	    $(ISA_RUN) $$b/seqrec-train $$t -o $$d/native-$$n.sqm $$d/split.sqr 2>/dev/null && \
	    $(ISA_RUN) qemu-x86_64 -cpu Haswell $$b/seqrec-train $$t -o $$d/avx2-$$n.sqm $$d/split.sqr 2>/dev/null && \
	    $(ISA_RUN) $(ISA_BASE) $$b/seqrec-train $$t -o $$d/base-$$n.sqm $$d/split.sqr 2>/dev/null && \
	    cmp $$d/native-$$n.sqm $$d/avx2-$$n.sqm && cmp $$d/native-$$n.sqm $$d/base-$$n.sqm || exit 1; \
	  done && \
	  echo "isa-test: unit tests pass on baseline x86-64; each model ($(ISA_ATTNS)) is the same bytes natively ($$(if grep -qw avx512f /proc/cpuinfo; then echo avx512f; elif grep -qw avx2 /proc/cpuinfo; then echo avx2; else echo baseline; fi) clones), on avx2 and on baseline"; \
	fi
	@$(MAKE) --no-print-directory ISA=avx2 SIM=0 build-avx2/bin/seqrec-train build-avx2/bench/isa_ops
	@$(MAKE) --no-print-directory ISA=base SIM=0 build-base/bin/seqrec-train build-base/bench/isa_ops
	@mkdir -p bench/out
	@ISA_ATTNS="$(ISA_ATTNS)" ISA_TRAIN="$(ISA_TRAIN)" \
	  sh bench/isa-speed.sh $(BUILD) build-avx2 build-base bench/out/isa.csv

# Man pages must render without warnings.
man-check:
	@for f in man/man1/*.1 man/man5/*.5; do \
	  out=$$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$$f" 2>&1 >/dev/null); \
	  if [ -n "$$out" ]; then echo "$$f: $$out"; exit 1; fi; \
	done; echo "man pages: all render cleanly"

# seqrec-train(1)'s lists of config keys, rewritten from the option tables
# (tests/bats/config.bats fails while the page and the tables differ).
man-config-keys: $(BUILD)/bin/seqrec-train
	sh pipelines/config_keys.sh --update man/man1/seqrec-train.1 $<

# No function in lib/ or tools/ over 150 lines (.ci/fnlen lists them).
fnlen-check:
	@sh .ci/fnlen && echo "fnlen: no function over 150 lines"

# The build and the compile-only checks run a job a core (NPROC), and so
# do the bats files (tests/bats/run.sh, with GNU parallel); the unit
# runner on the CPU beside the simulated device's three runs (each single
# threaded, about 35 s: 2 cores take both at once), whose log follows the
# CPU runner's, so each runner's output stays whole and ends with its
# "N passed, N failed" line.
NPROC ?= $(shell nproc 2>/dev/null || echo 1)
check: deps $(BUILD)/tests/unit/list.h
	$(MAKE) --no-print-directory -j$(NPROC) all $(BUILD)/unit_tests
	$(MAKE) --no-print-directory -j$(NPROC) clang-check arm64-check man-check fnlen-check
	$(MAKE) --no-print-directory bats
	@echo "check: the unit runner here, the simulated device's runs beside it (their log after)"
	@$(MAKE) --no-print-directory unit-sim unit-sim-order > $(BUILD)/check-sim.log 2>&1 & p=$$!; \
	  $(MAKE) --no-print-directory unit; u=$$?; \
	  wait $$p; s=$$?; cat $(BUILD)/check-sim.log; [ $$u = 0 ] && [ $$s = 0 ]
	$(MAKE) --no-print-directory dup-check

# The dataset recipes (data/Makefile) run in data/: a relative DATA_MIRROR
# given here (e.g. ../shared/data) is made absolute for them.
DATA_MAKE = $(MAKE) --no-print-directory -C data $(if $(DATA_MIRROR),DATA_MIRROR=$(abspath $(DATA_MIRROR)))

# The reproductions on a GPU (every reproduce-* target; the pipelines'
# run rules call $(REPRO_RUN) and $(REPRO_SCORE), pipelines/repro_run.sh):
#   DEVICE=cuda[:N]  every training and scoring run there;
#   GPU_MINUTES=M    a budget for this make: the runs that fit in M minutes
#                    from now, one after another; a run the budget stops
#                    keeps its checkpoint, is scored "not run" in the tables
#                    and resumes (bit for bit) at the next make;
#   CUDA_GRAPHS=0    train eagerly (default 1: on a GPU each fresh run
#                    trains with --cuda-graphs).
DEVICE ?=
GPU_MINUTES ?=
CUDA_GRAPHS ?= 1
export REPRO_DEVICE := $(DEVICE)
export REPRO_GRAPHS := $(CUDA_GRAPHS)
ifneq ($(GPU_MINUTES),)
ifeq ($(origin REPRO_DEADLINE),undefined)
export REPRO_DEADLINE := $(shell echo $$(( $$(date +%s) + ($(GPU_MINUTES)) * 60 )))
endif
endif
REPRO_RUN := sh pipelines/repro_run.sh
REPRO_SCORE := sh pipelines/repro_run.sh --score
# a run's scoring line starts with `$(REPRO_DONE) MODEL || exit 0;`: a run the
# budget stopped has no model yet
REPRO_DONE := test -s

include pipelines/demo.mk
include $(filter-out pipelines/demo.mk,$(wildcard pipelines/*.mk))
include bench/bench.mk
include $(filter-out bench/bench.mk,$(wildcard bench/*.mk))

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5
	install -m 755 $(PROGS) $(SCRIPTS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 man/man1/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 man/man5/*.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	$(if $(CUDA_SO),install -d $(DESTDIR)$(PREFIX)/lib/seqrec)
	$(if $(CUDA_SO),install -m 755 $(CUDA_SO) $(DESTDIR)$(PREFIX)/lib/seqrec/)

clean:
	rm -rf build build-san build-avx2 build-base bench/out demo-out

# ---- fuzzing (issue 11): `make fuzz`, tests/fuzz/README.md ----
# libFuzzer harnesses for the stream reader, the raw log reader, the
# model-file reader and the text readers, built with clang under ASan and UBSan from their own
# objects in build-fuzz/ (never build/'s). Each runs FUZZ_SECONDS from a
# scratch copy of its seed corpus tests/fuzz/corpus/NAME/; a crash fails
# the target and leaves its input in build-fuzz/crashes/NAME/.
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_BUILD := build-fuzz
FUZZ_NAMES := stream raw model text
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=c11 -O1 -g -Wall -Wextra -Wshadow -Wvla -Wno-pass-failed -ffp-contract=off -fno-math-errno -D_DEFAULT_SOURCE \
  -D_FILE_OFFSET_BITS=64 -DSEQREC_VERSION='"$(VERSION)"' -fopenmp $(LIB_INC) $(FUZZ_SAN)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o) $(REAL_SRC:%.c=$(FUZZ_BUILD)/%_f64.o)
FUZZ_BINS := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%)
.SECONDARY: $(FUZZ_NAMES:%=$(FUZZ_BUILD)/tests/fuzz/fuzz_%.o)

.PHONY: fuzz fuzz-build fuzz-deps fuzz-clean $(FUZZ_NAMES:%=fuzz-%)
fuzz: fuzz-build
	@rc=0; for n in $(FUZZ_NAMES); do \
	  sh tests/fuzz/run.sh $$n $(FUZZ_SECONDS) $(FUZZ_BUILD) || rc=1; \
	done; exit $$rc

# One harness: make fuzz-raw FUZZ_SECONDS=600
$(FUZZ_NAMES:%=fuzz-%): fuzz-%: $(FUZZ_BUILD)/fuzz_%
	sh tests/fuzz/run.sh $* $(FUZZ_SECONDS) $(FUZZ_BUILD)

fuzz-build: fuzz-deps
	$(MAKE) --no-print-directory $(FUZZ_BINS)

# clang and libFuzzer: installed by .ci/deps when root, else named here.
fuzz-deps:
	@sh .ci/deps fuzz
	@printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
	  > /tmp/seqrec-fuzz-probe.$$$$.c; \
	if ! $(FUZZ_CC) -fsanitize=fuzzer,address,undefined -fopenmp /tmp/seqrec-fuzz-probe.$$$$.c \
	    -o /tmp/seqrec-fuzz-probe.$$$$ 2>/tmp/seqrec-fuzz-probe.$$$$.err; then \
	  echo "make fuzz: '$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -fopenmp' does not link:" >&2; \
	  sed 's/^/  /' /tmp/seqrec-fuzz-probe.$$$$.err >&2; \
	  echo "make fuzz: needs clang, libFuzzer and libomp: sudo apt-get install -y clang libclang-rt-dev libomp-dev" >&2; \
	  rm -f /tmp/seqrec-fuzz-probe.$$$$*; exit 1; \
	fi; rm -f /tmp/seqrec-fuzz-probe.$$$$*

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/%_f64.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -DSQ_REAL=double -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/libseqrec.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_BUILD)/libseqrec.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $^ $(LDLIBS_ALL) -o $@

fuzz-clean:
	rm -rf $(FUZZ_BUILD)

-include $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_NAMES:%=$(FUZZ_BUILD)/tests/fuzz/fuzz_%.d)

-include $(LIB_OBJ:.o=.d) $(UNIT_OBJ:.o=.d) $(TOOL_SRC:%.c=$(BUILD)/%.d)
