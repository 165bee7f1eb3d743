#!/bin/sh
# make test-cuda, after test_cuda: `generate --device cuda` at temperature 0 prints the
# CPU's tokens, on 20 prompts x 64 tokens, for a random model with F32 weights (the
# GPU computes in F16/BF16 with F32 sums: a token may flip only where two logits tie
# within that rounding: no prompt may differ) and for the shipped target (F16 weights:
# both decoders round differently inside a pass, so a greedy token may flip at a near
# tie and the rest of that prompt follows another path: at most a quarter of the
# prompts, at least one, may differ; each difference is reported with its position).
# Says "skipped: no CUDA device" (exit 0) without a GPU or driver, and only then: any
# other reason (a build without CUDA, a driver older than the runtime) fails, and with
# SPECDEC_REQUIRE_GPU=1 (tests/gpu-check.sh on the GPU machine) so does no device.
# DEVICE cpu compares the CPU against itself at another thread count: the script's
# plumbing without a GPU (tests/gpu-check.sh --dry-run).
# usage: tests/cuda_generate.sh [BUILD-CUDA] [N-PROMPTS] [TOKENS] [DEVICE]
set -u
B=${1:-build-cuda}
NP=${2:-20}
NT=${3:-64}
DEV=${4:-cuda}
S=$B/specdec
case $DEV in cuda|cpu) ;; *) echo "cuda generate: DEVICE '$DEV': expected cuda or cpu" >&2; exit 2 ;; esac
[ -d $B/lib ] && export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM
if ! timeout 120 $S generate --model data/models/target.gguf --prompt probe --max-tokens 1 --device $DEV --ids \
        >/dev/null 2>"$T/probe"; then
    if grep -q "no CUDA device" "$T/probe" && [ "${SPECDEC_REQUIRE_GPU:-0}" = 0 ]; then
        echo "cuda generate: skipped: no CUDA device ($(head -1 "$T/probe"))"
        exit 0
    fi
    echo "cuda generate: FAIL: the probe (generate --device $DEV) failed${SPECDEC_REQUIRE_GPU:+ with SPECDEC_REQUIRE_GPU=$SPECDEC_REQUIRE_GPU}: $(head -3 "$T/probe")" >&2
    exit 1
fi
# the other side: the CPU at 2 threads; with DEVICE cpu, the CPU at 1 thread
TH=2
[ $DEV = cpu ] && TH=1
$S random-model --type f32 --shape 256,4,8,4,768,4096 --ctx 512 --seed 7 --out "$T/f32.gguf" >/dev/null 2>"$T/err" ||
    { echo "cuda generate: FAIL: random-model: $(cat "$T/err")" >&2; exit 1; }
fail=0
head -n "$NP" data/prompts.txt > "$T/prompts"
NP=$(wc -l < "$T/prompts")
for model in "$T/f32.gguf" data/models/target.gguf; do
    same=0 diff=0 where=""
    i=0
    while IFS= read -r p; do
        i=$((i + 1))
        for side in cpu:2 $DEV:$TH; do
            timeout 120 $S generate --model "$model" --prompt "$p" --max-tokens "$NT" --temperature 0 \
                --device ${side%:*} --ids --threads ${side#*:} > "$T/${side%:*}-${side#*:}" 2>"$T/err" ||
                { echo "cuda generate: FAIL: $model prompt $i on ${side%:*}: $(head -3 "$T/err")" >&2; exit 1; }
        done
        if cmp -s "$T/cpu-2" "$T/$DEV-$TH"; then same=$((same + 1)); else
            diff=$((diff + 1))
            k=$(paste -d' ' "$T/cpu-2" "$T/$DEV-$TH" |
                awk '{n = NF / 2; for (j = 1; j <= n; j++) if ($j != $(j + n)) { print j; exit }}')
            where="$where${where:+, }prompt $i from token ${k:-?}"
        fi
    done < "$T/prompts"
    case $model in *f32.gguf) allowed=0 ;; *) allowed=$((NP / 4)); [ $allowed -ge 1 ] || allowed=1 ;; esac
    verdict=ok
    [ $diff -le $allowed ] || { verdict=FAIL; fail=1; }
    echo "cuda generate: $model: $same of $NP prompts x $NT tokens equal to the CPU's ($diff differ, at most $allowed allowed: $verdict)${where:+; differences: $where}"
done
if [ $fail -eq 0 ]; then echo "cuda generate: PASS"
else echo "cuda generate: FAIL (F32 weights must give the CPU's greedy tokens; F16 may differ on at most a quarter of the prompts)"; fi
exit $fail
