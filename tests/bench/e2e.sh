#!/bin/sh
# make bench-e2e: speculative decoding end to end on the default pair (E2E_PAIR: the large pair when
# its files are here, else the shipped small pair; see e2e-env.sh) and the held-out prompts (data/prompts.txt).
#   1. every scheme: measured tokens/s against the prediction (specdec decode --scheme all)
#   2. greedy identity of every scheme on the pair (--check)
#   3. GT's threshold sweep (GTCP Table 4 and Fig. 3 in kind) at temperatures 0, 0.7, 1
#   4. the papers' LLM tables in kind on the pair (RSD fixed length/budget, MCSD
#      k-configurations, SpecTr K x L) through the tree engine's cost model
#   5. llama.cpp side by side: plain generation, llama-speculative-simple and
#      llama-speculative on the same GGUF pair, prompts, budget and threads (skipped
#      with a note when llama.cpp is not built: sh tests/bench/llamacpp/build.sh)
#   6. ParallelSpec's parallel drafter against the sequential draft, L = 1..8
#      (tests/bench/parallel.sh, also make bench-parallel)
# Figures: out/figs/e2e-predicted.{tsv,png,svg} and e2e-gt-sweep.* (paper-figs/*.gp).
# usage: tests/bench/e2e.sh [BUILD_DIR]
#   env: E2E_PROMPTS (default 20), E2E_TOKENS (64), E2E_THREADS (2), E2E_DEVICE (cpu),
#        E2E_OUT (out/figs); see e2e-env.sh
set -eu
BUILD=${1:-build}
. "$(dirname "$0")/e2e-env.sh"
PAIR="--target $TM --draft $DM --n-prompts $N --max-tokens $TOK --threads $TH $DEV"
echo "# bench-e2e: the $E2E_PAIR pair ($TM, $DM), $N prompts x $TOK tokens, $TH threads, load average $(cut -d' ' -f1 /proc/loadavg) at start"

echo
echo "== 1. every scheme, measured against predicted (temperature 1)"
"$SD" decode $PAIR --scheme all --tsv "$OUT/e2e-predicted.tsv" --quiet

echo
echo "== 2. greedy identity on the pair (temperature 0, every scheme's tokens against ar's)"
"$SD" decode --target $TM --draft $DM --n-prompts "$N" --max-tokens 32 --threads "$TH" $DEV \
    --scheme sd,spectr,mcsd,mcsd-wor,rsd-c,rsd-s,gt,gt-dynamic,throughput --check --quiet | grep '^check:'

echo
echo "== 3. GT threshold sweep: static and dynamic GT trees at c x {0.25, 0.5, 1, 2, 4}"
rm -f "$OUT/e2e-gt-sweep.tsv.part"
for temp in 0 0.7 1; do
    echo "-- temperature $temp"
    "$SD" decode $PAIR --gt-sweep 0.25,0.5,1,2,4 --temperature "$temp" --tsv "$OUT/e2e-gt-$temp.tsv" --quiet |
        awk '/^# costs/ || /^scheme/ || /^ar / || /^gt/ || /^throughput/'
    grep -v '^#' "$OUT/e2e-gt-$temp.tsv" >> "$OUT/e2e-gt-sweep.tsv.part"
    rm -f "$OUT/e2e-gt-$temp.tsv"
done
{ echo "# GT sweep: scheme shape threshold_mult temperature nodes tok_s pred_tok_s speedup pred_speedup block_eff pred_block_eff mean_accepted"
  cat "$OUT/e2e-gt-sweep.tsv.part"; } > "$OUT/e2e-gt-sweep.tsv"
rm -f "$OUT/e2e-gt-sweep.tsv.part"
awk -F'\t' '!/^#/ && $1 != "ar" {
        key = $4; if ($1 ~ /^gt x/) kind = "static"; else if ($1 ~ /^gt-dynamic/) kind = "dynamic"; else kind = "throughput"
        if (!(key SUBSEP kind in best) || $6 > best[key, kind]) { best[key, kind] = $6; arg[key, kind] = $3; pred[key, kind] = $7 }
        if (kind != "throughput" && $3 == 1) at1[key, kind] = $6 }
     END {
        for (k in best) { split(k, p, SUBSEP); temps[p[1]] = 1 }
        for (t in temps) {
            printf "temperature %s: static GT best at c x %s (%.1f t/s; at c: %.1f), dynamic GT best at c x %s (%.1f t/s; at c: %.1f), throughput tree %.1f t/s measured (%.1f predicted), %.2fx the best GT\n",
                t, arg[t, "static"], best[t, "static"], at1[t, "static"], arg[t, "dynamic"], best[t, "dynamic"], at1[t, "dynamic"],
                best[t, "throughput"], pred[t, "throughput"],
                best[t, "throughput"] / (best[t, "static"] > best[t, "dynamic"] ? best[t, "static"] : best[t, "dynamic"]) }
     }' "$OUT/e2e-gt-sweep.tsv"

echo
echo "== 4. the papers' LLM tables in kind on the pair (tree engine, Monte Carlo on the real models)"
LM="gguf:$DM,$TM"
C=$(awk -F'\t' '/c = M_D\/M_T/ { sub(/.*c = M_D\/M_T = /, ""); print; exit }' "$OUT/e2e-predicted.tsv")
MT=$(awk '/^# cost-target / { print $3; exit }' "$OUT/e2e-predicted.tsv")
echo "-- RSD fixed length 3 (block efficiency, token rate and MBSU at M_D = c = $C and the measured M_T(n))"
"$SD" compare --lm "$LM" --length 3 --samples 300 --cost-draft "$C" --cost-target "$MT" $DEV
echo "-- RSD fixed budget 10"
"$SD" compare --lm "$LM" --budget 10 --samples 300 --cost-draft "$C" --cost-target "$MT" $DEV
echo "-- MCSD k-configurations (i.i.d. and without replacement) and SpecTr K x L"
for spec in "specinfer 2,1,1" "rrs 2,1,1" "specinfer 4,2,1" "rrs 4,2,1" "kseq spectr:2,3" "kseq spectr:4,3"; do
    set -- $spec
    "$SD" tree --lm "$LM" --scheme "$1" --shape "$2" --samples 300 --no-exact --cost-draft "$C" --cost-target "$MT" \
        --threads "$TH" $DEV 2>/dev/null |
        awk -v s="$1 $2" '/block efficiency/ { be = $3 } /speedup/ { for (i = 1; i <= NF; i++) if ($i == "speedup") sp = $(i + 1) }
                          END { printf "%-22s block efficiency %s, predicted speedup %s\n", s, be, sp }'
done

echo
echo "== 5. llama.cpp side by side (same pair, prompts 1-$N, $TOK tokens, $TH threads, temperature 1)"
LB=.cache/llama.cpp-build/bin
if [ ! -x "$LB/llama-speculative-simple" ] || [ ! -x "$LB/llama-completion" ]; then
    echo "llama.cpp comparison skipped: not built (sh tests/bench/llamacpp/build.sh, about 6 minutes once)"
else
    # decode speed over the prompts: tokens and seconds summed, as specdec's rates are
    ll_ar=0 ll_ar_s=0 ll_sp=0 ll_sp_s=0 ll_tr=0 ll_tr_s=0 i=0
    head -n "$N" data/prompts.txt > "$OUT/e2e-prompts.txt"
    while IFS= read -r p; do
        i=$((i + 1))
        r=$("$LB/llama-completion" -m $TM -p "$p" -n "$TOK" -t "$TH" --temp 1 -s $i -c 256 -no-cnv 2>&1 < /dev/null |
            grep ' eval time =' | grep -v 'prompt eval' |
            sed -n 's/.* eval time = *\([0-9.]*\) ms \/ *\([0-9]*\) runs.*/\2 \1/p' |
            awk '{ n = $1; s = $2 / 1000 } END { print n + 0, s + 0 }')
        set -- $r; ll_ar=$((ll_ar + $1)); ll_ar_s=$(awk -v a="$ll_ar_s" -v b="$2" 'BEGIN { print a + b }')
        for kind in simple tree; do
            if [ $kind = simple ]; then
                out=$("$LB/llama-speculative-simple" -m $TM -md $DM --spec-type draft-simple --spec-draft-n-max 4 \
                      -p "$p" -n "$TOK" -t "$TH" -td "$TH" --temp 1 -s $i -c 256 2>&1 < /dev/null) || out=""
            else
                # one draft sequence: with -np 2 this llama.cpp asserts (logits != nullptr) on most prompts
                out=$("$LB/llama-speculative" -m $TM -md $DM --spec-draft-n-max 4 -np 1 \
                      -p "$p" -n "$TOK" -t "$TH" -td "$TH" --temp 1 -s $i -c 256 2>&1 < /dev/null) || out=""
            fi
            r=$(printf '%s\n' "$out" | awk '/decoded/ { for (k = 1; k <= NF; k++) { if ($k == "decoded") n = $(k + 1); if ($k == "in") s = $(k + 1) } } END { print n + 0, s + 0 }')
            set -- $r
            if [ $kind = simple ]; then ll_sp=$((ll_sp + $1)); ll_sp_s=$(awk -v a="$ll_sp_s" -v b="$2" 'BEGIN { print a + b }')
            else ll_tr=$((ll_tr + $1)); ll_tr_s=$(awk -v a="$ll_tr_s" -v b="$2" 'BEGIN { print a + b }'); fi
        done
    done < "$OUT/e2e-prompts.txt"
    rm -f "$OUT/e2e-prompts.txt"
    # goal 2's factor: the large pair's issue asks 1.5x llama.cpp's best speculative, the shipped pair's 1.2x
    G2=1.2
    [ "$E2E_PAIR" = large ] && G2=1.5
    awk -F'\t' -v n="$N" -v la="$ll_ar" -v las="$ll_ar_s" -v ls="$ll_sp" -v lss="$ll_sp_s" -v lt="$ll_tr" -v lts="$ll_tr_s" -v g2="$G2" '
        !/^#/ { r[$1] = $6; if ($1 != "ar" && $6 > best) { best = $6; bn = $1 } }
        END {
            lar = la / las; lsp = ls / lss; ltr = lt / lts; lbest = lsp > ltr ? lsp : ltr
            printf "%-34s %10s %10s\n", "", "tokens/s", "vs own AR"
            printf "%-34s %10.1f %10.3f\n", "llama.cpp plain generation", lar, 1
            printf "%-34s %10.1f %10.3f\n", "llama.cpp speculative-simple (4)", lsp, lsp / lar
            printf "%-34s %10.1f %10.3f\n", "llama.cpp speculative (4)", ltr, ltr / lar
            printf "%-34s %10.1f %10.3f\n", "specdec ar", r["ar"], 1
            printf "%-34s %10.1f %10.3f\n", "specdec sd (chain:4)", r["sd"], r["sd"] / r["ar"]
            printf "%-34s %10.1f %10.3f\n", "specdec best: " bn, best, best / r["ar"]
            printf "goal 1: specdec SD/AR %.3f >= llama.cpp best speculative/AR %.3f: %s\n", r["sd"] / r["ar"], lbest / lar,
                   (r["sd"] / r["ar"] >= lbest / lar ? "met" : "not met")
            printf "goal 2: specdec best %.1f >= %.1f x llama.cpp best speculative %.1f = %.1f: %s (%.2fx)\n", best, g2, lbest,
                   g2 * lbest, (best >= g2 * lbest ? "met" : "not met"), best / lbest
        }' "$OUT/e2e-predicted.tsv"
fi

echo
echo "== 6. ParallelSpec's drafter against the sequential one (tests/bench/parallel.sh)"
sh tests/bench/parallel.sh "$BUILD"

echo
if command -v gnuplot >/dev/null 2>&1; then
    mkdir -p "$DRAW/e2e"
    cp "$OUT/e2e-predicted.tsv" "$OUT/e2e-gt-sweep.tsv" "$DRAW/e2e/"
    sh plots/draw.sh "$DRAW/e2e" | tail -1
else
    echo "figures skipped: gnuplot is not installed"
fi
