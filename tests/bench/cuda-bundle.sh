#!/bin/sh
# Builds build-cuda/ to be copied to a GPU machine that has the NVIDIA driver but not
# this project's build dependencies (GSL, GLPK, cmocka): CPU code for any x86-64 with
# AVX2 (not -march=native), and the shared libraries the binaries need besides the C
# and C++ runtimes copied into build-cuda/lib, which tests/bench/cuda.sh puts on
# LD_LIBRARY_PATH. There, run the programs directly (sh tests/bench/cuda.sh,
# build-cuda/tests/test_cuda), not make, which would rebuild.
set -eu
cd "$(dirname "$0")/../.."
rm -rf build-cuda
make -j2 cuda ARCH=-march=x86-64-v3
mkdir -p build-cuda/lib
ldd build-cuda/specdec build-cuda/tests/test_cuda build-cuda/tests/bench/bench_cuda |
    awk '/=> \// { print $3 }' | sort -u |
    grep -v -E '/(libc|libm|libgcc_s|libstdc\+\+|libpthread|libdl|librt)\.so' |
    while read -r lib; do cp -L "$lib" build-cuda/lib/; done
echo "cuda-bundle: build-cuda/ ($(du -sh build-cuda | cut -f1)), libraries: $(ls build-cuda/lib | tr '\n' ' ')"
