#!/bin/sh
# Command-line tests of the draft ladder's bench (tests/bench/ladder.sh --quick): on the
# shipped target with the shipped draft and ladder-d48, one row per draft with its size,
# an exact sd acceptance inside its interval and equal to 1 - TV, c and speedups in range,
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
# sd's exact acceptance is the overlap of the two laws: 1 - the mean total variation
for d in draft ladder-d48; do
    awk '$1 == "sd" { gsub(/[\[\],]/, " "); a = $2 } /^total variation: mean/ { tv = $4 }
         END { d = a + tv - 1; exit !(a > 0 && (d < 0 ? -d : d) < 2e-6) }' "$R/replay-$d.txt" && ok ||
        bad "replay-$d.txt: sd acceptance is not 1 - TV"
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
