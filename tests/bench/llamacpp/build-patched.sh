#!/bin/sh
# Builds llama-speculative-drawn: llama.cpp's examples/speculative with
# speculative-drawn.patch applied (the draft proposes the token its sampler drew, not
# its most probable token, as the stochastic verification assumes), and
# llama-speculative-fixed: that and speculative-residual.patch (the residual subtracts
# the draft's probability of the same token id; after top-k/top-p the target's and the
# draft's candidate lists hold different tokens, and position i was taken for token i),
# each compiled alone and
# linked against the libraries of the llama.cpp build (tests/bench/llamacpp/build.sh),
# into a folder of its own (the build itself is left as it is). Reference only, as
# build.sh's programs.
#
# usage: tests/bench/llamacpp/build-patched.sh   (30 s on 2 cores)
#   env: LLAMA_SRC (default .cache/llama.cpp), LLAMA_BUILD (default
#        .cache/llama.cpp-build), PATCHED (default out/llama.cpp-patched: the program
#        goes to its bin/), CXX (default c++)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
cd "$ROOT"
SRC=${LLAMA_SRC:-.cache/llama.cpp}
BLD=${LLAMA_BUILD:-.cache/llama.cpp-build}
CXX=${CXX:-c++}
OUT=${PATCHED:-out/llama.cpp-patched}/bin
BIN=$(cd "$BLD/bin" && pwd)
for f in "$SRC/examples/speculative/speculative.cpp" "$BIN/libllama.so" "$BIN/libllama-common.so" \
         "$BLD/common/libllama-common-base.a"; do
    [ -e "$f" ] || { echo "build-patched.sh: no $f (tests/bench/llamacpp/build.sh builds llama.cpp)" >&2; exit 1; }
done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
S=$(cd "$SRC" && pwd)
mkdir -p "$OUT"
# build NAME PATCH...: the example with the patches applied in order, into $OUT/NAME
build() {
    name=$1; shift
    rm -rf "$WORK/examples"
    mkdir -p "$WORK/examples/speculative"
    cp "$SRC/examples/speculative/speculative.cpp" "$WORK/examples/speculative/"
    for p in "$@"; do (cd "$WORK" && patch -s -p1 < "$HERE/$p"); done
    # the flags of llama.cpp's own CMake build of llama-speculative (CPU, shared libraries)
    $CXX -O3 -DNDEBUG -DGGML_BACKEND_SHARED -DGGML_SHARED -DGGML_USE_CPU -DLLAMA_SHARED -DLLAMA_SUBPROCESS \
        -I"$S/common" -I"$S/vendor" -I"$S/include" -I"$S/ggml/include" \
        "$WORK/examples/speculative/speculative.cpp" -o "$WORK/$name" \
        -Wl,-rpath,"$BIN" "$BIN/libllama-common.so" "$BIN/libllama.so" "$BIN/libggml.so" \
        "$BIN/libggml-cpu.so" "$BIN/libggml-base.so" "$(cd "$BLD/common" && pwd)/libllama-common-base.a"
    mv "$WORK/$name" "$OUT/$name"
    echo "llamacpp: built $OUT/$name" >&2
}
build llama-speculative-drawn speculative-drawn.patch
build llama-speculative-fixed speculative-drawn.patch speculative-residual.patch
