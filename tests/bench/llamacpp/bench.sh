#!/bin/sh
# make bench's comparison with llama.cpp: the same GGUF files (a random Llama model
# written by bench_model, llama.cpp's SentencePiece vocabulary, F32 and Q8_0) through
# both decoders. Prints the logit agreement (bench_llamacpp) and prompt/generation
# tokens per second side by side (llama-bench and bench_model, 2 threads, 64 + 64).
# Skips with a note when llama.cpp is not built (tests/bench/llamacpp/build.sh, ~6 min).
# usage: tests/bench/llamacpp/bench.sh BUILD_DIR
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
LB=$ROOT/.cache/llama.cpp-build/bin
VOCAB=$ROOT/.cache/llama.cpp/models/ggml-vocab-llama-spm.gguf
if [ ! -x "$LB/llama-bench" ] || [ ! -x "$LB/ref_logits" ]; then
    echo "llama.cpp comparison skipped: llama.cpp is not built (sh tests/bench/llamacpp/build.sh, about 6 minutes once)"
    exit 0
fi
[ -f "$VOCAB" ] || sh "$ROOT/tests/fetch-llama-cpp.sh"
MODELS=$ROOT/.cache/models
mkdir -p "$MODELS"
P=$MODELS/bench-random
[ -f "$P-q8_0.gguf" ] || "$BUILD/tests/bench/bench_model" --write "$P" --vocab-from "$VOCAB"
TOK=1,15043,3186,29892,590,1024,338,4485,322,306,763,304,1708,29889,450,4996,17354,1701,29916,432
load=$(cut -d' ' -f1 /proc/loadavg)
echo "# specdec against llama.cpp ($(git -C "$ROOT/.cache/llama.cpp" rev-parse --short HEAD)), 2 threads, load average $load when started"
for t in f32 q8_0; do
    M=$P-$t.gguf
    "$LB/ref_logits" -m "$M" -o "$MODELS/bench-ref-$t.npy" --tokens "$TOK" -t 2 >/dev/null
    "$BUILD/tests/bench/bench_llamacpp" "$M" "$MODELS/bench-ref-$t.npy" "$TOK" --threads 2
    ll=$("$LB/llama-bench" -m "$M" -t 2 -p 64 -n 64 -r 5 -fa off -o csv 2>/dev/null |
         awk -F, '{ gsub(/"/, "") } NR == 1 { for (i = 1; i <= NF; i++) if ($i == "avg_ts") c = i; next }
                  { printf "%s ", $c }')
    sd=$("$BUILD/tests/bench/bench_model" "$M" --threads 2 | awk '$1 ~ /^(F32|Q8_0)$/ { print $4, $5 }')
    set -- $ll
    lp=$1 lg=$2
    set -- $sd
    awk -v t="$t" -v lp="$lp" -v lg="$lg" -v sp="$1" -v sg="$2" 'BEGIN {
        printf "%-5s prompt (64 tokens): llama.cpp %9.1f t/s, specdec %9.1f t/s (%.2fx)\n", t, lp, sp, sp / lp
        printf "%-5s generation (64):    llama.cpp %9.1f t/s, specdec %9.1f t/s (%.2fx; goal >= 0.8x)\n", t, lg, sg, sg / lg }'
done
