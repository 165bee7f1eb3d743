#!/bin/sh
# Builds build-cuda/ to be copied to a GPU machine that has the NVIDIA driver but not
# this project's build dependencies (GSL, GLPK, cmocka): CPU code for any x86-64 with
# AVX2 (not -march=native), and the shared libraries the binaries need besides the C
# and C++ runtimes copied into build-cuda/lib, which the scripts put on LD_LIBRARY_PATH.
# Then packs what runs there into out/cuda-bundle.tar.gz: specdec, test_cuda,
# bench_cuda, build-cuda/lib, build-cuda/BUNDLE (the commit, a checksum of the sources,
# the CUDA runtime linked in),
# and data/models/large-*.gguf when they
# exist and git does not track them. The tarball must stay under BUNDLE_MAX_MB (default
# 35: a lent machine receives at most 64 MiB, the tracked files take about 25).
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
make -j2 cuda ARCH=-march=x86-64-v3
mkdir -p build-cuda/lib
ldd build-cuda/specdec build-cuda/tests/test_cuda build-cuda/tests/bench/bench_cuda |
    awk '/=> \// { print $3 }' | sort -u |
    grep -v -E '/(libc|libm|libgcc_s|libstdc\+\+|libpthread|libdl|librt)\.so' |
    while read -r lib; do cp -L "$lib" build-cuda/lib/; done
{   echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (+ local changes)')"
    echo "sources: $(sources_sum)"
    echo "runtime: CUDA $("${NVCC:-nvcc}" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') (cudart_static), sm_80/86/89/90 + PTX"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), glibc $(ldd --version | head -1 | sed 's/.* //')"
} > build-cuda/BUNDLE
large=""
for f in data/models/large-target.gguf data/models/large-draft.gguf; do
    [ -s "$f" ] && ! git ls-files --error-unmatch "$f" >/dev/null 2>&1 && large="$large $f"
done
mkdir -p out
tar -czf out/cuda-bundle.tar.gz build-cuda/specdec build-cuda/tests/test_cuda build-cuda/tests/bench/bench_cuda \
    build-cuda/lib build-cuda/BUNDLE $large
kb=$(( $(wc -c < out/cuda-bundle.tar.gz) / 1024 ))
echo "cuda-bundle: out/cuda-bundle.tar.gz: $kb KiB ($(tar -tzf out/cuda-bundle.tar.gz | grep -c -v '/$') files${large:+, with$large}); build-cuda/ $(du -sh build-cuda | cut -f1)"
echo "cuda-bundle: libraries: $(ls build-cuda/lib | tr '\n' ' ')"
if [ $kb -gt $(( ${BUNDLE_MAX_MB:-35} * 1024 )) ]; then
    echo "cuda-bundle: FAIL: the bundle is over ${BUNDLE_MAX_MB:-35} MiB (BUNDLE_MAX_MB)" >&2
    exit 1
fi
