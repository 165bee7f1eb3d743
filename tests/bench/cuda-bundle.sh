#!/bin/sh
# Builds build-cuda/ to be copied to a GPU machine that has the NVIDIA driver but not
# this project's build dependencies (GSL, GLPK, cmocka): CPU code for any x86-64 with
# AVX2 (not -march=native), and the shared libraries the binaries need besides the C
# and C++ runtimes copied into build-cuda/lib, which the scripts put on LD_LIBRARY_PATH.
# Then packs what runs there into out/cuda-bundle.tar.gz: specdec, test_cuda,
# bench_cuda, build-cuda/lib, build-cuda/BUNDLE (the commit, a checksum of the sources,
# the CUDA runtime linked in). A lent machine receives the working tree (tracked files
# and untracked ones git does not ignore) and the bundle, at most 64 MiB together: the
# script fails when they do not fit (the large target, stored as Q4_K, is widened to F16
# there by data/models/large-f16.sh with the bundle's specdec).
# There: sh tests/gpu-check.sh --bundle out/cuda-bundle.tar.gz (or run the programs
# directly: sh tests/bench/cuda.sh, build-cuda/tests/test_cuda), not make, which would
# rebuild.
# usage: tests/bench/cuda-bundle.sh [--sources-sum]
#   --sources-sum  only print the checksum of the sources the binaries are built from
#                  (Makefile, src/ and tests/ C, CUDA and header files), which BUNDLE
#                  records and tests/gpu-check.sh compares with the tree it runs in
set -eu
cd "$(dirname "$0")/../.."
sources_sum() {
    { echo Makefile; find src tests -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) |
        LC_ALL=C sort; } | xargs cat | cksum | cut -d' ' -f1
}
if [ "${1:-}" = --sources-sum ]; then sources_sum; exit 0; fi
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
tar -czf out/cuda-bundle.tar.gz build-cuda/specdec build-cuda/tests/test_cuda build-cuda/tests/bench/bench_cuda \
    build-cuda/lib build-cuda/BUNDLE
kb=$(( $(wc -c < out/cuda-bundle.tar.gz) / 1024 ))
echo "cuda-bundle: out/cuda-bundle.tar.gz: $kb KiB ($(tar -tzf out/cuda-bundle.tar.gz | grep -c -v '/$') files); build-cuda/ $(du -sh build-cuda | cut -f1)"
echo "cuda-bundle: libraries: $(ls build-cuda/lib | tr '\n' ' ')"
tree_kb=$(( $(git ls-files -z -c -o --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) / 1024 ))
echo "cuda-bundle: with the working tree that travels too ($tree_kb KiB): $((tree_kb + kb)) KiB of the 65536 a lent machine receives"
if [ $((tree_kb + kb)) -gt 65536 ]; then
    echo "cuda-bundle: FAIL: the tree and the bundle are over 64 MiB together" >&2
    exit 1
fi
