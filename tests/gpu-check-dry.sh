#!/bin/sh
# make gpu-check-dry: tests/gpu-check.sh's plumbing without a GPU, so that its one run on a
# lent GPU does not fail on a typo. Runs `gpu-check.sh --dry-run` (the CPU build, tiny
# sizes) with every step, plus three planted ones: `hang` after `test` (it must be cut at
# its 3 s limit, say "timed out" in the summary, and `generate` must still run), `fail`
# after `generate` (it exits 3: "failed (3)" in steps.tsv and the summary, and `sanitize`
# must still run) and `malformed` at the end (ok, but without a headline: the format
# check below must flag it, and only it). On a GPU without compute-sanitizer the
# sanitize step must fail (its step run alone, as on a GPU). Then checks what a GPU run must leave: each step's files and their
# format (test_cuda's totals, generate's two models, the bench table and cuda-mt.tsv, the
# decode, GT and parallel TSVs with their headers), a headline for every step that ran,
# llamacpp skipped with its reason, the summary table and verdict, $OUT's files, and the
# figures (when gnuplot is here).
# usage: tests/gpu-check-dry.sh [BUILD_DIR]   (about 20 s on 2 idle cores)
set -eu
cd "$(dirname "$0")/.."
R=out/gpu-check-dry
O=out/gpu-check-dry-OUT
rm -rf "$R" "$O" "$R-llama"
fail=0
bad() { echo "gpu-check-dry: FAIL: $*"; fail=1; }
rc=0
# decode's limit doubled: the dry run checks plumbing, and a loaded 2-core machine runs
# its tiny decode near the GPU's 50 s
GPU_CHECK_LIMITS=${GPU_CHECK_LIMITS:-decode=100} GPU_CHECK_BUILD=${1:-build} OUT=$O sh tests/gpu-check.sh --dry-run --results "$R" \
    --steps tune,test,hang,generate,fail,sanitize,bench,decode,gt,parallel,wide-decode,wide-gt,wide-parallel,llamacpp,malformed > "$R.log" 2>&1 || rc=$?
tail -16 "$R.log"
# exit 1: the planted hang timed out, the planted failing step failed
[ $rc = 1 ] || bad "gpu-check.sh exited $rc, want 1 (the planted hang timed out, the planted step failed)"

row() { grep -v '^#' "$R/steps.tsv" | awk -F'\t' -v s="$1" '$1 == s'; }
field() { row "$1" | cut -f"$2"; }
has() { grep -q -E -e "$2" "$R/$1" 2>/dev/null || bad "$1: no line matching '$2'"; }

# the header of every TSV
for f in steps.tsv cuda-mt.tsv e2e-predicted.tsv e2e-gt-sweep.tsv e2e-parallel.tsv \
         wide/e2e-predicted.tsv wide/e2e-gt-sweep.tsv wide/e2e-parallel.tsv; do
    [ -s "$R/$f" ] || { bad "$f missing"; continue; }
    for k in device driver commit command date; do
        head -5 "$R/$f" | grep -q "^# $k: ." || bad "$f: no '# $k:' line in its header"
    done
done
# the planted hang: cut at its limit, and the next step ran
[ "$(field hang 2)" = "timed out" ] || bad "hang: status '$(field hang 2)', want 'timed out'"
s=$(field hang 3)
[ -n "$s" ] && [ "$s" -ge 3 ] && [ "$s" -le 9 ] || bad "hang: $s s, want its 3 s limit (+ the 5 s grace at most)"
[ "$(field generate 2)" = ok ] || bad "generate after the hang: '$(field generate 2)', want ok"
grep -q 'timed out' "$R/summary.txt" || bad "summary.txt does not say 'timed out'"
# the planted failing step: failed, with its exit status, and the next step ran
[ "$(field fail 2)" = "failed (3)" ] || bad "fail: status '$(field fail 2)', want 'failed (3)'"
grep -q '^fail  *failed (3) ' "$R/summary.txt" || bad "summary.txt does not show the planted step as 'failed (3)'"
# on a GPU (CHECK_DEVICE=cuda) without compute-sanitizer the sanitize step fails
if h=$(env CHECK_RESULTS="$R" CHECK_BUILD="${1:-build}" CHECK_DEVICE=cuda CHECK_SANITIZER= CHECK_SAN_TESTS=plan \
        sh tests/gpu-check.sh --step sanitize 2>&1); then
    bad "sanitize on a GPU without compute-sanitizer: ok ($h), want a failure"
fi
echo "$h" | grep -q '^headline: sanitize: compute-sanitizer not found' || bad "sanitize without the sanitizer: '$h'"

# each step's format; a step whose output is off prints its name
check_step() {
    case $1 in
    tune) has tune.tsv '^# variant	logits	worst_of_tol	n1	'
        n=$(grep -v '^#' "$R/tune.tsv" | awk -F'\t' '$2 == "ok" && $4 + 0 > 0 && $10 + 0 > 0' | wc -l)
        [ "$n" = 9 ] || bad "tune.tsv: $n variants checked and timed, want the 9 of the sweep"
        grep -q -E '^path=(base|fused,mma=[0-9]+,rp=[0-9]+,wk=[48],pdl=[01])$' "$R/tune-choice" || bad "tune-choice: '$(cat "$R/tune-choice" 2>/dev/null)'"
        has summary.txt '^# kernels: SPECDEC_CUDA_TUNE=path=.* \(the tune step.s choice\)' ;;
    test) has test_cuda.txt '^\[  PASSED  \] [0-9]+ test' ;;
    generate) has generate.txt '^cuda generate: PASS'
        [ "$(grep -c 'equal to the CPU' "$R/generate.txt")" = 2 ] || bad "generate.txt: want a line for each of the 2 models" ;;
    sanitize) has memcheck.txt '^\[  PASSED  \] [0-9]+ test' ;;
    bench) has bench.txt '^# device: '
        n=$(grep -v '^#' "$R/cuda-mt.tsv" | awk -F'\t' '$1 != "model" && $2 ~ /^[0-9]+$/ && $3 + 0 > 0 && $4 + 0 > 0' | wc -l)
        models=3; [ -s data/models/large-target.gguf ] && models=4   # the large target, when it is here
        [ "$n" = $((7 * models)) ] || bad "cuda-mt.tsv: $n rows with numbers, want 7 (n = 1..64) x $models models"
        grep -q '^target-wide	' "$R/cuda-mt.tsv" || bad "cuda-mt.tsv: no rows of the widened target (target-wide)" ;;
    decode) n=$(grep -v '^#' "$R/e2e-predicted.tsv" | awk -F'\t' '$1 ~ /^(ar|sd|spectr|spectr-otm|mcsd|mcsd-wor|rsd-c|rsd-s)$/' | wc -l)
        [ "$n" = 8 ] || bad "e2e-predicted.tsv: $n rows of ar and the 7 schemes that are never skipped, want 8"
        # the study's decode runs the shipped pair; the large pair, when it is here, its own
        head -3 "$R/decode.txt" | grep -q 'target data/models/target.gguf' || bad "decode.txt: not the shipped pair"
        if [ -s data/models/large-target.gguf ] && [ -s data/models/large-draft.gguf ]; then
            has decode-large.txt '^# specdec decode: target out/models/large-target-f16.gguf'
            field decode 5 | grep -q 'shipped pair: best .*; large pair: best ' || bad "decode: no headline for both pairs"
        fi ;;
    gt) for t in 0 1; do
            n=$(grep -v '^#' "$R/e2e-gt-sweep.tsv" | awk -F'\t' -v t=$t '$4 == t && $1 ~ /^gt/' | wc -l)
            [ "$n" -ge 1 ] || bad "e2e-gt-sweep.tsv: no GT row at temperature $t"
        done ;;
    parallel) n=$(grep -v '^#' "$R/e2e-parallel.tsv" | awk -F'\t' '$1 ~ /^(parallel|sequential) L=[12]$/' | wc -l)
        [ "$n" = 4 ] || bad "e2e-parallel.tsv: $n rows, want parallel and sequential at L = 1, 2" ;;
    wide-decode) n=$(grep -v '^#' "$R/wide/e2e-predicted.tsv" | awk -F'\t' '$1 ~ /^(ar|sd|spectr|spectr-otm|mcsd|mcsd-wor|rsd-c|rsd-s)$/' | wc -l)
        [ "$n" = 8 ] || bad "wide/e2e-predicted.tsv: $n rows of ar and the 7 schemes that are never skipped, want 8"
        head -3 "$R/wide/decode.txt" | grep -q 'target out/gpu-check-dry-models/target-wide.gguf, draft data/models/large-draft.gguf' ||
            bad "wide/decode.txt: not the wide pair: $(head -1 "$R/wide/decode.txt")"
        field wide-decode 5 | grep -q '^wide pair: best .* (goal >= 2x: \(met\|missed\)); [0-9]* of [0-9]* schemes inside' ||
            bad "wide-decode: headline without its goals" ;;
    wide-gt) for t in 0 1; do
            n=$(grep -v '^#' "$R/wide/e2e-gt-sweep.tsv" | awk -F'\t' -v t=$t '$4 == t && $1 ~ /^gt/' | wc -l)
            [ "$n" -ge 1 ] || bad "wide/e2e-gt-sweep.tsv: no GT row at temperature $t"
        done
        field wide-gt 5 | grep -q '[0-9] of [1-9][0-9]* GT optima inside the threshold.s predicted interval' ||
            bad "wide-gt: no verdict on the optima in its headline" ;;
    wide-parallel) n=$(grep -v '^#' "$R/wide/e2e-parallel.tsv" | awk -F'\t' '$1 ~ /^(parallel|sequential) L=[12]$/' | wc -l)
        [ "$n" = 4 ] || bad "wide/e2e-parallel.tsv: $n rows, want parallel and sequential at L = 1, 2"
        field wide-parallel 5 | grep -q '4 of 4 inside\|[0-3] of 4 inside' || bad "wide-parallel: no count of intervals in its headline" ;;
    llamacpp) [ "$(field llamacpp 2)" = skipped ] || bad "llamacpp: '$(field llamacpp 2)', want skipped"
        field llamacpp 5 | grep -q 'skipped: dry run: no CUDA build of llama.cpp' || bad "llamacpp: no reason: $(field llamacpp 5)" ;;
    esac
    # every step that ran (not the hang) has its headline
    case $1 in hang) ;; *) [ "$(field "$1" 5)" != - ] && [ -n "$(field "$1" 5)" ] || bad "$1: no headline in steps.tsv" ;; esac
}
for s in tune test generate sanitize bench decode gt parallel wide-decode wide-gt wide-parallel llamacpp; do
    [ "$(field $s 2)" = ok ] || [ $s = llamacpp ] || bad "$s: status '$(field $s 2)', want ok"
    check_step $s
done
[ "$(grep -v '^#' "$R/steps.tsv" | tail -n +2 | wc -l)" = 15 ] || bad "steps.tsv: want a row for each of the 15 steps"
# the planted malformed step (ok, no headline) must be caught by the same check
before=$fail
check_step malformed > "$R/.malformed" 2>&1 || true
fail=$before
grep -q 'malformed: no headline' "$R/.malformed" || bad "the planted malformed step was not caught: $(cat "$R/.malformed")"
rm -f "$R/.malformed"

# the headlines of what only a GPU prints: test_cuda's logits lines (in the format its
# source prints them) and compute-sanitizer's summaries
X=$R/.x
fmt=$(sed -n 's/^static const char logits_float\[\] = "\(.*\)";$/\1/p' tests/test_cuda.c)
fmq=$(sed -n 's/^static const char logits_quant\[\] = "\(.*\)";$/\1/p' tests/test_cuda.c)
[ -n "$fmt" ] && [ -n "$fmq" ] || bad "tests/test_cuda.c: no logits lines to take the formats from"
{ printf "$fmt" "tiny random" F16 3.05e-5 1.0e-5 2.0e-5 1.22e-4
  printf "$fmt" "out/gpu-check-models/llama-1b-f16.gguf" F16 2.0e-6 4.0e-6 1.0e-6 1.22e-4
  echo "[  PASSED  ] 9 test(s)."; } > "$X"
h=$(sh tests/gpu-check.sh --headline test "$X")
[ "$h" = "headline: 9 passed, 0 failed, 0 skipped; logits: worst 0.250 of the tolerance over 2 model/type checks (goal <= 1: met)" ] ||
    bad "test's headline from test_cuda's GPU lines: '$h'"
# a quantized model's line: each stage against its own measured tolerance, never under
# the floor (the tree's 0.0232 is 0.55 of its 0.0422; the prompt's 0.003 is 1.5 of the floor 0.002)
{ printf "$fmq" "tiny random" Q8_0 1.0e-3 2.32e-2 1.0e-4 3.19e-2 4.22e-2 1.46e-2 1.95e-3
  echo "[  PASSED  ] 9 test(s)."; } > "$X"
h=$(sh tests/gpu-check.sh --headline test "$X")
[ "$h" = "headline: 9 passed, 0 failed, 0 skipped; logits: worst 0.550 of the tolerance over 1 model/type checks (goal <= 1: met)" ] ||
    bad "test's headline from a quantized model's line: '$h'"
{ printf "$fmq" "tiny random" Q8_0 3.0e-3 1.0e-4 1.0e-4 1.0e-3 4.22e-2 1.46e-2 2.0e-3
  echo "[  PASSED  ] 9 test(s)."; } > "$X"
h=$(sh tests/gpu-check.sh --headline test "$X")
[ "$h" = "headline: 9 passed, 0 failed, 0 skipped; logits: worst 1.500 of the tolerance over 1 model/type checks (goal <= 1: missed)" ] ||
    bad "test's headline from a quantized model's line under its floor: '$h'"
# the GPU's test step runs test_cuda twice (the certification apart): totals add up
{ echo "[  PASSED  ] 7 test(s)."; echo "[  PASSED  ] 1 test(s)."; echo "[  FAILED  ] 1 test(s), listed below:"
  echo "test: test_cuda_oracle_certified timed out after 40 s"; } > "$X"
h=$(sh tests/gpu-check.sh --headline test "$X")
[ "$h" = "headline: 8 passed, 1 failed, 0 skipped, the certification timed out; logits: none checked (no GPU test ran)" ] ||
    bad "test's headline over two runs: '$h'"
echo "========= ERROR SUMMARY: 0 errors" > "$X.mem"
echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" > "$X.race"
h=$(sh tests/gpu-check.sh --headline sanitize "$X.mem" "$X.race" 0 0) || bad "sanitize: a clean memcheck and racecheck fail: '$h'"
echo "$h" | grep -q 'memcheck: 0 errors .*racecheck: 0 hazards' || bad "sanitize's headline: '$h'"
echo "========= ERROR SUMMARY: 3 errors" > "$X.mem"
if h=$(sh tests/gpu-check.sh --headline sanitize "$X.mem" "$X.race" 0 0); then bad "sanitize: 3 memcheck errors pass: '$h'"; fi
echo "$h" | grep -q 'memcheck: 3 errors' || bad "sanitize's headline with 3 errors: '$h'"
rm -f "$X" "$X.mem" "$X.race"

# the summary: a table row per step, the verdict, and $OUT's files
for s in tune test hang generate fail sanitize bench decode gt parallel wide-decode wide-gt wide-parallel llamacpp malformed; do
    grep -q "^$s " "$R/summary.txt" || bad "summary.txt: no row for $s"
done
has summary.txt '^gpu-check: FAIL: 12 of 15 steps ok, 2 failed or timed out, 1 skipped; [0-9]+ s in all'
has log.txt '^gpu-check: room: the tree [0-9]+ KiB \+ the bundle 0 KiB \(none\) = [0-9]+ KiB of the 65536 a lent machine receives: [0-9]+ KiB left'
for f in summary.txt steps.tsv log.txt gpu-check-results.tar.gz; do [ -s "$O/$f" ] || bad "\$OUT: no $f"; done
[ "$(ls "$O" | wc -l)" -le 8 ] || bad "\$OUT holds more than 8 files"
tar -tzf "$O/gpu-check-results.tar.gz" | grep -q 'gpu-check-dry/cuda-mt.tsv' || bad "\$OUT's tarball has no cuda-mt.tsv"
grep -q '^== bench' "$O/log.txt" || bad "log.txt lacks the steps' output"
if command -v gnuplot >/dev/null 2>&1; then
    sh plots/draw.sh "$R" --recipes-only > "$R/draw.txt" 2>&1 || bad "plots/draw.sh $R failed: $(tail -1 "$R/draw.txt")"
    for f in cuda-mt e2e-predicted e2e-gt-sweep e2e-parallel; do [ -s "$R/$f.png" ] || bad "$f.png not drawn"; done
    sh plots/draw.sh "$R/wide" --recipes-only > "$R/draw-wide.txt" 2>&1 || bad "plots/draw.sh $R/wide failed: $(tail -1 "$R/draw-wide.txt")"
    for f in e2e-predicted e2e-gt-sweep e2e-parallel; do [ -s "$R/wide/$f.png" ] || bad "wide/$f.png not drawn"; done
fi
# llamacpp's own plumbing, for which the dry run builds no llama.cpp: the step again on a
# copy of the results, with stand-ins for llama.cpp's four programs that print what the
# real ones print (llama-bench -o jsonl: one object a line, tools/llama-bench's
# jsonl_printer; the speculative programs' "decoded N tokens in S seconds"; llama_perf's
# "eval time = X ms / N runs"), so that its tables, their join with bench's M_T(n) and its
# headline are checked before a GPU runs them
L=$R-llama
rm -rf "$L" && cp -r "$R" "$L" && mkdir -p "$L/.fake/bin"
cat > "$L/.fake/bin/llama-bench" <<'EOF'
#!/bin/sh
while [ $# -gt 0 ]; do case $1 in -p) p=$2; shift ;; -m) m=$2; shift ;; esac; shift; done
for n in $(echo "$p" | tr , ' '); do
    printf '{"build_commit": "de3ff81", "model_filename": "%s", "n_batch": 2048, "flash_attn": 0, "n_prompt": %d, "n_gen": 0, "n_depth": 0, "test_time": "2026-11-28T00:00:00Z", "avg_ns": %d, "stddev_ns": 2000, "avg_ts": 1.5, "stddev_ts": 0.1, "samples_ns": [ 1, 2 ],"samples_ts": [ 1, 2 ]}\n' "$m" "$n" $((2000000 + n * 10000))
done
EOF
printf '#!/bin/sh\necho "llama_perf_context_print:        eval time =     400.00 ms /     8 runs   (   50.00 ms per token,    20.00 tokens per second)" >&2\n' \
    > "$L/.fake/bin/llama-completion"
printf '#!/bin/sh\necho "decoded    8 tokens in    0.200 seconds, speed:   40.000 t/s" >&2\n' > "$L/.fake/bin/llama-speculative"
cp "$L/.fake/bin/llama-speculative" "$L/.fake/bin/llama-speculative-simple"
chmod +x "$L/.fake/bin"/*
LLAMA_BUILD_CUDA=$L/.fake sh tests/gpu-check.sh --dry-run --results "$L" --steps llamacpp > "$L.log" 2>&1 ||
    bad "llamacpp with stand-ins: exit $?: $(tail -3 "$L.log")"
lrow() { grep -v '^#' "$L/steps.tsv" | awk -F'\t' '$1 == "llamacpp"' | tail -1 | cut -f"$1"; }
[ "$(lrow 2)" = ok ] || bad "llamacpp with stand-ins: '$(lrow 2)', want ok"
n=$(awk -F'\t' '$1 == "target-wide" && $2 ~ /^[0-9]+$/ && $6 + 0 > 0 && $7 + 0 > 0' "$L/llamacpp-mt.tsv" | wc -l)
[ "$n" = 7 ] || bad "llamacpp-mt.tsv: $n rows of target-wide beside bench's M_T(n), want 7"
n=$(grep -v '^#' "$L/wide/llamacpp.tsv" | awk -F'\t' '$1 ~ /^(completion|speculative-simple|speculative)$/ && $4 > 0' | wc -l)
[ "$n" = 3 ] || bad "wide/llamacpp.tsv: $n rows with a time, want completion, speculative-simple and speculative"
lrow 5 | grep -q '^M_T(1) target-wide 2.0100 ms.*; specdec/llama.cpp M_T(n) worst [0-9.]* (.*goal <= 1 at every n: \(met\|missed\)); specdec best .* llama.cpp best speculative (speculative[a-z-]*) 40.0 t/s: [0-9.]*x (goal >= 1.5: \(met\|missed\))$' ||
    bad "llamacpp's headline with stand-ins: '$(lrow 5)'"
[ $fail = 0 ] && echo "gpu-check-dry: PASS: every step's output, the planted hang cut at its limit, the planted failing step failed, the planted malformed step caught, a GPU's missing sanitizer a failure, the summary ($R)"
exit $fail
