#!/bin/sh
# make gpu-check: every check the CUDA decoder and the GPU study owe a GPU, in one call of
# at most 8 minutes, from the bundle of tests/bench/cuda-bundle.sh (built on a machine
# without a GPU; nothing is compiled here). Each step runs under its own time limit
# (tests/bench/steps.sh), writes its results as it goes, and the next step runs whatever
# it did. The steps, in order, with their limits and the time expected on an H100 (s;
# the limits together 7 minutes, the expected times about 3):
#   test      test_cuda in full: logits against the CPU decoder for every weight type
#             and architecture (llama, llama3, qwen2, qwen3; F32 to the K-quants), trees, the cache; then every scheme certified on the GPU (150 000 passes
#             of a tiny model) in what is left of the limit                            75   25
#   generate  greedy `generate --device cuda` = the CPU's tokens (tests/cuda_generate.sh,
#             8 prompts x 48 tokens; F32 weights: none may differ, F16: a quarter;
#             a CUDA context per prompt and model)                                     60   25
#   sanitize  compute-sanitizer memcheck (leak check too) on test_cuda's logits_tiny,
#             logits_arch (qwen2/qwen3/llama3, K-quants) and tree_equals_paths, then
#             racecheck on logits_tiny                                                70   40
#   bench     bench_cuda with 20 passes a point: copy bandwidth, a one-token pass's
#             weight bytes / time against it, M_T(n)/M_T(1) for n = 1..64, on the shipped
#             target, the large target (data/models/large-target.gguf widened to F16)
#             and a 1B-class F16 random model (2.2 GB) that specdec random-model writes
#             in the background from the start (about 60 s of one core on the build
#             machine); then test_cuda's logits on that model                        85   20
#   decode    decode --device cuda --scheme all on the shipped pair (8 prompts x 64
#             tokens, calibration on 8), and on the large pair when data/models/
#             large-{target,draft}.gguf exist: every scheme's speedup beside its
#             prediction                                                               50   15
#   gt        the GT threshold sweep x 0.5, 1, 2 at temperatures 0 and 1 (4 x 64)      40   12
#   parallel  the parallel drafter against the sequential one, L = 1..4, T = 1 and 0   30   12
#   llamacpp  llama.cpp's CUDA programs on the same files: skipped, since a CUDA build
#             of llama.cpp does not fit the bundle (the reason is in the summary)     10    0
# Then a summary: each step's status (ok, skipped, timed out, failed), seconds, and its
# headline figure against its goal (test_cuda's logits within tolerance, copy bandwidth
# >= 70%, M_T(n) flat to 16 tokens, speedups inside their predicted intervals).
# SPECDEC_REQUIRE_GPU=1 is set for every step: a test or script that would skip fails.
#
# usage: tests/gpu-check.sh [--bundle FILE.tar.gz] [--dry-run] [--record] [--results DIR]
#                           [--steps LIST]
#   --bundle F   unpack F (tests/bench/cuda-bundle.sh: build-cuda/ with its libraries)
#                into the repository first; a bundle built from other sources than this
#                tree's (its BUNDLE file's checksum) is refused before anything runs
#   --dry-run    the CPU build (build/), tiny sizes, the CPU in place of the GPU (bench_cuda
#                --device cpu, no compute-sanitizer), plus the steps `hang`, `fail` and
#                `malformed` when named in --steps: the plumbing, checked by tests/gpu-check-dry.sh
#   --record     results into paper-figs/gpu/DEVICE/ (make figs draws them), else
#                out/gpu-check/ (--dry-run: out/gpu-check-dry/); --results DIR: there
#   --steps LIST comma-separated steps (default: all, in the order above; a run of some
#                keeps the results folder and adds to it, e.g. to run a failed step again)
# When $OUT is set (a folder), it receives steps.tsv and log.txt after every step (a call
# cut short keeps them), and at the end summary.txt and gpu-check-results.tar.gz (every
# result file): at most 4 files.
# env: GPU_CHECK_LIMITS="step=s,..." overrides time limits; GPU_CHECK_BUILD the build
# folder (build-cuda; --dry-run: build); CUDA_MODELS where the 1B model goes, not among
# the results (out/gpu-check-models); LLAMA_BUILD_CUDA (.cache/llama.cpp-build-cuda)
# --headline STEP FILE prints the headline of test or sanitize from such a step's output
# (tests/gpu-check-dry.sh feeds it lines in the GPU's formats, which a dry run cannot make).
# Exit status: 0 every step ok, 1 a step failed or timed out, or no usable GPU, 2 usage
# error, 3 none failed but one was skipped.
set -eu
cd "$(dirname "$0")/.."
HERE=tests/gpu-check.sh

# ---- the headlines of the steps whose output only a GPU makes ----
# test_cuda's totals, and its worst logits line "max|diff|/max|logit|: prompt E, tree E,
# one E (tol E)" as a share of its tolerance; a quantized model's line gives one
# tolerance a stage: "(tol: the rounding's own effect T, T, T, at least T0)"
headline_test() {
    awk '/^\[  PASSED  \] [0-9]+ test/ { p += $4 } /^\[  FAILED  \] [0-9]+ test/ { f += $4 }
         /^\[  SKIPPED \]/ { s++ } /^test: .* timed out/ { to = 1 }
         /max\|diff\|\/max\|logit\|: prompt/ { gsub(/[(),:]/, " "); n++; k = 0; q = 0
             for (i = 1; i < NF; i++) {
                 if ($i == "prompt" || $i == "tree" || $i == "one") err[++k] = $(i + 1) + 0
                 if ($i == "tol" && $(i + 1) ~ /^[0-9]/) tl[1] = tl[2] = tl[3] = $(i + 1) + 0
                 if ($i == "effect") { q = 1; for (j = 1; j <= 3; j++) tl[j] = $(i + j) + 0 }
                 if ($i == "least") lo = $(i + 1) + 0
             }
             for (j = 1; j <= k; j++) { t = q && lo > tl[j] ? lo : tl[j]; if (t > 0 && err[j] / t > w) w = err[j] / t } }
         END { printf "headline: %d passed, %d failed, %d skipped%s; logits: ", p, f, s, to ? ", the certification timed out" : ""
               if (n) printf "worst %.3f of the tolerance over %d model/type checks (goal <= 1: %s)\n", w, n, (w <= 1 ? "met" : "missed")
               else printf "none checked (no GPU test ran)\n" }' "$1"
}
# compute-sanitizer's "========= ERROR SUMMARY: N errors" (racecheck: "RACECHECK SUMMARY:
# N hazards displayed"); "no summary" when it printed none
headline_sanitize() { # MEMCHECK-FILE RACECHECK-FILE MEM-EXIT RACE-EXIT
    mem=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$1" | tail -1)
    race=$(sed -n 's/^========= RACECHECK SUMMARY: \([0-9]*\) hazard.*/\1/p; s/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$2" | tail -1)
    echo "headline: memcheck: ${mem:-no summary} errors (exit $3, goal 0) on ${CHECK_SAN_TESTS:-?}; racecheck: ${race:-no summary} hazards (exit $4, goal 0) on ${CHECK_RACE_TESTS:-?}"
    # --error-exitcode makes any error an exit status; a summary, when there, must say 0
    [ "$3" = 0 ] && [ "$4" = 0 ] && [ "${mem:-0}" = 0 ] && [ "${race:-0}" = 0 ]
}
if [ "${1:-}" = --headline ]; then
    case ${2:-} in
    test) headline_test "${3:?--headline test FILE}" ;;
    sanitize) headline_sanitize "${3:?}" "${4:?}" "${5:-0}" "${6:-0}" ;;
    *) echo "gpu-check: --headline test FILE | sanitize MEMCHECK RACECHECK [EXIT EXIT]" >&2; exit 2 ;;
    esac
    exit
fi

# ---- one step, run by the driver below under its time limit (all it needs is in the env) ----
if [ "${1:-}" = --step ]; then
    STEP=$2 R=$CHECK_RESULTS B=$CHECK_BUILD
    SD=$B/specdec T=$R/.tmp
    [ -d "$B/lib" ] && export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    hdr() { cat "$R/.header"; }
    study() { # a step of the GPU study (tests/bench/gpu-study.sh) at this check's sizes, on the
        # shipped pair (the study's own default is the large pair where it is there)
        env STUDY_BUILD="$B" STUDY_RESULTS="$R" E2E_DEVICE="$CHECK_DEVICE" E2E_THREADS="$CHECK_THREADS" E2E_PAIR=small "$@"; }
    decode_head() { # NAME TSV: the best scheme against its prediction, and how many fell inside
        grep -v '^#' "$2" | awk -F'\t' -v name="$1" '$1 != "ar" { n++; if ($8 >= $15 && $8 <= $16) in_++
                if ($8 > best) { best = $8; b = $1; p = $9; lo = $15; hi = $16 } }
            END { printf "%s: best %s %.3fx (predicted %.3f [%.3f, %.3f]); %d of %d schemes inside their predicted interval (goal: all: %s)",
                          name, b, best, p, lo, hi, in_, n, (in_ == n ? "met" : "missed") }'; }
    case $STEP in
    test)
        rc=0 orc=0
        if [ "$CHECK_DEVICE" = cuda ]; then
            # every test but the certification of every scheme on the GPU (150 000 passes of a
            # tiny model, the one whose time the GPU's call latency decides), then that one
            # in what is left of the limit: a slow certification does not hide the rest
            t0=$(date +%s)
            SPECDEC_CUDA_TESTS='!oracle_certified' $LINEBUF "$B/tests/test_cuda" > "$R/test_cuda.txt" 2>&1 || rc=$?
            left=$(( CHECK_TEST_S - 3 - ($(date +%s) - t0) ))
            [ $left -gt 5 ] || left=5
            SPECDEC_CUDA_TESTS=oracle_certified timeout "$left" $LINEBUF "$B/tests/test_cuda" >> "$R/test_cuda.txt" 2>&1 || orc=$?
            [ $orc != 124 ] || echo "test: test_cuda_oracle_certified timed out after $left s" | tee -a "$R/test_cuda.txt"
        else
            $LINEBUF "$B/tests/test_cuda" > "$R/test_cuda.txt" 2>&1 || rc=$?
        fi
        grep -E '^test_cuda: |^gpu |^\[  (PASSED|FAILED|SKIPPED)  \]' "$R/test_cuda.txt" || true
        headline_test "$R/test_cuda.txt"
        [ $rc = 0 ] && [ $orc = 0 ] || exit 1
        ;;
    generate)
        rc=0
        sh tests/cuda_generate.sh "$B" "$CHECK_GEN_PROMPTS" "$CHECK_GEN_TOKENS" "$CHECK_DEVICE" > "$R/generate.txt" 2>&1 || rc=$?
        cat "$R/generate.txt"
        # "cuda generate: PATH: S of N prompts x K tokens equal to the CPU's (D differ, at most A allowed: V)..."
        awk '/equal to the CPU/ && match($0, /\([0-9]+ differ[^)]*\)/) {
                 m = $3; sub(/.*\//, "", m); sub(/:$/, "", m)
                 h = h (h ? "; " : "") m " " $4 "/" $6 " prompts equal " substr($0, RSTART, RLENGTH) }
             /FAIL: / { f = $0; sub(/^cuda generate: /, "", f) }
             END { print "headline: " (h ? h : f ? f : "no result") }' "$R/generate.txt"
        exit $rc
        ;;
    sanitize)
        if [ -z "$CHECK_SANITIZER" ] && [ "$CHECK_DEVICE" = cuda ]; then
            # on a GPU the sanitizer is the step: without it the step fails, it is not ok
            echo "headline: sanitize: compute-sanitizer not found (PATH, /usr/local/cuda): memcheck and racecheck not run"
            exit 1
        fi
        if [ -z "$CHECK_SANITIZER" ]; then
            # the dry run: the reduced set without the sanitizer (its plumbing)
            rc=0
            SPECDEC_CUDA_TESTS=$CHECK_SAN_TESTS "$B/tests/test_cuda" > "$R/memcheck.txt" 2>&1 || rc=$?
            tail -3 "$R/memcheck.txt"
            echo "headline: memcheck not run (no compute-sanitizer: dry run); $CHECK_SAN_TESTS: exit $rc"
            exit $rc
        fi
        rc=0
        SPECDEC_CUDA_TESTS=$CHECK_SAN_TESTS timeout "$CHECK_SAN_MEM_S" $LINEBUF "$CHECK_SANITIZER" --tool memcheck \
            --leak-check full --error-exitcode 1 "$B/tests/test_cuda" > "$R/memcheck.txt" 2>&1 || rc=$?
        grep -E '^========= (ERROR|LEAK) SUMMARY|^\[  (PASSED|FAILED)  \]' "$R/memcheck.txt" || true
        rrc=0
        SPECDEC_CUDA_TESTS=$CHECK_RACE_TESTS timeout "$CHECK_SAN_RACE_S" $LINEBUF "$CHECK_SANITIZER" --tool racecheck \
            --error-exitcode 1 "$B/tests/test_cuda" > "$R/racecheck.txt" 2>&1 || rrc=$?
        grep -E '^========= (RACECHECK|ERROR) SUMMARY|^\[  (PASSED|FAILED)  \]' "$R/racecheck.txt" || true
        headline_sanitize "$R/memcheck.txt" "$R/racecheck.txt" $rc $rrc || exit 1
        ;;
    bench)
        big=$CUDA_MODELS/$CHECK_BIG_NAME.gguf
        # the model written in the background since the start: the table goes on without
        # it when it is not there 45 s before this step's limit
        w=0
        while [ ! -e "$big.done" ] && [ ! -e "$big.failed" ] && [ $w -lt "$CHECK_BIG_WAIT" ]; do sleep 1; w=$((w + 1)); done
        [ $w = 0 ] || echo "bench: waited $w s for $big"
        models="data/models/target.gguf"
        if [ -s data/models/large-target.gguf ] && lt=$(sh data/models/large-f16.sh "$SD"); then models="$models $lt"
        else echo "bench: the large target: absent (data/models/large-target.gguf, widened to F16 by data/models/large-f16.sh)"; fi
        if [ -e "$big.done" ]; then models="$models $big"
        else echo "bench: the 1B-class model is not there after $w s: $(tail -1 "$big.log" 2>/dev/null)"; fi
        rc=0
        "$B/tests/bench/bench_cuda" --device "$CHECK_DEVICE" --reps "$CHECK_BENCH_REPS" $models > "$R/bench.txt" || rc=$?
        cat "$R/bench.txt"
        # cuda-mt.tsv: the table of every model (paper-figs/cuda-mt.gp draws M_T(n)/M_T(1))
        # (one block per model, two blank lines apart, for gnuplot's index; their names in "# models:")
        {   hdr
            grep '^# device:' "$R/bench.txt" | sed 's/^# device:/# bench_cuda device:/'
            echo "# models: $(awk '/^# .*: [0-9]+ parameters/ { m = $2; sub(/:$/, "", m); sub(/.*\//, "", m); sub(/\.gguf$/, "", m); printf "%s ", m }' "$R/bench.txt")"
            printf '# model\tn\tmt_ms\tmt_ratio\tweight_gbps\tof_copy_pct\tmt_ms_nographs\tmt_ratio_nographs\n'
            awk '/^# .*: [0-9]+ parameters/ { if (m != "") printf "\n\n"; m = $2; sub(/:$/, "", m); sub(/.*\//, "", m); sub(/\.gguf$/, "", m) }
                 /^[0-9]+ / && NF == 7 { sub(/%$/, "", $5); printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m, $1, $2, $3, $4, $5, $6, $7 }' \
                "$R/bench.txt"; } > "$R/cuda-mt.tsv"
        lrc=0
        if [ -e "$big.done" ] && [ "$CHECK_DEVICE" = cuda ]; then
            SPECDEC_CUDA_MODEL=$big SPECDEC_CUDA_TESTS=logits_files $LINEBUF "$B/tests/test_cuda" > "$R/bench-logits.txt" 2>&1 || lrc=$?
            grep "$CHECK_BIG_NAME" "$R/bench-logits.txt" || true
            logits="$CHECK_BIG_NAME logits vs CPU: $([ $lrc = 0 ] && echo within tolerance || echo "FAILED (bench-logits.txt)")"
        else
            logits="$CHECK_BIG_NAME logits vs CPU: not checked ($([ "$CHECK_DEVICE" = cuda ] && echo 'no model' || echo 'dry run'))"
        fi
        # the headline: the largest model's one-token pass against the copy bandwidth, its M_T(n)/M_T(1)
        grep -v '^#' "$R/cuda-mt.tsv" | awk -F'\t' -v lg="$logits" '
            NF > 1 { if ($1 != m) { m = $1; k++ } name[k] = $1; r[k, $2] = $4; if ($2 == 1) { ms[k] = $3; pc[k] = $6 } }
            END { if (!k) { print "headline: no bench table; " lg; exit }
                  printf "headline: %s: one-token pass %.3f ms, %.0f%% of copy bandwidth (goal >= 70%%: %s); M_T(n)/M_T(1) n=4 %.2f, 16 %.2f, 64 %.2f (goal: flat to 16, <= 1.3: %s); %s\n",
                         name[k], ms[k], pc[k], (pc[k] >= 70 ? "met" : "missed"), r[k, 4], r[k, 16], r[k, 64],
                         (r[k, 16] <= 1.3 ? "met" : "missed"), lg }'
        [ $rc = 0 ] && [ $lrc = 0 ] || exit 1
        ;;
    decode)
        study E2E_PROMPTS=$CHECK_DEC_PROMPTS E2E_TOKENS=$CHECK_DEC_TOKENS STUDY_DECODE_ARGS="--calibrate $CHECK_DEC_CAL" \
            sh tests/bench/gpu-study.sh --step decode
        hl="headline: $(decode_head "shipped pair" "$R/e2e-predicted.tsv")"
        if [ -s data/models/large-target.gguf ] && [ -s data/models/large-draft.gguf ] && lt=$(sh data/models/large-f16.sh "$SD"); then
            "$SD" decode --target "$lt" --draft data/models/large-draft.gguf --scheme all \
                --n-prompts "$CHECK_DEC_PROMPTS" --max-tokens "$CHECK_DEC_TOKENS" --calibrate "$CHECK_DEC_CAL" \
                --threads "$CHECK_THREADS" --device "$CHECK_DEVICE" --quiet --tsv "$T/large.tsv" > "$R/decode-large.txt"
            { hdr; cat "$T/large.tsv"; } > "$R/e2e-predicted-large.tsv"
            sed -n '/^scheme/,/^# each/p' "$R/decode-large.txt"
            echo "decode: the large pair: e2e-predicted-large.tsv"
            hl="$hl; $(decode_head "large pair" "$R/e2e-predicted-large.tsv")"
        else
            echo "decode: the large pair: absent (data/models/large-target.gguf, large-draft.gguf)"
        fi
        echo "$hl"
        ;;
    gt)
        study E2E_PROMPTS=$CHECK_SWEEP_PROMPTS E2E_TOKENS=$CHECK_SWEEP_TOKENS STUDY_DECODE_ARGS="--calibrate $CHECK_SWEEP_CAL" \
            STUDY_GT_TEMPS="0 1" STUDY_GT_MULTS=$CHECK_GT_MULTS sh tests/bench/gpu-study.sh --step gt
        grep -v '^#' "$R/e2e-gt-sweep.tsv" | awk -F'\t' '$1 ~ /^gt/ { n++; d = $8 / $9 - 1; if (d < 0) d = -d; if (d <= 0.2) near++
                if ($8 > best[$4]) { best[$4] = $8; b[$4] = $1; p[$4] = $9 } }
            END { printf "headline:"; for (t in b) printf " T=%s best %s %.3fx (predicted %.3f);", t, b[t], best[t], p[t]
                  printf " %d of %d GT rows within 20%% of their prediction\n", near, n }'
        ;;
    parallel)
        study E2E_PROMPTS=$CHECK_SWEEP_PROMPTS E2E_TOKENS=$CHECK_SWEEP_TOKENS STUDY_DECODE_ARGS="--calibrate $CHECK_SWEEP_CAL" \
            STUDY_PAR_SWEEP=$CHECK_PAR_SWEEP sh tests/bench/gpu-study.sh --step parallel
        grep -v '^#' "$R/e2e-parallel.tsv" | awk -F'\t' '$1 ~ /^(parallel|sequential) L=/ { split($1, w, " "); s[w[2], w[1]] = $8; p[w[2], w[1]] = $9; L[w[2]] = 1 }
            END { printf "headline: speedup parallel/sequential (predicted):"
                  for (l = 1; l <= 8; l++) if (("L=" l) in L) printf " L=%d %.2f/%.2f (%.2f/%.2f)", l, s["L=" l, "parallel"], s["L=" l, "sequential"], p["L=" l, "parallel"], p["L=" l, "sequential"]
                  printf "\n" }'
        ;;
    llamacpp)
        if [ -x "$LLAMA_BUILD_CUDA/bin/llama-completion" ]; then
            study E2E_PROMPTS=$CHECK_SWEEP_PROMPTS E2E_TOKENS=$CHECK_SWEEP_TOKENS sh tests/bench/gpu-study.sh --step llamacpp
        else
            echo "llamacpp: skipped: $CHECK_LLAMA_WHY"
            exit 77
        fi
        ;;
    hang) # the dry check's planted step: runs past any limit
        echo "hang: sleeping past the limit"
        sleep 1000
        ;;
    fail) # the dry check's planted step: exits non-zero, so the summary must say failed
        echo "fail: a planted step that exits 3"
        exit 3
        ;;
    malformed) # the dry check's planted step: ok, but no headline and a bench table without rows
        echo "n    M_T(n) ms" > "$R/malformed.txt"
        ;;
    *) echo "gpu-check: unknown step '$STEP'" >&2; exit 2 ;;
    esac
    exit 0
fi

# ---- the driver ----
ALL="test,generate,sanitize,bench,decode,gt,parallel,llamacpp"
DRY=0 RESULTS="" RECORD=0 STEPS=$ALL BUNDLE=""
CMDLINE="sh $HERE $*"
START=$(date +%s)
while [ $# -gt 0 ]; do
    case $1 in
    --dry-run) DRY=1 ;;
    --record) RECORD=1 ;;
    --results) RESULTS=${2:?--results needs a folder}; shift ;;
    --steps) STEPS=${2:?--steps needs a list}; shift ;;
    --bundle) BUNDLE=${2:?--bundle needs a file}; shift ;;
    -h|--help) sed -n '2,/^# error, 3 none failed/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for s in $(echo "$STEPS" | tr ',' ' '); do
    case ,$ALL, in *,$s,*) continue ;; esac
    [ $DRY = 1 ] && { [ "$s" = hang ] || [ "$s" = fail ] || [ "$s" = malformed ]; } && continue
    echo "gpu-check: unknown step '$s' in --steps ($(echo $ALL | sed 's/,/, /g'))" >&2
    exit 2
done

# the time limits (s): on the GPU together 7 minutes (420 s); the dry run's the same but
# for its planted hang; GPU_CHECK_LIMITS=step=s,... overrides
limit() {
    l=$(echo ",${GPU_CHECK_LIMITS:-}," | sed -n "s/.*,$1=\([0-9]*\),.*/\1/p")
    [ -n "$l" ] && { echo "$l"; return; }
    case $1 in
    test) echo 75 ;; generate) echo 60 ;; sanitize) echo 70 ;; bench) echo 85 ;; decode) echo 50 ;;
    gt) echo 40 ;; parallel) echo 30 ;; llamacpp) echo 10 ;; hang) echo 3 ;; *) echo 30 ;;
    esac
}

if [ -n "$BUNDLE" ]; then
    [ -s "$BUNDLE" ] || { echo "gpu-check: the bundle '$BUNDLE' does not exist" >&2; exit 1; }
    tar -xzf "$BUNDLE" || { echo "gpu-check: cannot unpack the bundle '$BUNDLE'" >&2; exit 1; }
    echo "gpu-check: unpacked $BUNDLE ($(tar -tzf "$BUNDLE" | grep -c -v '/$') files)"
fi

. tests/bench/steps.sh
# build-cuda/BUNDLE (tests/bench/cuda-bundle.sh): the commit and CUDA runtime of the bundle
binfo() { sed -n "s/^$1: //p" "${B:-build-cuda}/BUNDLE" 2>/dev/null | head -1; }
# llama.cpp's CUDA programs, measured on the build machine (nvcc 13.0, sm_90 only, -O3, one
# object of each kind of its template instances, gzip -9): an mmq instance (quantized
# matrix product) 2.7 MB, 1.0 MB gzipped; a flash-attention mma instance 0.95 MB, 0.42 MB;
# a tile one 2.3 MB, 0.80 MB. The library compiles 22, 21 and 12 of them: about 40 MB
# gzipped before its 70 other files, against about 31 MB that the tracked files (24 MiB)
# and this bundle (8 MiB) leave of a lent machine's 64 MiB; and those three objects took
# 5 minutes of the build machine's 2 cores, the whole library about two hours
CHECK_LLAMA_WHY="a CUDA build of llama.cpp does not fit the bundle: its template instances alone gzip to about 40 MB, against 31 MB left (measured: tests/gpu-check.sh)"
if [ $DRY = 1 ]; then
    B=${GPU_CHECK_BUILD:-build} CHECK_DEVICE=cpu CHECK_THREADS=2
    CHECK_GEN_PROMPTS=2 CHECK_GEN_TOKENS=8 CHECK_SAN_TESTS=plan,forward_check CHECK_RACE_TESTS=plan_layout
    CHECK_BENCH_REPS=2 CHECK_BIG_NAME=tiny-f16 BIG_SHAPE="--shape 256,2,4,2,512,300 --ctx 600"
    CHECK_DEC_PROMPTS=1 CHECK_DEC_TOKENS=8 CHECK_DEC_CAL=1
    CHECK_SWEEP_PROMPTS=1 CHECK_SWEEP_TOKENS=8 CHECK_SWEEP_CAL=1 CHECK_GT_MULTS=0.5,1 CHECK_PAR_SWEEP=1-2
    : "${RESULTS:=out/gpu-check-dry}" "${CUDA_MODELS:=out/gpu-check-dry-models}"
    CHECK_SANITIZER=""
else
    B=${GPU_CHECK_BUILD:-build-cuda} CHECK_DEVICE=cuda CHECK_THREADS=$(nproc)
    CHECK_GEN_PROMPTS=8 CHECK_GEN_TOKENS=48 CHECK_SAN_TESTS=logits_tiny,logits_arch,tree_equals_paths CHECK_RACE_TESTS=logits_tiny
    CHECK_BENCH_REPS=20 CHECK_BIG_NAME=llama-1b-f16 BIG_SHAPE=""
    CHECK_DEC_PROMPTS=8 CHECK_DEC_TOKENS=64 CHECK_DEC_CAL=8
    CHECK_SWEEP_PROMPTS=4 CHECK_SWEEP_TOKENS=64 CHECK_SWEEP_CAL=4 CHECK_GT_MULTS=0.5,1,2 CHECK_PAR_SWEEP=1-4
    : "${CUDA_MODELS:=out/gpu-check-models}"
    CHECK_SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer \
        /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1 || true)
    export SPECDEC_REQUIRE_GPU=1
fi
CHECK_SAN_MEM_S=$(( $(limit sanitize) * 6 / 10 )) CHECK_SAN_RACE_S=$(( $(limit sanitize) * 3 / 10 ))
CHECK_BIG_WAIT=$(( $(limit bench) - 45 )) CHECK_TEST_S=$(limit test)
# test_cuda's stdout line by line, so that a program cut at its limit keeps its lines
LINEBUF=$(command -v stdbuf >/dev/null 2>&1 && echo "stdbuf -oL" || true)
: "${LLAMA_BUILD_CUDA:=.cache/llama.cpp-build-cuda}"
SD=$B/specdec
[ -d "$B/lib" ] && export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LOG=${TMPDIR:-/tmp}/gpu-check.$$.log
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }

# refusals before anything is measured: the binaries, then the device
for f in "$SD" "$B/tests/test_cuda" "$B/tests/bench/bench_cuda"; do
    [ -x "$f" ] || { say "gpu-check: FAIL: $f is not built ($([ $DRY = 1 ] && echo 'make; make build/tests/test_cuda build/tests/bench/bench_cuda' || echo 'carry the bundle of tests/bench/cuda-bundle.sh and pass --bundle'))" >&2; exit 1; }
done
"$SD" --help > /dev/null 2> "$LOG.run" || { say "gpu-check: FAIL: $SD does not run here: $(head -2 "$LOG.run")" >&2; exit 1; }
# a bundle built from other sources than this tree's would check what it does not hold
if [ $DRY = 0 ] && [ "$(binfo sources)" != "$(sh tests/bench/cuda-bundle.sh --sources-sum)" ]; then
    say "gpu-check: FAIL: $B was built from other sources than this tree's (build-cuda/BUNDLE: sources $(binfo sources), commit $(binfo commit)): rebuild it here with sh tests/bench/cuda-bundle.sh" >&2
    [ -n "${OUT:-}" ] && mkdir -p "$OUT" && cp "$LOG" "$OUT/log.txt"
    exit 1
fi
if [ $DRY = 1 ]; then
    DEVICE="cpu (dry run): $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) cores"
    DRIVER="-" SLUG=cpu-dry
else
    why=""
    if ! command -v nvidia-smi >/dev/null 2>&1; then why="nvidia-smi not found"
    elif ! timeout 30 nvidia-smi -L >/dev/null 2>&1; then why="nvidia-smi sees no device"
    elif ! timeout 60 "$SD" generate --model data/models/target.gguf --prompt probe --max-tokens 1 --device cuda \
            --ids --threads 1 >/dev/null 2>"$LOG.run"; then
        why="$SD generate --device cuda: $(head -1 "$LOG.run")"
    fi
    if [ -n "$why" ]; then
        say "gpu-check: FAIL: needs an NVIDIA GPU ($why); nothing measured." >&2
        say "gpu-check: --dry-run runs every step on the CPU build with tiny sizes." >&2
        [ -n "${OUT:-}" ] && mkdir -p "$OUT" && cp "$LOG" "$OUT/log.txt"
        rm -f "$LOG" "$LOG.run"
        exit 1
    fi
    DEVICE=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)
    DRIVER="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1); runtime $(binfo runtime)"
    # the sources' checksum matched above: the tree holds the bundle's sources, whatever
    # the git metadata copied with it says
    STEPS_COMMIT="$(binfo commit) (the bundle's sources, checksum matched; this tree's git: $(steps_commit))"
    SLUG=$(echo "$DEVICE" | cut -d, -f1 | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//')
    [ -n "$CHECK_SANITIZER" ] || say "gpu-check: compute-sanitizer not found (PATH, /usr/local/cuda): the sanitize step will fail"
fi
rm -f "$LOG.run"
[ $RECORD = 1 ] && RESULTS=paper-figs/gpu/$SLUG
: "${RESULTS:=out/gpu-check}"
# a run of every step starts afresh; a run of some (--steps) adds its files and rows to
# what an earlier run on this machine left
[ "$STEPS" != "$ALL" ] || rm -rf "$RESULTS"

STEPS_DEVICE=$DEVICE STEPS_DRIVER=$DRIVER
STEPS_COMMAND="$CMDLINE (generate $CHECK_GEN_PROMPTS x $CHECK_GEN_TOKENS, decode $CHECK_DEC_PROMPTS x $CHECK_DEC_TOKENS, sweeps $CHECK_SWEEP_PROMPTS x $CHECK_SWEEP_TOKENS, $CHECK_THREADS threads)"
steps_begin "$RESULTS"
export CHECK_RESULTS="$RESULTS" CHECK_BUILD="$B" CHECK_DEVICE CHECK_THREADS CHECK_GEN_PROMPTS CHECK_GEN_TOKENS \
    CHECK_SAN_TESTS CHECK_RACE_TESTS CHECK_SANITIZER CHECK_SAN_MEM_S CHECK_SAN_RACE_S CHECK_BENCH_REPS CHECK_BIG_NAME \
    CUDA_MODELS CHECK_DEC_PROMPTS CHECK_DEC_TOKENS CHECK_DEC_CAL CHECK_SWEEP_PROMPTS CHECK_SWEEP_TOKENS CHECK_SWEEP_CAL \
    CHECK_GT_MULTS CHECK_PAR_SWEEP LLAMA_BUILD_CUDA CHECK_LLAMA_WHY CHECK_BIG_WAIT CHECK_TEST_S LINEBUF

# the 1B-class model, written on the CPU while the first steps use the GPU (bench waits for it)
BIG=$CUDA_MODELS/$CHECK_BIG_NAME.gguf BIGPID=""
mkdir -p "$CUDA_MODELS"
rm -f "$BIG.done" "$BIG.failed"
case ,$STEPS, in *,bench,*)
    if [ -s "$BIG" ] && [ -e "$BIG.ok" ]; then touch "$BIG.done"
    else
        # its own session, so that the end of the check can stop it (and its children) if unfinished
        SETSID=$(command -v setsid || true)
        BIG=$BIG SD=$SD BIG_SHAPE=$BIG_SHAPE $SETSID sh -c 'rm -f "$BIG.ok"
            if "$SD" random-model --type f16 $BIG_SHAPE --out "$BIG" > "$BIG.log" 2>&1
            then touch "$BIG.ok" "$BIG.done"; else touch "$BIG.failed"; fi' &
        BIGPID=$!
    fi ;;
esac

{
    cat "$RESULTS/.header"
    echo "# gpu-check: $B on $DEVICE; steps $STEPS; results in $RESULTS/"
    for s in $(echo "$STEPS" | tr ',' ' '); do
        steps_run "$s" "$(limit "$s")" sh "$HERE" --step "$s"
        # a call cut short keeps in $OUT what the steps so far measured
        [ -z "${OUT:-}" ] || { mkdir -p "$OUT" && cp "$RESULTS/steps.tsv" "$OUT/" && cp "$LOG" "$OUT/log.txt"; } || true
    done
    echo "$STEPS_BAD $STEPS_FAILED" > "$RESULTS/.tmp/tally"
} 2>&1 | tee -a "$LOG"
read -r STEPS_BAD STEPS_FAILED < "$RESULTS/.tmp/tally"
[ -n "$BIGPID" ] && { kill -TERM "-$BIGPID" 2>/dev/null || kill -TERM "$BIGPID" 2>/dev/null; } || true
rm -rf "$RESULTS/.tmp"
rm -f "$BIG.done" "$BIG.failed"

n=$(echo "$STEPS" | tr ',' '\n' | wc -l)
{
    echo
    echo "# gpu-check summary: $DEVICE; driver $DRIVER; commit $(sed -n 's/^# commit: //p' "$RESULTS/.header")"
    steps_table "$RESULTS" "$n"
    ok=$(grep -v '^#' "$RESULTS/steps.tsv" | tail -n "$n" | awk -F'\t' '$2 == "ok"' | wc -l)
    if [ "$STEPS_FAILED" != 0 ]; then verdict=FAIL
    elif [ "$STEPS_BAD" != 0 ]; then verdict=INCOMPLETE
    else verdict=PASS; fi
    echo "gpu-check: $verdict: $ok of $n steps ok, $STEPS_FAILED failed or timed out, $((STEPS_BAD - STEPS_FAILED)) skipped; $(( $(date +%s) - START )) s in all; results in $RESULTS/"
} | tee "$RESULTS/summary.txt" | tee -a "$LOG"
cp "$LOG" "$RESULTS/log.txt"
rm -f "$LOG"
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    cp "$RESULTS/summary.txt" "$RESULTS/steps.tsv" "$RESULTS/log.txt" "$OUT/"
    tar -czf "$OUT/gpu-check-results.tar.gz" -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"
    echo "gpu-check: copied summary.txt, steps.tsv, log.txt, gpu-check-results.tar.gz into \$OUT ($OUT)"
fi
[ "$STEPS_FAILED" = 0 ] || exit 1
[ "$STEPS_BAD" = 0 ] || exit 3
exit 0
