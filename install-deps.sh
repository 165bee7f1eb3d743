#!/bin/sh
# Installs the Debian packages specdec needs to build, test and draw figures, and
# fetches the test data that cannot be committed (llama.cpp's tokenizer vectors).
# Safe to run again: it only calls apt-get when a package is missing.
# usage: sh install-deps.sh [--slurm]
#   --slurm  also Slurm and munge (slurm-wlm, munge), for `make test-slurm`, which starts a
#            private one-node cluster to run paper-figs/slurm.sbatch; the plain set-up
#            does without them
set -eu
# libopenmpi-dev and openmpi-bin: only `make mpi` (build-mpi/specdec) and its tests use them;
# python3-numpy: the Python adapters of `specdec certify --exec` (tests/exec/adapter.py) and
# the Python package over libspecdec.so (src/python/, tests/python/test_api.py);
# python3-setuptools, python3-wheel, python3-venv: `pip install --no-build-isolation .`
# offline (pyproject.toml, setup.py; tests/cli/python.sh installs into a fresh venv)
PKGS="build-essential libgsl-dev libglpk-dev glpk-utils libcmocka-dev gnuplot-nox git libopenmpi-dev openmpi-bin python3-numpy
      python3-setuptools python3-wheel python3-venv"
case "${1:-}" in
    "") ;;
    --slurm) PKGS="$PKGS slurm-wlm munge" ;;
    *) echo "usage: sh install-deps.sh [--slurm]" >&2; exit 2 ;;
esac
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
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
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fetch
