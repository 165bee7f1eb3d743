#!/bin/sh
# make bench-kernels: the CPU decoder's kernels and threads on the shipped target, in one
# run: the matrix products alone (GFLOP/s beside the machine's FMA peak), the model
# bench at 2 threads beside llama-bench on the same file when llama.cpp is built
# (tests/bench/llamacpp/build.sh), and 1 against 2 threads with and without a busy
# process beside them (bench_model --load 1), under passive, brief (the decoder
# commands' default) and active waits.
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
# waits: OpenMP's policy, or brief: the decoder commands' default (a spin of about
# 0.1 ms, then sleep; src/cli/main.c)
waits() {
    w=$1
    shift
    case $w in
        brief) env OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=10000 "$@" ;;
        *) env OMP_WAIT_POLICY="$w" "$@" ;;
    esac
}
echo "## the model, 2 threads: specdec (passive, brief and active waits) and llama.cpp"
for pol in passive brief active; do
    echo "specdec, waits $pol:"
    waits $pol "$B" "$MODEL" --threads 2 | tail -n 4 | sed 's/^/  /'
done
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
echo "## 1 vs 2 threads, alone and beside one busy process (prompt t/s, generation t/s)"
for pol in passive brief active; do
    for load in 0 1; do
        for t in 1 2; do
            r=$(waits $pol "$B" "$MODEL" --threads $t --load $load | tail -n 1)
            set -- $r
            printf '%-8s load %d  %d thread(s): prompt %9s t/s  generation %9s t/s\n' "$pol" "$load" "$t" "$4" "$5"
        done
    done
done
