#!/bin/sh
# make bench-kquant: the K-quant kernels on a Qwen2.5-1.5B-shaped Q4_K_M file with random
# weights (dim 1536, 28 layers, 12/2 heads of 128, ffn 8960, qwen2's vocabulary of
# 151936, untied output: 1.1 GB), specdec beside llama-bench on the same file, 2 threads:
# prompt (64 tokens), generation (64 tokens) and M_T(n), one pass of n tokens after a
# 64-token context, for n = 1..16 (llama-bench: pp n at depth 64, which computes the last
# token's logits only; specdec's figure is the same).
# KQUANT_SHAPE=0.5b: a Qwen2.5-0.5B-shaped one instead (dim 896, 24 layers, 14/2 heads of
# 64, ffn 4864: 0.5 GB), whose rows of 896 llama.cpp and specdec store as Q5_0 (Q8_0
# where the mix asks for Q6_K): the types of 32 beside the K-quants.
# The file is written once (about 3 minutes) to KQUANT_DIR (default /tmp), not the
# repository. Every figure is the best of several runs; on a shared machine they move
# from run to run: read the load average printed at the top, and compare the two
# programs' figures of one run.
# usage: tests/bench/kquant.sh [BUILD_DIR] [MODEL.gguf]
#   KQUANT_REUSE=1: specdec's figures of the last run (KQUANT_DIR/kquant-sd.txt), llama.cpp's anew
#   OMP_WAIT_POLICY=active: llama.cpp's threads spin between operations (its default;
#   passive here unless set); specdec's side always runs passive
set -eu
BUILD=${1:-build}
DIR=${KQUANT_DIR:-/tmp}
SHAPE_NAME=${KQUANT_SHAPE:-1.5b}
case $SHAPE_NAME in
1.5b) SHAPE=1536,28,12,2,8960,0 ;;
0.5b) SHAPE=896,24,14,2,4864,0 ;;
*) echo "kquant.sh: KQUANT_SHAPE=$SHAPE_NAME: not 1.5b or 0.5b" >&2; exit 2 ;;
esac
MODEL=${2:-$DIR/specdec-qwen2.5-$SHAPE_NAME-shape-q4_k_m.gguf}
B=$BUILD/tests/bench/bench_model
SD=$BUILD/specdec
VOC=.cache/llama.cpp/models/ggml-vocab-qwen2.gguf
[ -x "$B" ] && [ -x "$SD" ] || { echo "kquant.sh: $B or $SD is not built (make $B $SD)" >&2; exit 1; }
LB=
for d in "${LLAMA_BUILD:-}" .cache/llama.cpp-build out/llama.cpp-build; do
    if [ -n "$d" ] && [ -x "$d/bin/llama-bench" ]; then LB=$d/bin; break; fi
done
if [ ! -f "$MODEL" ]; then
    [ -f "$VOC" ] || { echo "kquant.sh: no $VOC (tests/fetch-llama-cpp.sh)" >&2; exit 1; }
    "$SD" random-model --arch qwen2 --vocab "$VOC" --shape $SHAPE --type q4_k_m --ctx 4096 \
        --out "$MODEL" || exit 1
fi
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, $MODEL"
echo "## specdec (bench_model --every-n, 2 threads)"
if [ -n "${KQUANT_REUSE:-}" ] && [ -f "$DIR/kquant-sd.txt" ]; then # the last run's figures
    cat "$DIR/kquant-sd.txt"
else
    # passive: with OMP_WAIT_POLICY=active exported to both sides, specdec's M_T(16) on
    # an 82M Q8_0 model took 26 ms against 13.4 (OpenMP's threads, which bench_model
    # uses for its bandwidth and FMA figures, left spinning beside the pool's)
    OMP_WAIT_POLICY=passive "$B" "$MODEL" --threads 2 --every-n | grep -v "^# prompt\|^# passes\|^# every" |
        tee "$DIR/kquant-sd.txt"
fi
if [ -z "$LB" ]; then
    echo "(llama.cpp not built: sh tests/bench/llamacpp/build.sh for the side-by-side figures)"
    exit 0
fi
# OpenMP's passive waits, as specdec's pool sleeps between loops: with llama.cpp's
# default (spinning) threads on a shared, oversubscribed machine its times were 2 to 6
# times longer (OMP_WAIT_POLICY=active to see them)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
echo "## llama-bench, 2 threads, OMP_WAIT_POLICY=$OMP_WAIT_POLICY, pp n at depth 64 (n = 1..16), pp64, tg64"
export LD_LIBRARY_PATH="$LB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
    timeout 900 "$LB/llama-bench" -m "$MODEL" -t 2 -p 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 -n 0 -d 64 -r 5 -o csv 2>/dev/null
    timeout 900 "$LB/llama-bench" -m "$MODEL" -t 2 -p 64 -n 64 -r 5 -o csv 2>/dev/null | tail -n +2
} | awk -F, '{ gsub(/"/, "") } NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "avg_ts") c = i; if ($i == "n_prompt") p = i; if ($i == "n_gen") g = i; if ($i == "n_depth") d = i } next }
             { if ($g > 0) printf "tg%-3s %9.1f t/s\n", $g, $c; else if ($d > 0) printf "pp%-3s@d%s %8.3f ms\n", $p, $d, 1000 * $p / $c; else printf "pp%-3s %9.1f t/s\n", $p, $c }' |
    tee "$DIR/kquant-llama.txt"
# side by side: M_T(n) (the last token's logits) in ms, llama.cpp / specdec (>1: specdec faster)
echo "## side by side (ratio: llama.cpp's time / specdec's; > 1 means specdec is faster)"
sd_mt=$(sed -n "s/^# [A-Z0-9_]* M_T(n), ms, n = 1..16 (the last token's logits)://p" "$DIR/kquant-sd.txt")
lc_mt=$(awk '/@d/ { print $(NF - 1) }' "$DIR/kquant-llama.txt" | paste -sd' ' -)
echo "$sd_mt" "|" "$lc_mt" | awk '{ for (i = 1; i <= 16; i++) printf "M_T(%2d)  specdec %8.3f ms  llama.cpp %8.3f ms  ratio %.2f\n", i, $i, $(i + 17), $(i + 17) / $i }'
set -- $(awk '$1 ~ /^Q[0-9]_/ && NF >= 5 { print $4, $5; exit }' "$DIR/kquant-sd.txt")
lp=$(awk '$1 == "pp64" { print $2 }' "$DIR/kquant-llama.txt"); lg=$(awk '$1 == "tg64" { print $2 }' "$DIR/kquant-llama.txt")
awk -v sp="$1" -v sg="$2" -v lp="$lp" -v lg="$lg" 'BEGIN { printf "prompt 64  specdec %8.1f t/s  llama.cpp %8.1f t/s  ratio %.2f\ngeneration specdec %8.1f t/s  llama.cpp %8.1f t/s  ratio %.2f\n", sp, lp, sp / lp, sg, lg, sg / lg }'
