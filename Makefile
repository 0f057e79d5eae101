# The two commands (see README.md):
#   make demo   the main job: the paper's experiments on real data, with a paper-style table
#   make test   every test: C++ suite, the same suite under ASan+UBSan, the concurrency test under TSan,
#               the C ABI fuzzer for 60 s, install check, Python suite, and the C++ suite cross-built
#               for aarch64 under qemu (NEON, SVE, SVE2)
# Each installs what it needs itself: Debian packages with apt-get, Python packages with pip into .venv.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

BUILD ?= build
ASAN_BUILD ?= build-asan
VENV ?= .venv
PYTHON ?= python3
JOBS ?= $(shell nproc)
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

# Build: compiler, CMake with Ninja and ccache, Highway (SIMD), GoogleTest, Google Benchmark, OpenBLAS
# and zlib (reproduction). Data: the King James Bible, Fashion-MNIST and the FreeDict English-German
# dictionary. Python: venv and headers for the bindings.
APT_PACKAGES := g++ make cmake ninja-build ccache pkg-config libhwy-dev libgtest-dev libbenchmark-dev libopenblas-dev zlib1g-dev \
                gnuplot-nox bible-kjv dataset-fashion-mnist dict-freedict-eng-deu python3-venv python3-dev

# Ninja for new build folders (an existing folder keeps its generator): it compiles the tests' files while
# the long kernel files still build, where Make waits for the library first.
export CMAKE_GENERATOR ?= Ninja
# The Release build and the Python package's build (make python) compile the same kernel files with
# the same flags; ccache serves the second from the first. ccache keys on the compiler's name, which
# scikit-build-core would take from Python's build configuration, so both builds are given the same.
ifeq ($(origin CC),default)
CC := gcc
endif
ifeq ($(origin CXX),default)
CXX := g++
endif
SHARED_COMPILE := -DCMAKE_C_COMPILER=$(CC) -DCMAKE_CXX_COMPILER=$(CXX) -DCMAKE_C_COMPILER_LAUNCHER=ccache \
                  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
RELEASE_CONFIGURE := cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(SHARED_COMPILE)

.PHONY: help deps build python test test-prepare test-downloads test-cpp test-asan test-python repro-build demo repro bench peers peers-onednn \
        peers-onednn-build sweep clean

help:
	@echo "make demo    run the paper reproduction (short) and print the table"
	@echo "make test    build and run every test (C++, sanitizers, fuzzer, install, Python, aarch64 under qemu)"
	@echo "make bench   run rmsnorm-bench (kernel speed against this machine's memory bandwidth)"
	@echo "make repro   the longer reproduction: several seeds, mean and spread"
	@echo "make peers   ours against PyTorch and ONNX Runtime (bench/peers.py)"
	@echo "make peers-onednn  ours against oneDNN's RMSNorm, timings and a correctness check (bench/peers_onednn.cc)"
	@echo "make sweep   GB/s against row length for ours, torch, ONNX Runtime and oneDNN: out/sweep.png"
	@echo "make fuzz    the C ABI fuzzer (ASan+UBSan on all but the kernels) for FUZZ_SECONDS (default 60)"

# Whether Debian package $$p is installed. dpkg-query -W, not dpkg -s: once an arm64 instance of a
# package is installed beside the native one (make test-arm64), dpkg -s calls the bare name ambiguous.
INSTALLED = dpkg-query -W -f='$${Status}\n' "$$p" 2> /dev/null | grep -q "ok installed"

# Installs only the Debian packages that are missing.
deps:
	@missing=""; for p in $(APT_PACKAGES); do $(INSTALLED) || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "== apt-get install$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing > /dev/null; \
	fi

build: deps
	$(RELEASE_CONFIGURE) > /dev/null
	cmake --build $(BUILD) -j $(JOBS)

test: test-prepare test-cpp test-asan test-tsan fuzz test-python test-arm64
	@echo "== all tests passed"

# make test's first step: the Release build while the downloads run beside it (the Python environment,
# then the clang and aarch64 packages), which wait on the network where the build waits on the cores.
# The steps after it find both done. Output of the two interleaves, line by line.
test-prepare: deps
	$(MAKE) --no-print-directory -j2 build test-downloads

# One after the other: apt-get takes a lock.
test-downloads: deps
	$(MAKE) --no-print-directory $(VENV)/.installed
	$(MAKE) --no-print-directory deps-clang
	$(MAKE) --no-print-directory deps-arm64

test-cpp: build
	@echo "== C++ tests (Release)"
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The whole C++ suite again with AddressSanitizer and UndefinedBehaviorSanitizer. The install test is
# left out: it links fresh programs against the instrumented library without the sanitizer runtime.
# x86 builds two SIMD targets here, AVX2 (masked moves at row ends) and SSE4 (the zero-padded buffer,
# as ARM uses, with NEON's four f32 lanes): every kernel path, at half the compile time of the four
# targets the Release suite runs. SSE4 is the baseline (-march=westmere -maes: Highway's SSE4 asks for
# SSE4.2, AES and PCLMUL), so the one-lane SCALAR target is not built (a CPU without them gets SCALAR
# instead of SSE4). The kernel files at -O0 (RMSNORM_KERNEL_OPTIONS): GCC's optimizer over the
# instrumented kernels made -O1 build six times longer (on a 2-core Zen 3, 18 min against 3), more than
# the slower tests give back (5 min against 2), and -O0 keeps every access the source makes for the
# sanitizers to see. The rest (C ABI, runtime, reference, tests) at -O1: it compiles in seconds, and at
# -O0 the tests' own input generation and checks, with SCALAR's lanes each a call, took most of their
# time (the commit says how much).
ASAN_BASELINE_ARCH := $(shell grep -qw sse4_2 /proc/cpuinfo && grep -qw aes /proc/cpuinfo && \
                        grep -qw pclmulqdq /proc/cpuinfo && echo "-march=westmere -maes")
ASAN_DISABLED_TARGETS := (HWY_SSSE3|HWY_AVX3$(if $(ASAN_BASELINE_ARCH),,|HWY_SSE4))
ASAN_FLAGS := -O1 -g1 $(ASAN_BASELINE_ARCH)
test-asan: deps
	@echo "== C++ tests under ASan + UBSan"
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(ASAN_FLAGS)" \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$(ASAN_FLAGS)" -DRMSNORM_KERNEL_OPTIONS=-O0 -DRMSNORM_SANITIZE=ON \
	  -DRMSNORM_BUILD_BENCH=OFF -DRMSNORM_DISABLED_TARGETS='$(ASAN_DISABLED_TARGETS)' > /dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -E install_test

# The clang builds below (test-tsan, fuzz) compile one SIMD target to keep the compile short: AVX2 where
# the CPU has it (-march=haswell, so Highway compiles nothing below it), else the scalar baseline alone.
CLANG_APT_PACKAGES := clang-14 libclang-rt-14-dev libomp-14-dev
CLANG_CMAKE := cmake -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DRMSNORM_BUILD_BENCH=OFF -DRMSNORM_BUILD_REPRO=OFF
ONE_TARGET_ARCH := $(shell grep -qw avx2 /proc/cpuinfo && echo "-march=haswell")
ONE_TARGET_DISABLED := (HWY_SSSE3|HWY_SSE4|HWY_AVX3$(if $(ONE_TARGET_ARCH),,|HWY_AVX2))

# ThreadSanitizer over the concurrency test alone (tests/concurrency_test.cc). Built with clang: its
# OpenMP runtime tells TSan about its own synchronization through the Archer tool, where libgomp's
# barriers would read as races. At -O0, as the ASan build: the build shrinks far more than the run grows
# (commit 8d09042 has the figures).
TSAN_BUILD ?= build-tsan
TSAN_FLAGS := -fsanitize=thread -O0 -g1 $(ONE_TARGET_ARCH)
ARCHER := /usr/lib/llvm-14/lib/libarcher.so

.PHONY: deps-clang test-tsan fuzz

deps-clang:
	@missing=""; for p in $(CLANG_APT_PACKAGES); do $(INSTALLED) || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "== apt-get install$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing > /dev/null; \
	fi

test-tsan: deps deps-clang
	@echo "== concurrency test under ThreadSanitizer"
	$(CLANG_CMAKE) -S . -B $(TSAN_BUILD) -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(TSAN_FLAGS)" \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$(TSAN_FLAGS)" -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
	  -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread -DRMSNORM_DISABLED_TARGETS='$(ONE_TARGET_DISABLED)' > /dev/null
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target concurrency_test
	TSAN_OPTIONS="halt_on_error=1 ignore_noninstrumented_modules=1" OMP_TOOL_LIBRARIES=$(ARCHER) \
	  $(TSAN_BUILD)/tests/concurrency_test

# The C ABI fuzzer (tests/fuzz/c_abi_fuzzer.cc) for FUZZ_SECONDS, after each regression input once:
# clang's libFuzzer with its coverage on the C ABI, the runtime and the reference. ASan and UBSan
# instrument those files, the harness and tests/test_util.cc, not the kernel files: those compile
# uninstrumented for one SIMD target, and make test-asan runs the whole suite over instrumented kernels.
# The harness itself checks every byte around the kernels' outputs. What it finds lands in
# FUZZ_FINDINGS; once fixed, a finding's input goes to tests/fuzz/regressions.
# The kernel files at -O0 (RMSNORM_KERNEL_OPTIONS), the rest at -O1: an input's time goes to the
# instrumented reference, checks and runtime more than to the kernels. On a 2-core Zen 3 the build took
# 33 s instead of 310 s with the kernels at -O1, and the two fuzzers, alternated (40 s each, seed 1,
# four rounds), ran 2067-2733 inputs with the kernels at -O0 and 2305-2458 with them at -O1: a tenth
# fewer inputs for 4.5 minutes less build.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
# libFuzzer's seed: 0 draws one (make fuzz explores); make test fixes it, so that its short run tries the
# same inputs on every CI run and a red build is reproducible (a longer run with the same seed covers it).
FUZZ_SEED ?= 0
test: FUZZ_SEED = 1
FUZZ_FINDINGS ?= $(FUZZ_BUILD)/findings
# -O1, not -O0 as the sanitizer builds: the fuzzer's time is fixed, and with every file at -O0 it ran
# and found a small fraction of the inputs (commit 8d09042 has the figures).
FUZZ_FLAGS := -O1 -g1 $(ONE_TARGET_ARCH)
FUZZ_KERNEL_OPTIONS := -O0

fuzz: deps deps-clang
	@echo "== C ABI fuzzer: the regressions, then $(FUZZ_SECONDS) s from tests/fuzz/corpus"
	$(CLANG_CMAKE) -S . -B $(FUZZ_BUILD) -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(FUZZ_FLAGS)" \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$(FUZZ_FLAGS)" -DRMSNORM_BUILD_FUZZER=ON -DRMSNORM_KERNEL_OPTIONS='$(FUZZ_KERNEL_OPTIONS)' \
	  -DRMSNORM_DISABLED_TARGETS='$(ONE_TARGET_DISABLED)' > /dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target c_abi_fuzzer
	mkdir -p $(FUZZ_BUILD)/corpus $(FUZZ_FINDINGS)
	UBSAN_OPTIONS=print_stacktrace=1 $(FUZZ_BUILD)/tests/c_abi_fuzzer -runs=0 tests/fuzz/regressions
	UBSAN_OPTIONS=print_stacktrace=1 $(FUZZ_BUILD)/tests/c_abi_fuzzer -max_total_time=$(FUZZ_SECONDS) -seed=$(FUZZ_SEED) \
	  -max_len=4096 -print_final_stats=1 -artifact_prefix=$(FUZZ_FINDINGS)/ $(FUZZ_BUILD)/corpus tests/fuzz/corpus

# A venv with torch, NumPy, ONNX Runtime and the build backend; rebuilt when the requirements change.
$(VENV)/.installed: python/requirements-test.txt
	@echo "== Python environment in $(VENV) (torch is a large download)"
	@free_gb=$$(df -Pk . | awk 'NR==2 {print int($$4 / 1048576)}'); \
	if [ "$$free_gb" -lt 10 ]; then \
	  echo "warning: $$free_gb GB free here; make test takes about 7 GB, 6 of them this environment, and pip needs room for its downloads"; \
	fi
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --progress-bar off -q --upgrade pip
	$(VENV)/bin/pip install --progress-bar off -r python/requirements-test.txt
	touch $@

# Without build isolation pip reuses build/python/ and rebuilds only what changed.
python: deps $(VENV)/.installed
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(VENV)/bin/pip install --no-build-isolation -q \
	  $(patsubst -D%,-Ccmake.define.%,$(SHARED_COMPILE)) .

# The translation metrics' test runs rmsnorm-repro, hence repro-build.
test-python: python repro-build
	@echo "== Python tests"
	RMSNORM_REPRO=$(abspath $(BUILD))/repro/rmsnorm-repro RMSNORM_EXPECT_TORCH_OPS=1 \
	  $(VENV)/bin/python -m pytest python/tests -q

# The paper's experiments (docs/repro.md): only the library and the trainer are built.
repro-build: deps
	$(RELEASE_CONFIGURE) > /dev/null
	cmake --build $(BUILD) -j $(JOBS) --target rmsnorm-repro

demo: repro-build
	$(BUILD)/repro/rmsnorm-repro demo --out report-demo

repro: repro-build
	$(BUILD)/repro/rmsnorm-repro repro --out report-repro

bench: build
	$(BUILD)/bench/rmsnorm-bench

# Ours against PyTorch and ONNX Runtime on the same arrays (docs/python.md).
peers: python
	$(VENV)/bin/python bench/peers.py

# Ours against oneDNN's RMSNorm (docs/benchmarks.md, "oneDNN side by side"), from its own venv. dnnl_rms_norm
# needs a newer oneDNN than the OpenMP wheels (onednn-cpu-*: oneDNN 3.2) or Debian's libdnnl-dev (2.6)
# hold, so this is the SYCL wheel, whose CPU engine runs on the OpenCL CPU runtime that pip brings in as
# intel-opencl-rt. That package's ICD file names a path of its build machine, hence OCL_ICD_FILENAMES.
# The venv takes about 2 GB. PEERS_ONEDNN_ARGS passes options (--quick, --shapes, --reps).
ONEDNN_VENV ?= .venv-onednn
ONEDNN_WHEELS := onednn==2026.1.0 onednn-devel==2026.1.0 intel-opencl-rt==2026.2.0
ONEDNN_PREFIX = $(abspath $(ONEDNN_VENV))
PEERS_ONEDNN_ARGS ?=

$(ONEDNN_VENV)/.installed:
	@echo "== oneDNN in $(ONEDNN_VENV): $(ONEDNN_WHEELS)"
	$(PYTHON) -m venv $(ONEDNN_VENV)
	$(ONEDNN_VENV)/bin/pip install --progress-bar off -q $(ONEDNN_WHEELS)
	touch $@

# The library through CMake, as ever; the program with one compiler line, so that CMake never has to look
# for oneDNN. libdnnl's own dependencies (libsycl, TBB, ...) sit in the venv's lib/, hence -rpath-link.
peers-onednn-build: deps $(ONEDNN_VENV)/.installed
	$(RELEASE_CONFIGURE) > /dev/null
	cmake --build $(BUILD) -j $(JOBS) --target rmsnorm
	$(CXX) -std=c++17 -O2 -Wall -Wextra -o $(BUILD)/peers_onednn bench/peers_onednn.cc \
	  -Iinclude -I$(ONEDNN_PREFIX)/include -L$(BUILD) -lrmsnorm -L$(ONEDNN_PREFIX)/lib -ldnnl \
	  -Wl,-rpath,$(abspath $(BUILD)) -Wl,-rpath-link,$(ONEDNN_PREFIX)/lib

RUN_ONEDNN = OCL_ICD_FILENAMES=$(ONEDNN_PREFIX)/lib/libintelocl.so LD_LIBRARY_PATH=$(ONEDNN_PREFIX)/lib \
             $(BUILD)/peers_onednn

peers-onednn: peers-onednn-build
	$(RUN_ONEDNN) $(PEERS_ONEDNN_ARGS)

# GB/s against row length (docs/benchmarks.md, "The row-length chart"): oneDNN's points from its program
# first, then peers.py times the others and draws all of them. Both take the same columns and elements
# per call. SWEEP_PNG=docs/sweep.png regenerates the committed chart (on a quiet machine only).
# SWEEP_ARGS passes peers.py options (--quick, --threads, --samples), SWEEP_ONEDNN_ARGS peers_onednn's.
SWEEP_COLS ?= 64,128,256,512,1024,2048,4096,8192,16384
SWEEP_ELEMENTS ?= 4194304
SWEEP_PNG ?= out/sweep.png
SWEEP_ARGS ?=
SWEEP_ONEDNN_ARGS ?=

sweep: python peers-onednn-build
	mkdir -p out
	$(RUN_ONEDNN) --sweep --sweep-cols $(SWEEP_COLS) --sweep-elements $(SWEEP_ELEMENTS) --json out/sweep-onednn.json \
	  $(SWEEP_ONEDNN_ARGS)
	$(VENV)/bin/python bench/peers.py --sweep --sweep-cols $(SWEEP_COLS) --sweep-elements $(SWEEP_ELEMENTS) \
	  --onednn-json out/sweep-onednn.json --json out/sweep.json --png $(SWEEP_PNG) $(SWEEP_ARGS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD) $(VENV) $(ONEDNN_VENV) report-demo report-repro

# ---- aarch64: cross-compiled, run under qemu-user (cmake/aarch64-linux-gnu.cmake) ------------------
# `make test-arm64` builds the library and the suite for aarch64 in build-arm64/, runs the suite through
# ctest under qemu-aarch64 -cpu max with 128-bit SVE (Highway's SVE2_128, SVE2, SVE and NEON targets),
# then tests/arm64/run.sh: NEON alone (cortex-a72), and the 256- and 512-bit SVE targets. One thread.
# At -O2, as Debian builds its packages, where Release is -O3, and the kernel files at -O1: the same
# bits at any level (no contraction; the suite compares them with x86's recorded hash), and compiling
# five aarch64 targets of each kernel file is most of this step, where the tests under qemu run about
# as fast at either level (the commits that chose the levels have the times).
ARM64_BUILD ?= build-arm64
ARM64_JOBS ?= 2
ARM64_OPT := -O2 -DNDEBUG
ARM64_KERNEL_OPT := -O1
ARM64_APT_PACKAGES := cmake g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libgtest-dev:arm64 libgomp1:arm64
# Left out of ctest: the install test (it compiles and runs for the host with cc) and the kernel tests
# again with streaming stores, minutes under emulation (run.sh streams on every CPU instead).
ARM64_CTEST_EXCLUDE := ^install_test$$|^kernels_with_streaming_stores

.PHONY: deps-arm64 test-arm64

# Installs only the packages that are missing (the arm64 ones from Debian's multiarch archive).
deps-arm64:
	@dpkg --print-foreign-architectures | grep -qx arm64 || $(SUDO) dpkg --add-architecture arm64; \
	missing=""; for p in $(ARM64_APT_PACKAGES); do $(INSTALLED) || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "== apt-get install$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing > /dev/null; \
	fi

test-arm64: deps-arm64
	cmake -S . -B $(ARM64_BUILD) -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_CXX_FLAGS_RELEASE="$(ARM64_OPT)" -DCMAKE_C_FLAGS_RELEASE="$(ARM64_OPT)" \
	  -DRMSNORM_KERNEL_OPTIONS=$(ARM64_KERNEL_OPT) \
	  -DRMSNORM_QEMU_CPU=max,sve-default-vector-length=16 -DRMSNORM_BUILD_BENCH=OFF -DRMSNORM_BUILD_REPRO=OFF > /dev/null
	cmake --build $(ARM64_BUILD) -j $(ARM64_JOBS)
	@echo "== aarch64 tests under qemu -cpu max, 128-bit SVE (SVE2_128, SVE2, SVE, NEON)"
	ctest --test-dir $(ARM64_BUILD) --output-on-failure -j $(ARM64_JOBS) -E '$(ARM64_CTEST_EXCLUDE)'
	tests/arm64/run.sh $(ARM64_BUILD)
