#!/bin/sh
# make bench-mt: the cost of a target pass over n tokens on this CPU, M_T(n) for
# n = 1, 2, 4, ..., 64 (every token's logits, as verification computes them), beside the
# pass's roofline: max(its weights read once at the read bandwidth bench_model measures
# for a buffer of their size, 2 x parameters x n FLOP at the FMA rate it measures). For the large target
# (data/models/large-target.gguf, when it is here: its weights stream from memory) and the
# shipped 5.5M target (its weights sit in the cache). A memory-bound pass is flat in n
# until the FMA work of n tokens reaches the time of one read of the weights.
# Writes cpu-mt.tsv (a header: device, commit, command, date, bandwidth and FMA rate; then
# one block per model) into out/cpu/ (RECORD=1: paper-figs/cpu/, which make figs draws with
# paper-figs/cpu-mt.gp), and the benchmark's own output beside it.
# usage: tests/bench/mt-curve.sh [BUILD_DIR]    env: MT_THREADS (2), MT_MODELS (names in
#        data/models/ without .gguf; default large-target target)
set -eu
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
B=$BUILD/tests/bench/bench_model
[ -x "$B" ] || { echo "bench-mt: $B is not built (make bench builds it)" >&2; exit 1; }
TH=${MT_THREADS:-2}
R=$([ -n "${RECORD:-}" ] && echo paper-figs/cpu || echo out/cpu)
mkdir -p "$R"
models=""
for m in ${MT_MODELS:-large-target target}; do
    if [ -s "data/models/$m.gguf" ]; then models="$models $m"
    else echo "bench-mt: data/models/$m.gguf absent: skipped (make models-large writes the large target)"; fi
done
[ -n "$models" ] || { echo "bench-mt: no model to measure" >&2; exit 1; }
tmp=$R/.cpu-mt.tsv
{ echo "# device: cpu: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) cores, L3 $(cat /sys/devices/system/cpu/cpu0/cache/index3/size 2>/dev/null || echo '?')"
  echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo -)$(git diff --quiet -- src 2>/dev/null || echo ' (modified)')"
  echo "# command: sh tests/bench/mt-curve.sh (MT_THREADS=$TH), load average $(cut -d' ' -f1 /proc/loadavg) at start"
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# models:$models"
} > "$tmp"
first=1
for m in $models; do
    echo "bench-mt: $m, $TH threads"
    f=$(sh data/models/large-f16.sh "$BUILD/specdec" "$m") || exit 1   # the large target: widened to F16
    "$B" "$f" --threads "$TH" > "$R/bench-$m.txt" 2>&1 ||
        { echo "bench-mt: bench_model failed on $m (its output: $R/bench-$m.txt)" >&2; exit 1; }
    [ $first = 1 ] && sed -n 's/^# this machine, \(.*\)$/# machine: \1/p' "$R/bench-$m.txt" | head -1 >> "$tmp"
    [ $first = 1 ] || printf '\n\n' >> "$tmp"
    first=0
    awk -v m="$m" '
        /^# .* M_T\(n\), ms, n = .*every token/ { sub(/.*: /, ""); nm = split($0, mt, " ") }
        /^# .* roofline, ms, n = .*every token/ { sub(/.*: /, ""); nr = split($0, rl, " ") }
        /^# [A-Z0-9_]+: .* MB of matrices/ { line = $0 }
        END {
            if (!nm || nm != nr) { print "bench-mt: no M_T(n) and roofline lines in bench_model output" > "/dev/stderr"; exit 1 }
            print "# " m ":" substr(line, index(line, ":") + 1)
            print "# model\tn\tmt_ms\troofline_ms\tmt_over_roofline\tmt_ratio"
            n = 1
            for (k = 1; k <= nm; k++) {
                printf "%s\t%d\t%.4f\t%.4f\t%.3f\t%.3f\n", m, n, mt[k], rl[k], mt[k] / rl[k], mt[k] / mt[1]
                n *= 2 } }' \
        "$R/bench-$m.txt" >> "$tmp"
done
mv "$tmp" "$R/cpu-mt.tsv"
grep -v '^#' "$R/cpu-mt.tsv" | awk -F'\t' 'NF { printf "  %-13s n = %2d  M_T %8.3f ms  roofline %8.3f ms  %.2fx the roofline  M_T(n)/M_T(1) %.2f\n", $1, $2, $3, $4, $5, $6 }'
echo "bench-mt: $R/cpu-mt.tsv"
