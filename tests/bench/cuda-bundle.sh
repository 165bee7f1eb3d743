#!/bin/sh
# Builds build-cuda/ to be copied to a GPU machine that has the NVIDIA driver but not
# this project's build dependencies (GSL, GLPK, cmocka): CPU code for any x86-64 with
# AVX2 (not -march=native), and the shared libraries the binaries need besides the C
# and C++ runtimes copied into build-cuda/lib, which the scripts put on LD_LIBRARY_PATH.
# Then packs what runs there into out/cuda-bundle.tar.xz: specdec, test_cuda,
# bench_cuda, build-cuda/lib, build-cuda/BUNDLE (the commit, a checksum of the sources,
# the CUDA runtime linked in), and llama.cpp's sources trimmed for its CUDA build
# (out/llama.cpp-src.tar.xz, tests/bench/llamacpp/pack.sh, when .cache/llama.cpp or
# LLAMA_SRC holds them; BUNDLE_LLAMA=0 leaves them out), which the GPU check builds
# there. xz -9e, not gzip: the three binaries carry the same device code, which xz's
# 64 MiB window finds again (2.9 MB against gzip's 5.5). A lent machine receives the
# working tree (tracked files and untracked ones git does not ignore) and the bundle, at
# most 64 MiB together: the script prints the room left and fails when they do not fit
# (the large target, stored as Q4_K, is widened to F16 and to 1B parameters there by
# data/models/large-f16.sh and large-wide.sh with the bundle's specdec).
# There: sh tests/gpu-check.sh --bundle out/cuda-bundle.tar.xz (or run the programs
# directly: sh tests/bench/cuda.sh, build-cuda/tests/test_cuda), not make, which would
# rebuild.
# usage: tests/bench/cuda-bundle.sh [--sources-sum | --room BUNDLE | --unpack BUNDLE]
#   --sources-sum  only print the checksum of the sources the binaries are built from
#                  (Makefile, src/ and tests/ C, CUDA and header files), which BUNDLE
#                  records and tests/gpu-check.sh compares with the tree it runs in
#   --room BUNDLE  only print what the tree and BUNDLE ('none': no bundle) take of a lent
#                  machine's 64 MiB, and the room left (exit 1 when over)
#   --unpack B     only unpack the bundle B (.tar.xz, or .tar.gz) here, listing its files
#                  (without an xz program, or with BUNDLE_UNPACK=python, through Python's
#                  tarfile)
set -eu
cd "$(dirname "$0")/../.."
sources_sum() {
    { echo Makefile; find src tests -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) |
        LC_ALL=C sort; } | xargs cat | cksum | cut -d' ' -f1
}
# KiB of the files that travel with the tree (tracked and untracked, not ignored; a copy
# without git: everything but the build and output folders)
tree_kib() {
    if git rev-parse --git-dir >/dev/null 2>&1; then
        git ls-files -z -c -o --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | awk '{ print int($1 / 1024) }'
    else
        du -sk --exclude=./.git --exclude=./out --exclude=./.cache --exclude='./build*' . | cut -f1
    fi
}
# a bundle's files, one a line: bytes, then the path
list() {
    case $1 in
    *.gz|*.tgz) tar -tzvf "$1" ;;
    *) if command -v xz >/dev/null 2>&1 && [ "${BUNDLE_UNPACK:-}" != python ]; then xz -dc "$1" | tar -tvf -
       else python3 -c 'import sys, tarfile
for m in tarfile.open(sys.argv[1]): print("-", "-", m.size, "-", "-", m.name)' "$1"; fi ;;
    esac | awk '{ print $3, $NF }'
}
room() { # BUNDLE
    t=$(tree_kib) b=0 l=0
    [ -f "$1" ] && b=$(( $(wc -c < "$1") / 1024 )) &&
        l=$(list "$1" | awk '$2 == "out/llama.cpp-src.tar.xz" { print int($1 / 1024) }') && l=${l:-0}
    echo "cuda-bundle: room: the tree $t KiB + the bundle $b KiB ($([ -f "$1" ] && echo "$1" || echo none)$([ $l -gt 0 ] && echo "; llama.cpp's sources $l KiB of it")) = $((t + b)) KiB of the 65536 a lent machine receives: $((65536 - t - b)) KiB left"
    [ $((t + b)) -le 65536 ]
}
case ${1:-} in
--sources-sum) sources_sum; exit 0 ;;
--room) room "${2:?--room BUNDLE}"; exit ;;
--unpack)
    case ${2:?--unpack BUNDLE} in
    *.gz|*.tgz) tar -xzvf "$2" ;;
    *) if command -v xz >/dev/null 2>&1 && [ "${BUNDLE_UNPACK:-}" != python ]; then xz -dc "$2" | tar -xvf -
       else python3 -c 'import sys, tarfile
t = tarfile.open(sys.argv[1])
for m in t.getmembers(): print(m.name)
t.extractall(".", filter="data")' "$2"; fi ;;
    esac
    exit ;;
esac
rm -rf build-cuda
# device code for the lent machines' GPUs only (H100 and H200: sm_90, and its PTX): a
# third of make cuda's five targets, so the bundle leaves room for the tree's models;
# BUNDLE_CUDA_ARCH overrides (nvcc -gencode options)
BUNDLE_CUDA_ARCH=${BUNDLE_CUDA_ARCH:--gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90}
make -j2 cuda ARCH=-march=x86-64-v3 CUDA_ARCH="$BUNDLE_CUDA_ARCH"
mkdir -p build-cuda/lib
ldd build-cuda/specdec build-cuda/tests/test_cuda build-cuda/tests/bench/bench_cuda |
    awk '/=> \// { print $3 }' | sort -u |
    grep -v -E '/(libc|libm|libgcc_s|libstdc\+\+|libpthread|libdl|librt)\.so' |
    while read -r lib; do cp -L "$lib" build-cuda/lib/; done
{   echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (+ local changes)')"
    echo "sources: $(sources_sum)"
    echo "runtime: CUDA $("${NVCC:-nvcc}" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') (cudart_static), $(echo "$BUNDLE_CUDA_ARCH" | sed 's/-gencode arch=[a-z_0-9]*,code=//g; s/  */ /g; s/^ //')"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), glibc $(ldd --version | head -1 | sed 's/.* //')"
} > build-cuda/BUNDLE
# without the host code's DWARF (a quarter of the bundle); symbols stay for backtraces
strip --strip-debug build-cuda/specdec build-cuda/tests/test_cuda build-cuda/tests/bench/bench_cuda
mkdir -p out
extra=""
rm -f out/cuda-bundle.tar.gz out/llama.cpp-src.tar.xz
if [ "${BUNDLE_LLAMA:-1}" = 1 ] && [ -f "${LLAMA_SRC:-.cache/llama.cpp}/include/llama.h" ]; then
    sh tests/bench/llamacpp/pack.sh out/llama.cpp-src.tar.xz && extra=out/llama.cpp-src.tar.xz
else
    echo "cuda-bundle: no llama.cpp sources in ${LLAMA_SRC:-.cache/llama.cpp} (or BUNDLE_LLAMA=0): the bundle goes without them, and the GPU check's llamacpp step will say so"
fi
tar -cf - build-cuda/specdec build-cuda/tests/test_cuda build-cuda/tests/bench/bench_cuda build-cuda/lib build-cuda/BUNDLE \
    $extra | xz -9e -T1 > out/cuda-bundle.tar.xz
kb=$(( $(wc -c < out/cuda-bundle.tar.xz) / 1024 ))
echo "cuda-bundle: out/cuda-bundle.tar.xz: $kb KiB ($(xz -dc out/cuda-bundle.tar.xz | tar -tf - | grep -c -v '/$') files); build-cuda/ $(du -sh build-cuda | cut -f1)"
echo "cuda-bundle: libraries: $(ls build-cuda/lib | tr '\n' ' ')"
room out/cuda-bundle.tar.xz || { echo "cuda-bundle: FAIL: the tree and the bundle are over 64 MiB together" >&2; exit 1; }
