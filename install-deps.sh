#!/bin/sh
# Installs the Debian packages specdec needs to build, test and draw figures, and
# fetches the test data that cannot be committed (llama.cpp's tokenizer vectors).
# Safe to run again: it only calls apt-get when a package is missing.
# usage: sh install-deps.sh [--slurm] [--arm]
#   --slurm  also Slurm and munge (slurm-wlm, munge), for `make test-slurm`, which starts a
#            private one-node cluster to run paper-figs/slurm.sbatch; the plain set-up
#            does without them
#   --arm    also the cross build for 64-bit ARM of `make test-arm`: Debian's aarch64
#            compiler, qemu-user, and the arm64 libraries (the arm64 architecture is
#            added to dpkg). GSL's arm64 run-time libraries only: Debian 12's libgsl-dev
#            for arm64 would replace the x86 one (the Makefile links them by path)
set -eu
# libopenmpi-dev and openmpi-bin: only `make mpi` (build-mpi/specdec) and its tests use them;
# python3-numpy: the Python adapters of `specdec certify --exec` (tests/exec/adapter.py) and
# the Python package over libspecdec.so (src/python/, tests/python/test_api.py);
# python3-setuptools, python3-wheel, python3-venv: `pip install --no-build-isolation .`
# offline (pyproject.toml, setup.py; tests/cli/python.sh installs into a fresh venv)
PKGS="build-essential libgsl-dev libglpk-dev glpk-utils libcmocka-dev gnuplot-nox git libopenmpi-dev openmpi-bin python3-numpy
      python3-setuptools python3-wheel python3-venv"
ARM=""
for a in "$@"; do
    case "$a" in
        --slurm) PKGS="$PKGS slurm-wlm munge" ;;
        --arm) ARM="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libgomp1:arm64"
               ARM="$ARM libgsl27:arm64 libgslcblas0:arm64 libglpk-dev:arm64 libcmocka-dev:arm64"
               PKGS="$PKGS $ARM" ;;
        *) echo "usage: sh install-deps.sh [--slurm] [--arm]" >&2; exit 2 ;;
    esac
done
# a name without an architecture is the machine's own: once arm64 is added, dpkg finds
# libglpk-dev ambiguous and wants libglpk-dev:amd64 (a package of Architecture all
# answers to its bare name only)
installed() {
    dpkg -s "$1" >/dev/null 2>&1 && return
    case "$1" in *:*) return 1 ;; esac
    dpkg -s "$1:$(dpkg --print-architecture)" >/dev/null 2>&1
}
missing=""
for p in $PKGS; do
    installed "$p" || missing="$missing $p"
done
# npm fetches test data; a node.js from elsewhere may bring its own (Debian's npm would conflict)
command -v npm >/dev/null 2>&1 || missing="$missing npm"
fetch() { # test data: llama.cpp's tokenizer vectors (tests/fetch-llama-cpp.sh)
    sh "$(dirname "$0")/tests/fetch-llama-cpp.sh"
}
if [ -z "$missing" ]; then
    echo "deps: all present ($PKGS)"
    fetch
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
        echo "deps: need root (or sudo) to install:$missing" >&2; exit 1; fi
fi
echo "deps: installing:$missing"
if [ -n "$ARM" ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
fi
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fetch
