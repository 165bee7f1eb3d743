#!/bin/sh
# make bench-predict: do the predictions hold? `specdec decode --scheme all` runs RUNS
# times on the default pair (E2E_PAIR) (each run: its own cost ladder, calibration and measured,
# interleaved runs), and for every scheme this prints the error of the predicted speedup
# (measured / predicted - 1) over the runs: its mean, spread, median |error|, and how
# often the measured speedup fell inside the predicted interval (--level, default 0.9).
# Goals (issue "predictions that hold on any machine"), printed at the end as met or missed:
# median |error| <= 5%, coverage >= 90% of (scheme, run) pairs, the 0.9 intervals of sd and
# throughput no wider than +-12% of the prediction, the mean error within +-3%.
# usage: tests/bench/predict.sh [BUILD_DIR]
#   env: PREDICT_RUNS (default 5), E2E_PROMPTS (20), E2E_TOKENS (64), E2E_THREADS (2),
#        PREDICT_ARGS (more decode options, e.g. "--calibrate 16" or "--temperature 0.7"),
#        PREDICT_CPUS (kernel sets, e.g. "avx2 avx512": the whole benchmark once per set,
#        SPECDEC_CPU=set, into predict-runs-SET.tsv; default: the machine's own, once),
#        PREDICT_FROM (a predict-runs.tsv written before: its summary alone, no run),
#        PREDICT_DRIFT_LOG (out/drift-runs.tsv: each run's shift appended, decode
#        --drift-log; the end prints the spread of every run there of this machine and
#        pair, what decode --drift FILE takes), E2E_DEVICE (cpu), E2E_OUT (out/figs);
#        see e2e-env.sh
set -eu
BUILD=${1:-build}
if [ -n "${PREDICT_CPUS:-}" ]; then
    for s in $PREDICT_CPUS; do
        echo "## kernel set $s (SPECDEC_CPU=$s)"
        PREDICT_CPUS='' PREDICT_TAG="-$s" SPECDEC_CPU=$s sh "$0" "$BUILD"
        echo
    done
    exit 0
fi
. "$(dirname "$0")/e2e-env.sh"
RUNS=${PREDICT_RUNS:-5}
ARGS=${PREDICT_ARGS:-}
DRIFT_LOG=${PREDICT_DRIFT_LOG:-out/drift-runs.tsv}
mkdir -p "$(dirname "$DRIFT_LOG")"
TSV=${PREDICT_FROM:-$OUT/predict-runs${PREDICT_TAG:-}.tsv}
if [ -z "${PREDICT_FROM:-}" ]; then
    echo "# bench-predict: the $E2E_PAIR pair ($TM, $DM), $RUNS runs of decode --scheme all, $N prompts x $TOK tokens, $TH threads $ARGS;" \
         "SPECDEC_CPU=${SPECDEC_CPU:-(the machine's best)}; load average $(cut -d' ' -f1 /proc/loadavg) at start"
    rm -f "$TSV"
    r=1
    while [ "$r" -le "$RUNS" ]; do
        # shellcheck disable=SC2086
        "$SD" decode --target "$TM" --draft "$DM" --n-prompts "$N" --max-tokens "$TOK" --threads "$TH" \
            --scheme all --seed $((2385 + r)) --tsv "$OUT/predict-run.tsv" --drift-log "$DRIFT_LOG" --quiet $DEV $ARGS \
            > "$OUT/predict-run.txt"
        grep -v '^#' "$OUT/predict-run.tsv" | awk -v r="$r" '{ print r "\t" $0 }' >> "$TSV"
        # a built tree where no node pays at this run's costs has no row: say so
        grep ' skipped: ' "$OUT/predict-run.txt" | sed "s/^/run $r: /" || true
        echo "run $r of $RUNS done"
        r=$((r + 1))
    done
    rm -f "$OUT/predict-run.tsv" "$OUT/predict-run.txt"
else
    [ -s "$TSV" ] || { echo "PREDICT_FROM=$TSV: no such file, or empty" >&2; exit 1; }
    echo "# bench-predict: the runs in $TSV"
fi
# columns of predict-runs.tsv: run, then decode's TSV (scheme $2, speedup $9, pred_speedup $10,
# block_eff $11, pred_block_eff $12, draft_ms $14, pred_draft_ms $15, pred_speedup_lo $16,
# pred_speedup_hi $17, target_ms $22, pred_target_ms $23, overhead_ms $24, pred_overhead_ms $25,
# vs_best $26 (1: the predicted best), vs_best_lo $27, vs_best_hi $28;
# the ar row: its ms per token, target $22 (pred $23) and the rest $24 (pred $25))
awk -F '\t' '
$2 == "ar" { arm[$1] = $22 + $24; arp[$1] = $23 + $25; next }
{
    s = $2; err = $9 / $10 - 1; n[s]++; sum[s] += err; sq[s] += err * err
    e[s, n[s]] = err < 0 ? -err : err
    inside[s] += ($9 >= $16 && $9 <= $17); width[s] += ($17 - $16) / $10
    half[s] += ($17 / $10 - 1 > 1 - $16 / $10 ? $17 / $10 - 1 : 1 - $16 / $10)
    if (!(s in seen)) { seen[s] = 1; order[++ns] = s }
    all++; allin += ($9 >= $16 && $9 <= $17); alle[all] = err < 0 ? -err : err; allsum += err
    rn[$1]++; rin[$1] += ($9 >= $16 && $9 <= $17); if ($1 > nrun) nrun = $1
}
END {
    printf "%-16s %4s %8s %8s %8s %9s %9s\n", "scheme", "runs", "mean%", "sd%", "med|e|%", "covered", "width%"
    for (i = 1; i <= ns; i++) {
        s = order[i]; m = sum[s] / n[s]; v = n[s] > 1 ? (sq[s] - n[s] * m * m) / (n[s] - 1) : 0
        k = n[s]; for (a = 1; a <= k; a++) x[a] = e[s, a]
        for (a = 2; a <= k; a++) for (b = a; b > 1 && x[b] < x[b - 1]; b--) { t = x[b]; x[b] = x[b - 1]; x[b - 1] = t }
        med = k % 2 ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2
        printf "%-16s %4d %+8.1f %8.1f %8.1f %5d/%-3d %9.1f\n", s, n[s], 100 * m, 100 * sqrt(v > 0 ? v : 0), 100 * med,
               inside[s], n[s], 100 * width[s] / n[s]
    }
    for (a = 2; a <= all; a++) for (b = a; b > 1 && alle[b] < alle[b - 1]; b--) { t = alle[b]; alle[b] = alle[b - 1]; alle[b - 1] = t }
    med = all % 2 ? alle[(all + 1) / 2] : (alle[all / 2] + alle[all / 2 + 1]) / 2
    printf "all: %d (scheme, run) pairs, mean error %+.1f%%, median |error| %.1f%%, covered %d of %d (%.0f%%)\n",
           all, 100 * allsum / all, 100 * med, allin, all, 100 * allin / all
    # how far from 0.9 a count may fall by chance: P(X <= allin), X ~ Binomial(all, 0.9), as
    # if the pairs were independent; the pairs of a run share its minutes of the machine, so the
    # counts of whole runs spread wider than that
    pk = 0.1 ^ all; tail = 0
    for (k = 0; k <= allin; k++) { tail += pk; pk *= (all - k) / (k + 1) * 9 }
    byrun = ""; for (r = 1; r <= nrun; r++) if (rn[r]) byrun = byrun sprintf(" %d/%d", rin[r], rn[r])
    printf "coverage by run:%s; for intervals that hold at 0.9, %d or fewer of %d independent pairs inside has " \
           "probability %.3f\n", byrun, allin, all, tail
    # the goals: the half-width of an interval is its wider side over the prediction, mean over runs
    for (i = 1; i <= ns; i++) if (sum[order[i]] / n[order[i]] >= -0.03 && sum[order[i]] / n[order[i]] <= 0.03) unb++
    hs = n["sd"] ? half["sd"] / n["sd"] : -1; ht = n["throughput"] ? half["throughput"] / n["throughput"] : -1
    printf "goals: median |error| %.1f%% (<= 5%%: %s); covered %.0f%% (>= 90%%: %s); half-width sd %s, throughput %s (<= 12%%: %s);" \
           " mean error %+.1f%% (within 3%%: %s), %d of %d schemes mean error within 3%%\n",
           100 * med, (med <= 0.05 ? "met" : "missed"), 100 * allin / all, (allin >= 0.9 * all ? "met" : "missed"),
           (hs < 0 ? "-" : sprintf("%.1f%%", 100 * hs)), (ht < 0 ? "-" : sprintf("%.1f%%", 100 * ht)),
           (hs <= 0.12 && ht <= 0.12 ? "met" : "missed"), 100 * allsum / all,
           (allsum / all >= -0.03 && allsum / all <= 0.03 ? "met" : "missed"), unb, ns
}' "$TSV"
echo
echo "# where the error comes from (mean over runs, % of the measured speedup):"
echo "#   speedup_m / speedup_p = (eff_m / eff_p) x (iter_p / iter_m) x (ar_m / ar_p), iter = draft + target + overhead"
echo "#   per block; eff: the block efficiency's share; draft, target, overhead: (pred - measured) / iter_m;"
echo "#   ar: the autoregressive token's (measured / predicted - 1)"
awk -F '\t' '
$2 == "ar" { arm[$1] = $22 + $24; arp[$1] = $23 + $25; next }
{
    s = $2; if (!(s in seen)) { seen[s] = 1; order[++ns] = s }
    it = $14 + $22 + $24; n[s]++
    eff[s] += $11 / $12 - 1; d[s] += ($15 - $14) / it; t[s] += ($23 - $22) / it; o[s] += ($25 - $24) / it
    ar[s] += arm[$1] / arp[$1] - 1
}
END {
    printf "%-16s %8s %8s %8s %9s %8s\n", "scheme", "eff%", "draft%", "target%", "overhead%", "ar%"
    for (i = 1; i <= ns; i++) {
        s = order[i]
        printf "%-16s %+8.1f %+8.1f %+8.1f %+9.1f %+8.1f\n", s, 100 * eff[s] / n[s], 100 * d[s] / n[s], 100 * t[s] / n[s],
               100 * o[s] / n[s], 100 * ar[s] / n[s]
    }
}' "$TSV"
echo
echo "# each scheme against the run's predicted best, paired by prompt (decode's vs_best columns): how often"
echo "# the measured ratio fell inside the interval, its width, and where the prediction put a scheme 10% or"
echo "# more below the best, how often the interval told them apart (excluded 1); goal: the intervals hold and"
echo "# separate a 10% difference. Per run: ar's tokens/s (the machine's memory speed moves it by tens of"
echo "# percent from minute to minute, and a target pass over a few tokens gains less from faster memory than"
echo "# one token's: the faster ar, the smaller the speedup)"
awk -F '\t' '
$2 == "ar" { artok[$1] = $7; arerr[$1] = ($23 + $25) / ($22 + $24) - 1; next }
{ row[$1, ++k[$1]] = $0; if ($26 == 1) best[$1] = $9; if ($9 > mtop[$1]) { mtop[$1] = $9; mname[$1] = $2 } if ($26 == 1) pname[$1] = $2 }
END {
    for (r in k) {
        runs++; same += pname[r] == mname[r]
        for (i = 1; i <= k[r]; i++) {
            split(row[r, i], f, "\t")
            if (f[26] == 1 || f[26] == "nan" || best[r] <= 0) continue
            m = f[9] / best[r]; n++; in_ += (m >= f[27] && m <= f[28]); w[n] = (f[28] - f[27]) / f[26]
            if (f[26] <= 0.9) { far++; sep += f[28] < 1 }
            if (f[26] > sv[r]) { sv[r] = f[26]; sl[r] = f[27]; sh[r] = f[28]; sn[r] = f[2]; sm[r] = m }
        }
        line[r] = sprintf("run %d: ar %.0f tok/s (%+.1f%% on the costs measured before the run), measured best %s at %.3fx; predicted best %s; " \
                          "second %s at %.3f [%.3f, %.3f] of it (%s), measured %.3f", r, artok[r], 100 * arerr[r], mname[r],
                          mtop[r], pname[r], sn[r], sv[r], sl[r], sh[r], sh[r] < 1 ? "told apart" : "not told apart", sm[r])
    }
    for (a = 2; a <= n; a++) for (b = a; b > 1 && w[b] < w[b - 1]; b--) { t = w[b]; w[b] = w[b - 1]; w[b - 1] = t }
    printf "paired: %d (scheme, run) pairs, covered %d (%.0f%%), median width %.1f%%; 10%% or more below the best: " \
           "%d, told apart %d (%.0f%%); the measured best was the predicted best in %d of %d runs\n",
           n, in_, n ? 100 * in_ / n : 0, n ? 100 * (n % 2 ? w[(n + 1) / 2] : (w[n / 2] + w[n / 2 + 1]) / 2) : 0,
           far, sep, far ? 100 * sep / far : 0, same, runs
    for (r = 1; r <= runs; r++) print line[r]
}' "$TSV"
echo
echo "# the machine's drift: how far each run's schemes stood alike from their predictions (their mean"
echo "# log error), and its spread over the runs, what decode --drift PCT:RUNS takes for this machine"
echo "# (the default, 4.05:66, is from tests/bench/drift-runs.tsv: the project's Xeon)"
awk -F '\t' '
$2 == "ar" { next }
{ le[$1] += log($9 / $10); k[$1]++; if ($1 > nr) nr = $1 }
END {
    for (r = 1; r <= nr; r++) if (k[r]) { x = le[r] / k[r]; s = s sprintf(" %+.1f%%", 100 * x); m += x; q += x * x; n++ }
    v = n > 1 ? (q - m * m / n) / (n - 1) : 0
    if (n > 1) printf "drift: the runs stood%s; spread %.2f%% over %d runs: decode --drift %.2f:%d%s\n", s,
                      100 * sqrt(v > 0 ? v : 0), n, 100 * sqrt(v > 0 ? v : 0), n,
                      n < 10 ? " (few runs: PREDICT_RUNS=10 or more for a figure to pass on)" : ""
    else printf "drift: one run; its schemes stood%s alike\n", s
}' "$TSV"
# every run of this machine and pair in the record (the last row's: this benchmark's)
if [ -s "$DRIFT_LOG" ]; then
    awk -F '\t' '
    /^#/ || $1 == "machine" || NF < 3 { next }
    { m[NR] = $1; p[NR] = $2; x[NR] = $3; last = NR }
    END {
        if (!last) exit
        for (i = 1; i <= last; i++) if ((i in m) && m[i] == m[last] && p[i] == p[last]) { n++; a += x[i]; q += x[i] * x[i] }
        v = n > 1 ? (q - a * a / n) / (n - 1) : 0
        printf "drift record %s: %d run%s of this machine (%s) and pair (%s), spread %.2f%%%s\n", f, n, (n == 1 ? "" : "s"),
               m[last], p[last], 100 * sqrt(v > 0 ? v : 0), (n > 1 ? ": decode --drift " f " takes it" : "")
    }' f="$DRIFT_LOG" "$DRIFT_LOG"
fi
