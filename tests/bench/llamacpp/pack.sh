#!/bin/sh
# Packs the llama.cpp sources that a CUDA build of llama-bench, llama-completion,
# llama-speculative and llama-speculative-simple on x86-64 needs into one tarball, to
# carry to a GPU machine without network (tests/bench/llamacpp/build.sh --cuda builds it
# there; tests/bench/cuda-bundle.sh puts it in the GPU check's bundle). Kept: the
# top-level CMake files, include/, src/ (libllama, every architecture), common/, ggml
# with its CPU backend for x86 only and its CUDA backend, the three vendored libraries
# common links (nlohmann, sheredom, cpp-httplib), and the folders of those four
# programs. A folder left out is taken out of its parent's CMakeLists.txt too (the
# add_subdirectory line commented), so the trimmed tree configures as the whole one.
# Left out besides: every other tool and example, the tests, docs, models, Python, the
# web UI and server, the other ggml backends and CPU architectures, READMEs.
# usage: tests/bench/llamacpp/pack.sh [OUT.tar.xz]   (default out/llama.cpp-src.tar.xz; its
#        folder is llama.cpp-src/, which build.sh --cuda unpacks into .cache/)
#   env: LLAMA_SRC (default .cache/llama.cpp)
set -eu
cd "$(dirname "$0")/../../.."
SRC=${LLAMA_SRC:-.cache/llama.cpp}
OUT=${1:-out/llama.cpp-src.tar.xz}
[ -f "$SRC/include/llama.h" ] || { echo "pack: no llama.cpp sources in $SRC (sh tests/fetch-llama-cpp.sh)" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
D=$STAGE/llama.cpp-src
mkdir -p "$D"
keep="CMakeLists.txt LICENSE licenses cmake include src common
      ggml/CMakeLists.txt ggml/cmake ggml/include ggml/src
      vendor/CMakeLists.txt vendor/nlohmann vendor/sheredom vendor/cpp-httplib
      tools/CMakeLists.txt tools/llama-bench tools/completion
      examples/CMakeLists.txt examples/speculative examples/speculative-simple pocs/CMakeLists.txt"
ex=""
for b in blas cann et hexagon hip metal musa opencl openvino rpc sycl virtgpu vulkan webgpu zdnn zendnn; do
    ex="$ex --exclude=ggml/src/ggml-$b"
done
for a in arm loongarch powerpc riscv s390 wasm; do ex="$ex --exclude=ggml/src/ggml-cpu/arch/$a"; done
# shellcheck disable=SC2086
tar -C "$SRC" -cf - $ex --exclude=ggml/src/ggml-cpu/kleidiai --exclude=ggml/src/ggml-cpu/spacemit \
    --exclude='*.md' --exclude='*.py' --exclude='*.gguf' --exclude='*.png' --exclude='*.jpg' $keep | tar -C "$D" -xf -
# each add_subdirectory(X) whose folder was not packed, commented out
for f in tools examples vendor pocs; do
    cm=$D/$f/CMakeLists.txt
    for sub in $(sed -n 's/^[[:space:]]*add_subdirectory(\([A-Za-z0-9_./-]*\)).*/\1/p' "$cm"); do
        [ -d "$D/$f/$sub" ] || sed -i "s|^\([[:space:]]*\)add_subdirectory($sub)|\1# add_subdirectory($sub) (not packed: tests/bench/llamacpp/pack.sh)|" "$cm"
    done
done
rev=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "llama.cpp $rev, trimmed by tests/bench/llamacpp/pack.sh for a CUDA build of llama-bench, llama-completion, llama-speculative, llama-speculative-simple" > "$D/PACKED"
XZ_OPT=-9e tar -C "$STAGE" -cJf "$OUT" llama.cpp-src
echo "pack: $OUT ($(du -k "$OUT" | cut -f1) KB, $(find "$D" -type f | wc -l) files, $(du -sk "$D" | cut -f1) KB unpacked; llama.cpp $rev): on the GPU machine,"
echo "      sh tests/bench/llamacpp/build.sh --cuda (it unpacks $OUT into .cache/llama.cpp-src)"
