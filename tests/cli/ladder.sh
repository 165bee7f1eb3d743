#!/bin/sh
# Command-line tests of the draft ladder's bench (tests/bench/ladder.sh --quick): on the
# shipped target with the shipped draft and ladder-d48, one row per draft with its size,
# an exact sd acceptance inside its interval and met by the acceptance decode measures
# with the pair, c and speedups in range,
# the Table 4 rows, the summary; the figures draw; a missing draft and a bad option refused.
# usage: ladder.sh path/to/specdec
SPECDEC=${1:-build/specdec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
BUILD=$(dirname "$SPECDEC")

expect 2 "unknown option '--fast'" -- sh tests/bench/ladder.sh "$BUILD" --fast
expect 1 "no data/models/ladder-none.gguf" -- env LADDER_DRAFTS=ladder-none LADDER_OUT="$T/x" sh tests/bench/ladder.sh "$BUILD" --quick
expect 0 "ladder: the prediction picks" -- env LADDER_OUT="$T/q" sh tests/bench/ladder.sh "$BUILD" --quick
R=$T/q
for f in ladder.tsv ladder-table4.tsv; do
    for k in device commit command date; do
        grep -q "^# $k: ." "$R/$f" && ok || bad "$f: no '# $k:' line"
    done
done
rows() { grep -v '^#' "$R/$1" | awk -F'\t' '$2 != "params"' | wc -l; }
[ "$(rows ladder.tsv)" = 2 ] && ok || bad "ladder.tsv: $(rows ladder.tsv) rows, want 2 drafts"
[ "$(rows ladder-table4.tsv)" = 4 ] && ok || bad "ladder-table4.tsv: $(rows ladder-table4.tsv) rows, want 2 drafts x K in 1,2"
# sizes from the training logs; acceptance inside (0, 1) and its interval; c > 0;
# every speedup positive; the shipped draft is larger than d48
awk -F'\t' '!/^#/ && $1 != "draft" || $1 == "draft" && $2 ~ /^[0-9]/ {
        if (!($2 > 0 && $5 > 0 && $5 < 1 && $9 > 0 && $9 < 1 && $10 <= $9 && $9 <= $11 && $12 > 0 &&
              $15 > 0 && $16 > 0 && $18 > 0 && $20 > 0 && $21 > 0 && $29 > 0 && $30 > 0)) { print "bad row: " $0; exit 1 }
        p[$1] = $2 }
     END { if (!(p["draft"] == 868992 && p["ladder-d48"] > 0 && p["ladder-d48"] < p["draft"])) { print "sizes"; exit 1 } }' \
    "$R/ladder.tsv" && ok || bad "ladder.tsv: a value out of range"
# sd's exact acceptance on the replayed logits (the target's own samples), inside its
# 99.9% interval over positions, against the acceptance decode measures with the same
# pair (sd, one draft a block: the share of 300-odd blocks whose draft the target
# accepted; its 99.9% Wilson interval): the two intervals must meet. The shipped draft
# only: the decode's cost ladder and calibration take most of its time (4 s; a
# minute under the sanitizers), and ladder-d48's replay is the same code.
for d in draft; do
    if ! "$SPECDEC" decode --target data/models/target.gguf --draft "data/models/$d.gguf" --scheme sd \
            --shape chain:1 --n-prompts 8 --max-tokens 64 --threads 2 --calibrate 1 --json > "$T/sd-$d.json" 2>&1; then
        bad "decode --scheme sd --draft $d failed"; head -5 "$T/sd-$d.json"; continue
    fi
    sed -n 's/.*"scheme": "sd",.* "tokens": \([0-9]*\),.*"block_efficiency": \([0-9.e+-]*\), "mean_accepted": \([0-9.e+-]*\),.*/\1 \2 \3/p' \
        "$T/sd-$d.json" > "$T/sd-$d.counts"
    why=$(awk -v counts="$(cat "$T/sd-$d.counts")" '$1 == "sd" { gsub(/[\[\],]/, " "); a = $2; lo = $3; hi = $4 }
        END { split(counts, c, " "); n = c[1] / c[2]; x = c[3] * n; z = 3.2905
              if (!(n >= 200 && a > 0 && lo <= a && a <= hi)) { printf "no measurement (%s) or no replay (%s [%s, %s])", counts, a, lo, hi; exit }
              m = (x + z * z / 2) / (n + z * z); h = z * sqrt(x * (n - x) / n + z * z / 4) / (n + z * z)
              if (!(lo <= m + h && m - h <= hi))
                  printf "replayed %.4f [%.4f, %.4f], measured %.0f of %.0f blocks [%.4f, %.4f]", a, lo, hi, x, n, m - h, m + h }' \
        "$R/replay-$d.txt")
    [ -z "$why" ] && ok || bad "$d: sd acceptance replayed and measured disagree: $why"
done
# Table 4: tokens per target call between 1 and L + 1
awk -F'\t' '!/^#/ && $3 ~ /^[0-9]/ { if (!($5 >= 1 && $5 <= $4 + 1 && $6 >= 1 && $6 <= $4 + 1)) exit 1 }' \
    "$R/ladder-table4.tsv" && ok || bad "ladder-table4.tsv: a block efficiency outside [1, L + 1]"
for d in draft ladder-d48; do
    grep -q "^$d  *[0-9]* params (.* sd pays\|^$d  *[0-9]* params .*measured best" "$R/summary.txt" && ok || bad "summary.txt: no line for $d"
done
grep -q "^ladder: \(speculation pays\|no draft makes speculation pay\)" "$R/summary.txt" && ok || bad "summary.txt: no verdict"
if command -v gnuplot >/dev/null 2>&1; then
    expect 0 "draw: 2 figures" -- sh plots/draw.sh "$R" --recipes-only
fi
finish "cli ladder"
