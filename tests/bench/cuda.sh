#!/bin/sh
# make bench-cuda: the CUDA decoder's speed on a GPU (tests/bench/bench_cuda.c), on the
# shipped target and on 1B-class random models (F16 and Q8_0, written once into
# out/cuda/ by specdec random-model), then the logits check of test_cuda on the 1B
# F16 model. Fails at once, saying so, on a machine without a CUDA device.
# CUDA_MODELS=DIR puts the models (3.4 GB) and bench.txt elsewhere; RESULTS=DIR also
# copies bench.txt there.
set -eu
cd "$(dirname "$0")/../.."
B=build-cuda
# a bundle from tests/bench/cuda-bundle.sh carries its libraries
[ -d $B/lib ] && export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
DIR=${CUDA_MODELS:-out/cuda}
if ! $B/tests/bench/bench_cuda --reps 1 /dev/null 2>/tmp/bench_cuda_probe.$$ >/dev/null; then
    if grep -q "no CUDA device\|built without CUDA" /tmp/bench_cuda_probe.$$; then
        echo "bench-cuda: $(cat /tmp/bench_cuda_probe.$$ | head -1)" >&2
        echo "bench-cuda: needs a machine with an NVIDIA GPU (nothing measured)" >&2
        rm -f /tmp/bench_cuda_probe.$$
        exit 1
    fi
fi
rm -f /tmp/bench_cuda_probe.$$
mkdir -p "$DIR"
for t in f16 q8_0; do
    [ -s "$DIR/llama-1b-$t.gguf" ] || $B/specdec random-model --type $t --out "$DIR/llama-1b-$t.gguf"
done
$B/tests/bench/bench_cuda data/models/target.gguf "$DIR/llama-1b-f16.gguf" "$DIR/llama-1b-q8_0.gguf" \
    | tee "$DIR/bench.txt"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" >> "$DIR/bench.txt"
[ -n "${RESULTS:-}" ] && mkdir -p "$RESULTS" && cp "$DIR/bench.txt" "$RESULTS/"
SPECDEC_CUDA_MODEL="$DIR/llama-1b-f16.gguf" $B/tests/test_cuda
