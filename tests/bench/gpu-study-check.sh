#!/bin/sh
# make bench-e2e-cuda-dry: the GPU study's plumbing without a GPU. Runs
# tests/bench/gpu-study.sh --dry-run (the CPU build, 1 prompt x 8 tokens, short sweeps,
# tiny random models) and checks what a GPU run must leave: every TSV with its header
# (device, driver, commit, command, date) and its rows (ar and the ten schemes of
# --scheme all, both GT temperatures, L = 1..2 parallel and sequential, every what-if
# scheme), each step ok in steps.tsv, and the figures draw (when gnuplot is here).
# usage: tests/bench/gpu-study-check.sh [BUILD_DIR]   (19 s on 2 idle cores, minutes on busy ones)
set -eu
cd "$(dirname "$0")/../.."
R=out/gpu-study-dry
rm -rf "$R"
fail=0
bad() { echo "gpu-study-check: FAIL: $*"; fail=1; }
# exit 3: no step failed, one was skipped (llamacpp without a CPU build of llama.cpp's tools)
rc=0
STUDY_BUILD=${1:-build} sh tests/bench/gpu-study.sh --dry-run --results "$R" --steps decode,check,gt,parallel,predict,whatif,llamacpp || rc=$?
[ $rc = 0 ] || [ $rc = 3 ] || bad "gpu-study.sh exited $rc"
rows() { grep -v '^#' "$R/$1" | awk -F'\t' -v re="$2" '$1 ~ re' | wc -l; }
# a built tree (gt, gt-dynamic, throughput) where no node pays at the measured costs is
# skipped with its reason in decode's text output, not a TSV row: on a loaded machine c
# grows and that happens; such a scheme counts when its reason is there
skipped() { grep -E "^($2)[^ ]* +.* skipped: ." "$R/$1" | wc -l; }
for f in e2e-predicted.tsv check.tsv e2e-gt-sweep.tsv e2e-parallel.tsv parallel-t0.tsv predict-runs.tsv whatif.tsv steps.tsv; do
    [ -s "$R/$f" ] || { bad "$f missing"; continue; }
    for k in device driver commit command date; do
        head -5 "$R/$f" | grep -q "^# $k: ." || bad "$f: no '# $k:' line in its header"
    done
done
n=$(( $(rows e2e-predicted.tsv '.') + $(skipped decode.txt 'gt|throughput') ))
[ "$n" = 11 ] || bad "e2e-predicted.tsv: $n rows (and skipped built trees), want ar + 10 schemes"
n=$(( $(rows check.tsv '.') + $(skipped check.txt 'gt|throughput') ))
[ "$n" = 12 ] || bad "check.tsv: $n rows (and skipped built trees), want ar + 11 schemes"
grep -q '^check: PASS' "$R/check.txt" || bad "check.txt: no 'check: PASS'"
# the schemes that are not built from the calibration have their rows whatever the costs
for s in ar sd spectr spectr-otm mcsd mcsd-wor rsd-c rsd-s; do
    [ "$(rows e2e-predicted.tsv "^$s\$")" = 1 ] || bad "e2e-predicted.tsv: no row for $s"
done
# a skipped GT tree stands for a row, but at least one of the four is measured
for t in 0 1; do
    m=$(grep -v '^#' "$R/e2e-gt-sweep.tsv" | awk -F'\t' -v t=$t '$4 == t && $1 ~ /^gt/' | wc -l)
    n=$((m + $(skipped gt-$t.txt 'gt')))
    [ "$n" = 4 ] || bad "e2e-gt-sweep.tsv: $n GT rows (and skipped trees) at temperature $t, want 4 (static and dynamic x 2 thresholds)"
    [ "$m" -ge 1 ] || bad "e2e-gt-sweep.tsv: no GT row measured at temperature $t (all skipped)"
done
[ "$(rows e2e-parallel.tsv '^(parallel|sequential) L=')" = 4 ] || bad "e2e-parallel.tsv: want parallel and sequential at L = 1, 2"
n=$(( $(rows predict-runs.tsv '.') + $(grep -c '^run [0-9]*: .* skipped: .' "$R/predict.txt" || true) ))
[ "$n" = 11 ] || bad "predict-runs.tsv: $n rows (and skipped built trees), want 11 (1 run)"
[ "$(rows whatif.tsv '^(sd|spectr|mcsd|mcsd-wor|rsd-c|rsd-s|gt-dynamic|gt|throughput)$')" -ge 9 ] ||
    bad "whatif.tsv: not every scheme has a row"
# every step ok; llamacpp skipped, with its reason, when llama.cpp's tools are not built (and
# only then: it used to be recorded as ok)
if [ ! -x "${LLAMA_BUILD_CUDA:-.cache/llama.cpp-build-cuda}/bin/llama-completion" ]; then
    [ "$(grep -v '^#' "$R/steps.tsv" | awk -F'\t' '$1 == "llamacpp" { print $2 }')" = skipped ] ||
        bad "steps.tsv: llamacpp is not 'skipped' without llama.cpp's build"
fi
awk -F'\t' '!/^#/ && $1 != "step" && $2 != "ok" && !($1 == "llamacpp" && $2 == "skipped" && $5 ~ /skipped: .* is not built/) {
         print "gpu-study-check: FAIL: steps.tsv: " $1 " " $2 " (" $5 ")"; bad = 1 } END { exit bad }' "$R/steps.tsv" || fail=1
[ "$(grep -v '^#' "$R/steps.tsv" | tail -n +2 | wc -l)" = 7 ] || bad "steps.tsv: want a row for each of the 7 steps"
if command -v gnuplot >/dev/null 2>&1; then
    sh plots/draw.sh "$R" --recipes-only > "$R/draw.txt" 2>&1 || bad "plots/draw.sh $R failed: $(tail -1 "$R/draw.txt")"
    for f in e2e-predicted e2e-gt-sweep e2e-parallel; do [ -s "$R/$f.png" ] || bad "$f.png not drawn"; done
fi
[ $fail = 0 ] && echo "gpu-study-check: PASS: every step, TSV and header of the dry run ($R)"
exit $fail
