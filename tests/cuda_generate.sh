#!/bin/sh
# make test-cuda, after test_cuda: `generate --device cuda` at temperature 0 prints the
# CPU's tokens, on 20 prompts x 64 tokens, for a random model with F32 weights (the
# GPU computes in F16/BF16 with F32 sums: a token may flip only where two logits tie
# within that rounding) and for the shipped target (F16 weights: the same rounding on
# both sides; a flip there is reported with its position, not failed, since both
# decoders round differently inside a pass). Says "skipped: no CUDA device" without one.
# usage: tests/cuda_generate.sh [BUILD-CUDA] [N-PROMPTS] [TOKENS]
set -u
B=${1:-build-cuda}
NP=${2:-20}
NT=${3:-64}
S=$B/specdec
[ -d $B/lib ] && export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM
if ! $S generate --model data/models/target.gguf --prompt probe --max-tokens 1 --device cuda --ids \
        >/dev/null 2>"$T/probe"; then
    if grep -q "no CUDA device\|built without CUDA" "$T/probe"; then
        echo "cuda generate: skipped: no CUDA device ($(head -1 "$T/probe"))"
        exit 0
    fi
    echo "cuda generate: the probe failed: $(cat "$T/probe")" >&2
    exit 1
fi
$S random-model --type f32 --shape 256,4,8,4,768,4096 --ctx 512 --seed 7 --out "$T/f32.gguf" >/dev/null || exit 1
fail=0
for model in "$T/f32.gguf" data/models/target.gguf; do
    same=0 diff=0 first=""
    i=0
    head -n "$NP" data/prompts.txt > "$T/prompts"
    while IFS= read -r p; do
        i=$((i + 1))
        for d in cpu cuda; do
            timeout 120 $S generate --model "$model" --prompt "$p" --max-tokens "$NT" --temperature 0 \
                --device $d --ids --threads 2 > "$T/$d" 2>"$T/err" ||
                { echo "cuda generate: $model prompt $i on $d: $(cat "$T/err")" >&2; exit 1; }
        done
        if cmp -s "$T/cpu" "$T/cuda"; then same=$((same + 1)); else
            diff=$((diff + 1))
            k=$(paste -d' ' "$T/cpu" "$T/cuda" | awk '{n = NF / 2; for (j = 1; j <= n; j++) if ($j != $(j + n)) { print j; exit }}')
            [ -z "$first" ] && first="prompt $i from token $k"
        fi
    done < "$T/prompts"
    echo "cuda generate: $model: $same of $NP prompts x $NT tokens equal to the CPU's${first:+ (first difference: $first)}"
    case $model in *f32.gguf) [ $diff -eq 0 ] || fail=1 ;; esac
done
[ $fail -eq 0 ] && echo "cuda generate: PASS" || echo "cuda generate: FAIL (F32 weights must give the CPU's greedy tokens)"
exit $fail
