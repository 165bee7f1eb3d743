#!/bin/sh
# make bench-wide: the wide pair on the CPU, the regime of a 1B model on a laptop: the
# large target widened to 1.002B parameters with inert neurons (data/models/large-wide.sh:
# 2.0 GB of F16 that every pass streams from memory; its logits are the large target's)
# and data/models/large-draft.gguf. Every scheme measured beside its prediction (specdec
# decode --scheme all), and one row: the machine, M_T(1) and the weight bytes it streams
# a second against the one-token pass of the same file on the GPU (tests/gpu-check.sh's
# wide steps), ar's rate, the best scheme's speedup and its prediction.
# usage: tests/bench/wide-cpu.sh [BUILD_DIR]
#   env: E2E_PROMPTS (default 2), E2E_TOKENS (32), E2E_THREADS (the machine's cores),
#        WIDE_CAL (calibration prompts, 1), E2E_OUT (out/bench-wide: wide-cpu.tsv with
#        decode's rows, wide-cpu.txt its table)
set -eu
BUILD=${1:-build}
E2E_PAIR=wide E2E_PROMPTS=${E2E_PROMPTS:-2} E2E_TOKENS=${E2E_TOKENS:-32} E2E_THREADS=${E2E_THREADS:-$(nproc)}
E2E_OUT=${E2E_OUT:-out/bench-wide}
. "$(dirname "$0")/e2e-env.sh"
CPU="$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) cores$(grep -q avx512f /proc/cpuinfo && echo ', AVX-512')"
echo "# bench-wide: $TM / $DM on the CPU ($CPU), $N prompts x $TOK tokens, $TH threads, load average $(cut -d' ' -f1 /proc/loadavg) at start"
t0=$(date +%s)
"$SD" decode --target "$TM" --draft "$DM" --n-prompts "$N" --max-tokens "$TOK" --threads "$TH" \
    --calibrate "${WIDE_CAL:-1}" --scheme all --tsv "$OUT/wide-cpu.tsv" --quiet > "$OUT/wide-cpu.txt"
sed -n '/^# costs/p; /^scheme/,/^# each/p' "$OUT/wide-cpu.txt" | grep -v '^# each'
bytes=$(wc -c < "$TM")
awk -F'\t' -v cpu="$CPU" -v bytes="$bytes" -v s=$(( $(date +%s) - t0 )) '
    /^# cost-target/ { next }
    !/^#/ && $1 == "ar" { ar = $6; mt = $21 }
    !/^#/ && $1 != "ar" && $8 > best { best = $8; b = $1; p = $9; lo = $15; hi = $16 }
    END { printf "bench-wide: %s: M_T(1) %.1f ms (%.1f GB/s of weights), ar %.2f tokens/s, best %s %.3fx (predicted %.3f [%.3f, %.3f]); %d s\n",
                 cpu, mt, bytes / mt / 1e6, ar, b, best, p, lo, hi, s }' "$OUT/wide-cpu.tsv"
