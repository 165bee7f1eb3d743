#!/bin/sh
# make test-arm: runs the tests of a cross-built ARM tree ($1, default build-arm) under
# qemu-user. Each ARM program X of the tree gets a twin $1/qemu/X, a script that runs it
# under qemu-aarch64, and tests/run-tests.sh runs $1/qemu as its build tree: the cmocka
# programs and the command-line scripts, which call specdec and its helper programs by
# path, all under emulation. The x86 Python, Open MPI and Slurm cannot load or launch ARM
# programs, and a program the emulator runs cannot start another ARM program (execve
# goes to the kernel, which runs only x86 here): those tests are left to make test,
# each printed as skipped with its reason (TEST_SKIP). Libraries are found in Debian's
# multiarch folders (/usr/lib/aarch64-linux-gnu, installed by install-deps.sh --arm).
# usage: run-arm.sh [BUILD]   QEMU=... names the emulator (default qemu-aarch64)
BUILD=${1:-build-arm}
QEMU=${QEMU:-qemu-aarch64}
cd "$(dirname "$0")/.." || exit 2
command -v "$QEMU" >/dev/null 2>&1 || { echo "run-arm: no $QEMU: sh install-deps.sh --arm installs qemu-user"; exit 1; }
[ -x "$BUILD/specdec" ] || { echo "run-arm: no $BUILD/specdec: make test-arm builds it"; exit 1; }
root=$(pwd)
rm -rf "$BUILD/qemu"
# the twins: every ARM executable of the tree (specdec, tests/test_*, tests/exec/*)
find "$BUILD" -path "$BUILD/qemu" -prune -o -type f -perm -u+x -print | while read -r f; do
    head -c 20 "$f" | od -An -tx1 | tr -d ' \n' | grep -q '^7f454c46.*b700$' || continue # ELF, e_machine AArch64
    rel=${f#"$BUILD"/}
    mkdir -p "$BUILD/qemu/$(dirname "$rel")"
    printf '#!/bin/sh\nexec %s %s "$@"\n' "$QEMU" "$root/$f" > "$BUILD/qemu/$rel"
    chmod +x "$BUILD/qemu/$rel"
done
[ -x "$BUILD/qemu/specdec" ] || { echo "run-arm: $BUILD/specdec is not an AArch64 program"; exit 1; }
echo "run-arm: $("$BUILD/qemu/specdec" --version 2>&1 | head -1), under $("$QEMU" --version | head -1)"
# SPECDEC_MPI=skip: the MPI runs need an x86 Open MPI (mpi.sh still checks the plain
# build's refusals); the same for tests/cli/slurm.sh
TEST_SKIP="python.sh the x86 Python cannot load an ARM libspecdec.so
slurm.sh Slurm's x86 srun cannot launch ARM programs
sweep.sh its workers are specdec started again by path, an ARM program the kernel cannot run here
readme.sh the README's own commands (make targets, Python, sweeps) are x86 make test's
arch.sh llama.cpp's x86 programs and Python are its reference" \
SPECDEC_MPI=skip sh tests/run-tests.sh "$BUILD/qemu"
