#!/bin/sh
# Builds llama.cpp's CPU tools (llama-bench, llama-simple, llama-completion or,
# in older trees, llama-cli; llama-speculative and llama-speculative-simple for
# make bench-e2e) and libllama from the sources that
# tests/fetch-llama-cpp.sh put in .cache/llama.cpp, then ref_logits.c against
# that libllama. Reference only: nothing of specdec links with it.
#
# usage: tests/bench/llamacpp/build.sh [--force] [--cuda [--can-build] | --avx2]
#   --cuda      on a GPU machine: only llama-bench, llama-completion, llama-speculative
#               and llama-speculative-simple, with GGML_CUDA=ON for CUDA_ARCH (default
#               90-real: H100/H200, no PTX), flash attention's kernels left out
#               (GGML_CUDA_FA=OFF) and no fatbin compression: what shortens the build
#               that tests/gpu-check.sh runs inside its call; with ninja when there;
#               into .cache/llama.cpp-build-cuda; the sources are .cache/llama.cpp, else
#               .cache/llama.cpp-src, unpacked first from out/llama.cpp-src.tar.xz
#               (tests/bench/llamacpp/pack.sh) when absent. No ref_logits. Needs cmake
#               and nvcc there (PATH, or /usr/local/cuda/bin; NVCC= names one).
#   --can-build with --cuda: only say whether cmake and nvcc are there (exit 0), or
#               which is missing (exit 1)
#   --avx2      the CPU tools for AVX2 alone (GGML_NATIVE=OFF; AVX, AVX2, FMA, F16C,
#               BMI2 on; AVX-512 and AVX-VNNI off), into .cache/llama.cpp-build-avx2:
#               the reference of specdec's AVX2 kernel set on any x86 machine
#               (make bench-cpu-sets). No ref_logits.
#   env: LLAMA_SRC   (default .cache/llama.cpp)
#        LLAMA_BUILD (default .cache/llama.cpp-build; --cuda: .cache/llama.cpp-build-cuda;
#                     --avx2: .cache/llama.cpp-build-avx2)
#        JOBS        (default 2: the build machine has 2 cores, shared; --cuda: all cores)
# Idempotent: the CMake step is skipped when every binary is already there, and
# ref_logits is relinked only when ref_logits.c is newer. --force rebuilds both
# (an incremental CMake build: only what changed is compiled again).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
cd "$ROOT"
FORCE=0 CUDA=0 CAN=0 AVX2=0
for a in "$@"; do
    case "$a" in
        --force) FORCE=1 ;;
        --cuda) CUDA=1 ;;
        --can-build) CAN=1 ;;
        --avx2) AVX2=1 ;;
        -h|--help) sed -n '2,/^# (an incremental CMake build/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
    esac
done

log() { echo "llamacpp: $*" >&2; }

if [ $CUDA = 1 ]; then
    NVCC=${NVCC:-$(command -v nvcc || ls /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc 2>/dev/null | head -1 || true)}
    CMAKE=$(command -v cmake || true)
    if [ $CAN = 1 ]; then
        [ -n "$CMAKE" ] || { echo "cmake not found (PATH)"; exit 1; }
        [ -n "$NVCC" ] && [ -x "$NVCC" ] || { echo "nvcc not found (PATH, /usr/local/cuda/bin, NVCC=)"; exit 1; }
        echo "cmake $CMAKE, nvcc $NVCC"; exit 0
    fi
    SRC=${LLAMA_SRC:-}
    if [ -z "$SRC" ]; then
        SRC=.cache/llama.cpp
        [ -f "$SRC/include/llama.h" ] || SRC=.cache/llama.cpp-src
    fi
    if [ ! -f "$SRC/include/llama.h" ] && [ "$SRC" = .cache/llama.cpp-src ] && [ -f out/llama.cpp-src.tar.xz ]; then
        log "unpacking out/llama.cpp-src.tar.xz into .cache/"
        mkdir -p .cache
        if command -v xz >/dev/null 2>&1; then tar -xJf out/llama.cpp-src.tar.xz -C .cache
        else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' \
            out/llama.cpp-src.tar.xz .cache; fi
    fi
    [ -f "$SRC/include/llama.h" ] || {
        log "no llama.cpp sources in $SRC (here: sh tests/bench/llamacpp/pack.sh, then carry out/llama.cpp-src.tar.xz)"; exit 1; }
    [ -n "$CMAKE" ] || { log "cmake is not installed on this machine: the CUDA build needs it"; exit 1; }
    [ -n "$NVCC" ] && [ -x "$NVCC" ] || { log "nvcc not found: the CUDA build needs the CUDA toolkit"; exit 1; }
    GEN=""
    command -v ninja >/dev/null 2>&1 && GEN="-G Ninja"
    BUILD=${LLAMA_BUILD:-.cache/llama.cpp-build-cuda}
    JOBS=${JOBS:-$(nproc)}
    TARGETS="llama-bench llama-completion llama-speculative llama-speculative-simple"
    missing=0
    for t in $TARGETS; do [ -x "$BUILD/bin/$t" ] || missing=1; done
    if [ $missing = 0 ] && [ $FORCE = 0 ]; then
        log "llama.cpp CUDA tools present in $BUILD/bin (--force to rebuild)"; exit 0
    fi
    if [ ! -f "$BUILD/CMakeCache.txt" ]; then
        log "configuring $SRC into $BUILD (CUDA for ${CUDA_ARCH:-90-real}, no flash attention, Release, native CPU${GEN:+, ninja})"
        # shellcheck disable=SC2086
        cmake $GEN -S "$SRC" -B "$BUILD" \
            -DCMAKE_BUILD_TYPE=Release \
            -DBUILD_SHARED_LIBS=ON \
            -DGGML_NATIVE=ON -DGGML_OPENMP=ON -DGGML_BACKEND_DL=OFF \
            -DGGML_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90-real}" \
            -DGGML_CUDA_FA=OFF -DGGML_CUDA_FA_QUANTS=f16-f16 -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_COMPRESSION_MODE=none \
            -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_RPC=OFF -DGGML_BLAS=OFF \
            -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
            -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
            -DLLAMA_BUILD_UI=OFF -DLLAMA_ALL_WARNINGS=OFF >"$BUILD.configure.log" 2>&1 || {
            tail -n 20 "$BUILD.configure.log" >&2; log "cmake configure failed; see $BUILD.configure.log"; exit 1; }
    fi
    log "building $TARGETS with -j$JOBS (log: $BUILD.build.log)"
    start=$(date +%s)
    # shellcheck disable=SC2086
    cmake --build "$BUILD" --config Release -j"$JOBS" --target $TARGETS >"$BUILD.build.log" 2>&1 || {
        tail -n 30 "$BUILD.build.log" >&2; log "build failed; see $BUILD.build.log"; exit 1; }
    log "built in $(( $(date +%s) - start )) s: $BUILD/bin/{$(echo $TARGETS | tr ' ' ',')}"
    exit 0
fi

SRC=${LLAMA_SRC:-.cache/llama.cpp}
BUILD=${LLAMA_BUILD:-.cache/llama.cpp-build}
JOBS=${JOBS:-2}
# the instruction sets of the CPU build: the build machine's, or AVX2 alone
ISA="-DGGML_NATIVE=ON"
ISA_NAME=native
if [ $AVX2 = 1 ]; then
    BUILD=${LLAMA_BUILD:-.cache/llama.cpp-build-avx2}
    ISA="-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
         -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF
         -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF"
    ISA_NAME="AVX2+FMA+F16C, no AVX-512"
fi

# 1. sources
if [ ! -f "$SRC/include/llama.h" ]; then
    if [ "$SRC" = .cache/llama.cpp ]; then
        sh tests/fetch-llama-cpp.sh
    else
        log "no llama.cpp sources in $SRC (LLAMA_SRC)"; exit 1
    fi
fi

# 2. cmake
if ! command -v cmake >/dev/null 2>&1; then
    log "installing cmake (apt-get)"
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get install -y cmake >/dev/null || {
        $SUDO apt-get update >/dev/null && $SUDO apt-get install -y cmake >/dev/null; } || {
        log "could not install cmake; apt-get install cmake"; exit 1; }
fi

# 3. llama.cpp. The main text tool is llama-completion since llama.cpp moved
# llama-cli to the server code (built only with LLAMA_BUILD_SERVER, which also
# wants the web UI); older trees have llama-cli in tools/main or examples/main.
if [ -d "$SRC/tools/completion" ]; then
    MAIN=llama-completion
else
    MAIN=llama-cli
fi
# speculative decoding: llama-speculative (draft trees, stochastic verification) and
# llama-speculative-simple (one greedy draft chain), where the tree has them
SPEC=""
[ -d "$SRC/examples/speculative" ] && SPEC="$SPEC llama-speculative"
[ -d "$SRC/examples/speculative-simple" ] && SPEC="$SPEC llama-speculative-simple"
TARGETS="llama llama-bench llama-simple $MAIN$SPEC"
TOOLS="llama-bench llama-simple $MAIN$SPEC"
[ $AVX2 = 1 ] && TARGETS=llama-bench TOOLS=llama-bench
BIN="$BUILD/bin"

missing=0
for t in $TOOLS; do
    [ -x "$BIN/$t" ] || missing=1
done
[ -e "$BIN/libllama.so" ] || [ -e "$BUILD/src/libllama.so" ] || missing=1

if [ $missing = 1 ] || [ $FORCE = 1 ]; then
    if [ ! -f "$BUILD/CMakeCache.txt" ]; then
        log "configuring $SRC into $BUILD (CPU only, Release, $ISA_NAME, OpenMP)"
        # LLAMA_CURL: ignored by trees that fetch with OpenSSL, honoured by older ones.
        # shellcheck disable=SC2086
        cmake -S "$SRC" -B "$BUILD" \
            -DCMAKE_BUILD_TYPE=Release \
            -DBUILD_SHARED_LIBS=ON \
            $ISA -DGGML_OPENMP=ON -DGGML_BACKEND_DL=OFF \
            -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_RPC=OFF \
            -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
            -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
            -DLLAMA_BUILD_UI=OFF -DLLAMA_ALL_WARNINGS=OFF >"$BUILD.configure.log" 2>&1 || {
            log "cmake configure failed; see $BUILD.configure.log"; exit 1; }
    fi
    log "building $TARGETS with -j$JOBS (log: $BUILD.build.log)"
    start=$(date +%s)
    # shellcheck disable=SC2086
    cmake --build "$BUILD" --config Release -j"$JOBS" --target $TARGETS >"$BUILD.build.log" 2>&1 || {
        tail -n 30 "$BUILD.build.log" >&2; log "build failed; see $BUILD.build.log"; exit 1; }
    log "built in $(( $(date +%s) - start )) s"
else
    log "llama.cpp tools present in $BIN (--force to rebuild)"
fi
if [ $AVX2 = 1 ]; then
    log "ready: $BIN/llama-bench ($ISA_NAME)"
    exit 0
fi

# 4. ref_logits, a C program against include/llama.h (ggml.h comes with it).
LIBDIR="$BIN"
[ -e "$LIBDIR/libllama.so" ] || LIBDIR="$BUILD/src"
ABS_LIBDIR=$(cd "$LIBDIR" && pwd)
GGML_LIBDIR=$ABS_LIBDIR
[ -e "$GGML_LIBDIR/libggml.so" ] || GGML_LIBDIR=$(cd "$BUILD/ggml/src" && pwd)
if [ ! -x "$BIN/ref_logits" ] || [ $FORCE = 1 ] ||
    [ -n "$(find "$HERE/ref_logits.c" -newer "$BIN/ref_logits")" ]; then
    log "compiling ref_logits"
    ${CC:-cc} -std=c11 -O2 -g -Wall -Wextra -Werror -Wshadow -D_POSIX_C_SOURCE=200809L \
        -I"$SRC/include" -I"$SRC/ggml/include" \
        -o "$BIN/ref_logits" "$HERE/ref_logits.c" \
        -L"$ABS_LIBDIR" -L"$GGML_LIBDIR" -lllama -lggml -lggml-base \
        -Wl,-rpath,"$ABS_LIBDIR" -Wl,-rpath,"$GGML_LIBDIR" -lm
fi
log "ready: $BIN/{llama-bench,llama-simple,$MAIN,ref_logits}$SPEC"
