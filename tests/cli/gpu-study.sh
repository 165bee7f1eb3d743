#!/bin/sh
# The GPU study (tests/bench/gpu-study.sh) refuses a machine or build without a GPU
# before measuring anything, and rejects bad arguments. The plain build never has CUDA,
# so the refusal is certain here. (Its dry run, every step on the CPU: make
# bench-e2e-cuda-dry, minutes.)
# usage: gpu-study.sh path/to/specdec
SPECDEC=${1:-build/specdec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"
S=tests/bench/gpu-study.sh
B=$(dirname "$SPECDEC")
expect 1 "needs an NVIDIA GPU" -- env STUDY_BUILD="$B" sh $S --results "$T/r"
if [ -e "$T/r" ]; then bad "the refusal left a results folder"; else ok; fi
expect 1 "nothing measured" -- env STUDY_BUILD="$B" sh $S --steps decode --results "$T/r"
expect 2 "unknown step 'decod'" -- sh $S --steps decod
expect 2 "unknown argument '--bogus'" -- sh $S --bogus
expect 1 "is not built" -- env STUDY_BUILD="$T/none" sh $S
expect 0 "dry-run" -- sh $S --help
expect 2 "E2E_DEVICE=gpu" -- env E2E_DEVICE=gpu sh tests/bench/predict.sh "$B"
finish "cli gpu-study"
