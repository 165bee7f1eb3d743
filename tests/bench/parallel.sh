#!/bin/sh
# make bench-parallel: ParallelSpec's drafter end to end on the default pair (E2E_PAIR) (ParallelSpec
# Fig. 4 in kind): the pair's parallel drafter (parallel.gguf or large-parallel.gguf: its
# draft plus 7 [MASK] tokens, one pass drafts L tokens) against that draft (the same network drafting L tokens in
# L passes), both verified as chains, for L = 1..8; the cost model's prediction for each,
# the cost ratio above which the parallel drafter wins, token-tree verification, and
# greedy identity. Figure: out/figs/e2e-parallel.{tsv,png,svg} (paper-figs/e2e-parallel.gp).
# usage: tests/bench/parallel.sh [BUILD_DIR]
#   env: E2E_PROMPTS (default 20), E2E_TOKENS (64), E2E_THREADS (2), E2E_DEVICE (cpu),
#        E2E_OUT (out/figs); see e2e-env.sh
set -eu
BUILD=${1:-build}
. "$(dirname "$0")/e2e-env.sh"
PAIR="--target $TM --draft $PDM --parallel-draft $PM --n-prompts $N --max-tokens $TOK --threads $TH $DEV --quiet"
echo "# bench-parallel: $N prompts x $TOK tokens, $TH threads, load average $(cut -d' ' -f1 /proc/loadavg) at start"
for temp in 1 0; do
    echo
    echo "== parallel (parallel:L) vs sequential (chain:L) drafter, L = 1..8, temperature $temp"
    tsv=$OUT/e2e-parallel.tsv
    [ "$temp" = 1 ] || tsv=$OUT/e2e-parallel-t0.tsv.tmp
    "$SD" decode $PAIR --parallel-sweep 1-8 --temperature "$temp" --tsv "$tsv"
    rm -f "$OUT/e2e-parallel-t0.tsv.tmp"
done
echo
echo "== chain against token-tree verification with the parallel drafter (temperature 1)"
"$SD" decode $PAIR --scheme sd,parallel,parallel-tree | awk '/^# costs/ || /^scheme/ || /^ar / || /^sd / || /^parallel/'
echo
echo "== greedy identity with the parallel drafter (temperature 0)"
"$SD" decode $PAIR --scheme parallel,parallel-tree --check | grep '^check:'
if command -v gnuplot >/dev/null 2>&1; then
    mkdir -p "$DRAW/parallel"
    cp "$OUT/e2e-parallel.tsv" "$DRAW/parallel/"
    sh plots/draw.sh "$DRAW/parallel" | tail -1
fi
