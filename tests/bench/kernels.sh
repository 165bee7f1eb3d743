#!/bin/sh
# make bench-kernels: the CPU decoder's kernels and threads on the shipped target, in one
# run: the matrix products alone (GFLOP/s beside the machine's FMA peak; then the pass's
# products with 2 threads, a loop each and in one loop, beside the whole pass), the model
# bench at 2 threads beside llama-bench on the same file when llama.cpp is built
# (tests/bench/llamacpp/build.sh), and 1 against 2 threads with and without a busy
# process beside them: bench_model --load 1, and specdec generate's wall rate beside
# `yes` (KERNELS_RUNS runs each, default 8).
# Every figure is the best of several runs; on a shared machine they still move from
# run to run: read the load average printed at the top.
# usage: tests/bench/kernels.sh [BUILD_DIR] [MODEL.gguf]
set -eu
BUILD=${1:-build}
MODEL=${2:-data/models/target.gguf}
B=$BUILD/tests/bench/bench_model
LB=.cache/llama.cpp-build/bin/llama-bench
[ -x "$B" ] || { echo "kernels.sh: $B is not built (make $B)" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "kernels.sh: no model $MODEL" >&2; exit 1; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
"$B" "$MODEL" --kernels
echo
echo "## the pass's products alone, 2 threads: a loop each, in one loop, beside the whole pass"
"$B" "$MODEL" --threads 2 --products || echo "(the products alone: not measured on this model)"
echo
echo "## the model, 2 threads: specdec and llama.cpp (OpenMP's passive and active waits)"
echo "specdec:"
"$B" "$MODEL" --threads 2 | grep -v "^# prompt\|^# passes\|^# every\|^type" | sed 's/^/  /'
if [ -x "$LB" ]; then
    for pol in passive active; do
        echo "llama-bench, OMP_WAIT_POLICY=$pol:"
        OMP_WAIT_POLICY=$pol "$LB" -m "$MODEL" -t 2 -p 1,2,4,8,16,32,64 -n 64 -r 5 -o csv 2>/dev/null |
            awk -F, '{ gsub(/"/, "") } NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "avg_ts") c = i; if ($i == "n_prompt") p = i; if ($i == "n_gen") g = i } next }
                     { if ($g > 0) printf "  tg%-3s %9.1f t/s\n", $g, $c; else { printf "  pp%-3s %9.1f t/s", $p, $c; if ($p == 1) one = $c; printf "   %.3f ms a pass", 1000 * $p / $c; if (one) printf "   M_T(%s)/M_T(1) = %.2f", $p, $p * one / $c; printf "\n" } }'
    done
else
    echo "(llama.cpp not built: sh tests/bench/llamacpp/build.sh for the side-by-side figures)"
fi
echo
echo "## 1 vs 2 threads, alone and beside one busy process (bench_model: the best of its runs)"
for load in 0 1; do
    for t in 1 2; do
        r=$("$B" "$MODEL" --threads $t --load $load | tail -n 1)
        set -- $r
        printf 'load %d  %d thread(s): prompt %9s t/s  generation %9s t/s\n' "$load" "$t" "$4" "$5"
    done
done
# what a user sees: specdec generate, 200 tokens, its generation's wall rate, the two
# thread counts taking turns (the mean over the runs, and the slowest)
SD=$BUILD/specdec
if [ -x "$SD" ]; then
    RUNS=${KERNELS_RUNS:-8}
    echo
    echo "## specdec generate --max-tokens 200, beside one busy process: 1 vs 2 threads, $RUNS runs each, taking turns"
    yes > /dev/null &
    busy=$!
    trap 'kill $busy 2>/dev/null' EXIT
    for i in $(seq "$RUNS"); do
        for t in 1 2; do
            "$SD" generate --model "$MODEL" --prompt "Once upon a time there was a" --max-tokens 200 \
                --temperature 0 --json --threads $t |
                sed -n 's/.*"generation_wall_tokens_per_second": \([0-9.]*\).*/\1/p' | sed "s/^/$t /"
        done
    done | awk '{ s[$1] += $2; n[$1]++; if (!($1 in lo) || $2 < lo[$1]) lo[$1] = $2; r[$1] = r[$1] sprintf(" %.0f", $2) }
                END { for (t = 1; t <= 2; t++) printf "%d thread(s): mean %7.0f t/s, slowest %7.0f:%s\n", t, s[t] / n[t], lo[t], r[t];
                      printf "2 threads / 1 thread: %.3f (means)\n", (s[2] / n[2]) / (s[1] / n[1]) }'
    kill $busy 2>/dev/null
fi
