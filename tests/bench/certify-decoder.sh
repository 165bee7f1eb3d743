#!/bin/sh
# The planted decoders of tests/exec/spec_decoder certified at every position by
# `certify --decoder`, each over SEEDS base seeds (CERTIFY.md, "The planted decoders over
# ten seeds"). First the exact decoder at N0 runs (seed 1): its INCONCLUSIVE verdict names
# the runs that give every test power 0.9 (NAMED). Then, over the seeds: the exact decoder
# and late-correction at NAMED runs, and every planted decoder at N0 runs. Prompt "The
# sea", 32 tokens a run, the shipped pair, the planted argmax-draft bug for the pair test.
# Prints a table: decoder, runs, the verdicts over the seeds, the median p-value of the
# test of every position and the median of its power against late-correction; every
# run's output stays in out/certify-decoder/.
# usage: tests/bench/certify-decoder.sh [BUILD]
# env: SEEDS (10), N0 (300), NAMED (given: the first step is skipped), PAR (certify
# commands at once, each running its decoder one run at a time: nproc), BUGS (the
# planted decoders at N0: argmax-draft correction-from-target late-correction
# no-rollback last-draft correlated)
set -eu
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/../.."
B=${1:-build}
SEEDS=${SEEDS:-10} N0=${N0:-300} PAR=${PAR:-$(nproc)}
BUGS=${BUGS:-argmax-draft correction-from-target late-correction no-rollback last-draft correlated}
O=out/certify-decoder
mkdir -p "$O"
SD="$B/tests/exec/spec_decoder data/models/target.gguf data/models/draft.gguf {prompt} {seed} 32"
for f in "$B/specdec" "$B/tests/exec/spec_decoder"; do [ -x "$f" ] || { echo "certify-decoder: no $f (make)" >&2; exit 1; }; done
# one certification: NAME RUNS SEED BUG -> $O/NAME-RUNS-SEED.txt (kept when it has a
# verdict: a run cut short goes on where it stopped)
one() {
    bug=$4; [ "$bug" = none ] && bug=""
    grep -q '^== ' "$O/$1-$2-$3.txt" 2>/dev/null && return
    "$B/specdec" certify --decoder "$SD $bug" --target data/models/target.gguf --prompt "The sea" --samples "$2" \
        --seed "$3" --jobs 1 --draft data/models/draft.gguf --planted argmax-draft > "$O/$1-$2-$3.txt" 2>&1 || true
}
t0=$(date +%s)
if [ -z "${NAMED:-}" ]; then
    one exact "$N0" 1 none
    NAMED=$(sed -n 's/^== INCONCLUSIVE.*about \([0-9]*\) runs give every test 0.9$/\1/p; s/^== INCONCLUSIVE.*late-correction (every position), about \([0-9]*\) runs give 0.9.*/\1/p' \
            "$O/exact-$N0-1.txt" | head -1)
    [ -n "$NAMED" ] || { echo "certify-decoder: the exact decoder at $N0 runs names no run count:" >&2; tail -3 "$O/exact-$N0-1.txt" >&2; exit 1; }
    echo "# the exact decoder at $N0 runs: $(grep '^==' "$O/exact-$N0-1.txt")"
fi
echo "# runs named for power 0.9: $NAMED; $SEEDS seeds; $PAR certifications at once on $(nproc) cores: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
{   # the goal's rows first: the exact decoder and late-correction at NAMED runs, and at N0
    for row in "exact $NAMED none" "late-correction $NAMED late-correction" "late-correction $N0 late-correction"; do
        set -- $row
        s=1
        while [ $s -le "$SEEDS" ]; do echo "$1 $2 $s $3"; s=$((s + 1)); done
    done
    for b in $BUGS; do
        [ "$b" = late-correction ] && continue
        s=1
        while [ $s -le "$SEEDS" ]; do echo "$b $N0 $s $b"; s=$((s + 1)); done
    done
} > "$O/jobs"
export B O SD
# xargs runs `one` through a shell of its own: the function is passed as text
xargs -P "$PAR" -L 1 sh -c "$(sed -n '/^one() {/,/^}/p' "$SELF")"'; one "$@"' one < "$O/jobs"
printf '%-24s %6s %5s %5s %13s %9s %18s %22s\n' decoder runs PASS FAIL INCONCLUSIVE TOO-GOOD "every position p" "power vs late-correction"
awk '!seen[$1 " " $2]++ { print $1, $2 }' "$O/jobs" | while read -r name runs; do
    for f in "$O/$name-$runs-"*.txt; do
        v=$(sed -n 's/^== \([A-Z-]*\).*/\1/p' "$f" | head -1)
        p=$(sed -n 's/^PIT family      p = \([^ ]*\).*/\1/p' "$f")
        w=$(sed -n 's/^every position  [^ ]*  *\([0-9.-]*\)  late-correction.*/\1/p' "$f")
        echo "${v:-ERROR} ${p:-nan} ${w:--}"
    done | awk -v name="$name" -v runs="$runs" '
        { n[$1]++; p[NR] = $2; w[NR] = $3 }
        function median(a, k,   i, j, t) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
                                           return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
        END { printf "%-24s %6d %5d %5d %13d %9d %18.3g %22s\n", name, runs, n["PASS"], n["FAIL"], n["INCONCLUSIVE"],
                     n["TOO-GOOD"], median(p, NR), (w[1] == "-" ? "-" : sprintf("%.3f", median(w, NR))) }'
done
echo "# $(( $(date +%s) - t0 )) s; each run's output in $O/"
