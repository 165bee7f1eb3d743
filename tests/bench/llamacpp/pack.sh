#!/bin/sh
# Packs the llama.cpp sources that a CUDA build of llama-bench, llama-completion,
# llama-speculative and llama-speculative-simple needs into one tarball, to carry to a
# GPU machine without network (tests/bench/llamacpp/build.sh --cuda builds it there).
# Left out: .git, docs, models, tests, media, benches, Python (gguf-py, conversion,
# scripts), the web UI and server, and every ggml backend but the CPU and CUDA ones
# (ggml adds a backend's folder only when that backend is switched on).
# usage: tests/bench/llamacpp/pack.sh [OUT.tar.xz]   (default out/llama.cpp-src.tar.xz; its
#        folder is llama.cpp-src/, which build.sh --cuda unpacks into .cache/)
#   env: LLAMA_SRC (default .cache/llama.cpp)
set -eu
cd "$(dirname "$0")/../../.."
SRC=${LLAMA_SRC:-.cache/llama.cpp}
OUT=${1:-out/llama.cpp-src.tar.xz}
[ -f "$SRC/include/llama.h" ] || { echo "pack: no llama.cpp sources in $SRC (sh tests/fetch-llama-cpp.sh)" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"
ex=""
for d in .git .github docs models tests media benches gguf-py conversion scripts app \
         tools/ui tools/server tools/cli tools/mtmd/legacy-models; do
    ex="$ex --exclude=./$d"
done
for b in cann et hip metal musa rpc virtgpu sycl vulkan webgpu zdnn opencl hexagon zendnn openvino blas; do
    ex="$ex --exclude=./ggml/src/ggml-$b"
done
rev=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
# shellcheck disable=SC2086
tar -C "$SRC" -cJf "$OUT" $ex --exclude='*.gguf' --exclude='*.png' --exclude='*.jpg' \
    --exclude='*.jpeg' --exclude='*.mp3' --exclude='*.mp4' --transform "s,^\./,llama.cpp-src/," .
echo "pack: $OUT ($(du -k "$OUT" | cut -f1) KB; llama.cpp $rev): on the GPU machine,"
echo "      sh tests/bench/llamacpp/build.sh --cuda (it unpacks $OUT into .cache/llama.cpp-src)"
