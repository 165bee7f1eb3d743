#!/bin/sh
# make gpu-check: every check the CUDA decoder and the GPU study owe a GPU, in one call of
# at most 8 minutes, from the bundle of tests/bench/cuda-bundle.sh (built on a machine
# without a GPU; nothing of specdec is compiled here). Each step runs under its own time
# limit (tests/bench/steps.sh), writes its results as it goes, and the next step runs
# whatever it did; every step also stops at the call's deadline (480 s from the start),
# so a slow early step shortens the late ones, never the call. The steps, in order, with
# their limits and the time expected on an H100/H200 (s):
#   tune      every kernel variant (tests/bench/cuda-tune.sh: SPECDEC_CUDA_TUNE values)
#             checked by test_cuda's logits and timed on the 1B-class model, M_T(n) for n
#             = 1..64; the fastest that held make the choice every later step runs with
#             (SPECDEC_CUDA_TUNE, unless the caller set it; the summary names it).
#             --steps tune alone is the tuning mode: a table of the variants, in
#             tune.tsv; CHECK_TUNE_VARIANTS="v1 v2 ..." another sweep              120   60
#   test      test_cuda in full: logits against the CPU decoder for every weight type
#             and architecture (llama, llama3, qwen2, qwen3; F32 to the K-quants), trees, the cache; then every scheme certified on the GPU (150 000 passes
#             of a tiny model) in what is left of the limit                            75   20
#   generate  greedy `generate --device cuda` = the CPU's tokens (tests/cuda_generate.sh,
#             8 prompts x 48 tokens; F32 weights: none may differ, F16: a quarter;
#             a CUDA context per prompt and model)                                     60   10
#   sanitize  compute-sanitizer memcheck (leak check too) on test_cuda's logits_tiny,
#             logits_arch (qwen2/qwen3/llama3, K-quants) and tree_equals_paths, then
#             racecheck on logits_tiny                                                70   15
#   bench     bench_cuda with 20 passes a point: copy bandwidth, a one-token pass's
#             weight bytes / time against it, M_T(n)/M_T(1) for n = 1..64, on the shipped
#             target, the large target (data/models/large-target.gguf widened to F16),
#             the large target widened to 1B parameters and a 1B-class F16 random model
#             (2.2 GB), both written in the background from the start (below); then
#             test_cuda's logits on the last two                                       85   15
#   decode    decode --device cuda --scheme all on the shipped pair (8 prompts x 64
#             tokens, calibration on 8), and on the large pair when data/models/
#             large-{target,draft}.gguf exist: every scheme's speedup beside its
#             prediction                                                               50   20
#   gt        the GT threshold sweep x 0.5, 1, 2 at temperatures 0 and 1 (4 x 64)      40    5
#   parallel  the parallel drafter against the sequential one, L = 1..4, T = 1 and 0   30    6
#   wide-decode, wide-gt, wide-parallel: the same three on the wide pair: the large
#             target widened to 1.002B parameters with inert neurons (specdec convert
#             --ffn-width 53760, data/models/large-wide.sh: its logits are the large
#             target's, 2.0 GB of F16 a pass) and data/models/large-draft.gguf (and
#             large-parallel.gguf), where speculation should pay: goals best scheme
#             >= 2x ar, every speedup inside its predicted interval, the GT optimum
#             inside the threshold's predicted interval; into RESULTS/wide/       60, 45, 40   ~45
#   llamacpp  llama.cpp's CUDA build (tests/bench/llamacpp/build.sh --cuda, from the
#             bundle's trimmed sources, sm_90 only, no flash attention), started nice'd
#             in the background from the first second on the cores the steps leave:
#             waits for it (its limit less 80 s), then llama-bench -p 1,2,4,...,64 -n 0
#             on the widened target and the 1B model (llamacpp-mt.tsv, beside bench's
#             M_T(n): goal specdec's no worse at every n), and llama-completion,
#             llama-speculative-simple, llama-speculative on the wide pair (3 x 64; goal
#             specdec's best >= 1.5x llama.cpp's best speculative run); skipped with the
#             reason when it cannot be built here or is not built in time   300 (what is left)
# A step is a line of STEP_LIMITS below and a branch of the --step case; OPT_STEPS holds
# those that run only when --steps names them.
# The background jobs (their own sessions, stopped at the end; logs in CUDA_MODELS):
# the 1B random model (`specdec random-model`, about 60 s of one core on the build
# machine), the widened target (`specdec convert`, 35 s there, most of it writing 2 GB),
# llama.cpp's build (about 50-65 CPU-minutes, 3.5-5 minutes on 16 cores: measured in
# part, tests/bench/llamacpp/README.md; its ninja log comes back with the results).
# Then a summary: each step's status (ok, skipped, timed out, failed), seconds, and its
# headline figure against its goal (test_cuda's logits within tolerance, copy bandwidth
# >= 70%, M_T(n) flat to 16 tokens, speedups inside their predicted intervals).
# SPECDEC_REQUIRE_GPU=1 is set for every step: a test or script that would skip fails.
#
# usage: tests/gpu-check.sh [--bundle FILE.tar.xz] [--dry-run] [--record] [--results DIR]
#                           [--steps LIST]
#   --bundle F   unpack F (tests/bench/cuda-bundle.sh: build-cuda/ with its libraries,
#                llama.cpp's sources; .tar.xz or .tar.gz) into the repository first, and
#                say what the tree and the bundle take of the 64 MiB; a bundle built from
#                other sources than this tree's (its BUNDLE file's checksum) is refused
#                before anything runs
#   --dry-run    the CPU build (build/), tiny sizes (the wide pair's target: the shipped
#                one widened from 704 to 768 neurons), the CPU in place of the GPU (bench_cuda --device cpu, no
#                compute-sanitizer, no llama.cpp build: llamacpp skipped unless one is in
#                LLAMA_BUILD_CUDA), plus the steps `hang`, `fail` and `malformed` when named
#                in --steps: the plumbing, checked by tests/gpu-check-dry.sh
#   --record     results into paper-figs/gpu/DEVICE/ (make figs draws them), else
#                out/gpu-check/ (--dry-run: out/gpu-check-dry/); --results DIR: there
#   --steps LIST comma-separated steps (default: all, in the order above; a run of some
#                keeps the results folder and adds to it, e.g. to run a failed step again)
# When $OUT is set (a folder), it receives steps.tsv and log.txt after every step (a call
# cut short keeps them), and at the end summary.txt and gpu-check-results.tar.gz (every
# result file): at most 4 files.
# env: GPU_CHECK_LIMITS="step=s,..." overrides time limits, GPU_CHECK_DEADLINE the call's
# deadline (s; 480, the dry run 1800); GPU_CHECK_BUILD the build
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
    decode_head() { # NAME TSV [GOAL]: the best scheme against its prediction (and against GOAL x
        # ar's rate), and how many fell inside their predicted interval
        grep -v '^#' "$2" | awk -F'\t' -v name="$1" -v goal="${3:-}" '$1 != "ar" { n++; if ($8 >= $15 && $8 <= $16) in_++
                if ($8 > best) { best = $8; b = $1; p = $9; lo = $15; hi = $16 } }
            END { printf "%s: best %s %.3fx (predicted %.3f [%.3f, %.3f])", name, b, best, p, lo, hi
                  if (goal != "") printf " (goal >= %gx: %s)", goal, (best >= goal ? "met" : "missed")
                  printf "; %d of %d schemes inside their predicted interval (goal: all: %s)", in_, n, (in_ == n ? "met" : "missed") }'; }
    wait_bg() { # NAME SECONDS: waits for the driver's background job NAME (below) to end; 0 if it ended well
        w=0 f=$CUDA_MODELS/$1
        while [ ! -e "$f.done" ] && [ ! -e "$f.failed" ] && [ $w -lt "$2" ]; do sleep 1; w=$((w + 1)); done
        [ $w = 0 ] || echo "$STEP: waited $w s for $1"
        [ -e "$f.done" ]
    }
    wide_study() { # a step of the GPU study on the widened pair (tests/bench/e2e-env.sh's wide), into $R/wide/
        # (on the GPU the loader makes no CPU copy of its 2 GB of rows: backend.h, sd_backend_load)
        mkdir -p "$R/wide" && cp "$R/.header" "$R/wide/.header" && cp "$R/DEVICE" "$R/wide/DEVICE"
        env STUDY_BUILD="$B" STUDY_RESULTS="$R/wide" E2E_DEVICE="$CHECK_DEVICE" E2E_THREADS="$CHECK_THREADS" E2E_PAIR=wide \
            E2E_WIDE_TARGET="$CUDA_MODELS/$CHECK_WIDE_NAME.gguf" "$@"; }
    need_wide() { # the widened target the driver writes in the background: there, or the step fails saying why
        wait_bg "$CHECK_WIDE_NAME.gguf" "$CHECK_WIDE_WAIT" && return
        echo "$STEP: FAIL: the widened target $CUDA_MODELS/$CHECK_WIDE_NAME.gguf is not there: $(tail -1 "$CUDA_MODELS/$CHECK_WIDE_NAME.gguf.log" 2>/dev/null)" >&2
        exit 1; }
    llamacpp_step() { # llama.cpp's CUDA build beside specdec on the same files
        [ -z "$CHECK_LLAMA_WHY" ] || { echo "llamacpp: skipped: $CHECK_LLAMA_WHY"; exit 77; }
        bw=0
        [ "$CHECK_LLAMA_BG" = 1 ] && ! wait_bg llama-build $(( ${CHECK_STEP_LIMIT:-300} - CHECK_LLAMA_RUN_S )) && bw=1
        # the build's own times, object by object (ninja's log: start and end ms), done or not
        [ ! -f "$LLAMA_BUILD_CUDA/.ninja_log" ] || cp "$LLAMA_BUILD_CUDA/.ninja_log" "$R/llamacpp-build-log.txt"
        if [ $bw = 1 ]; then
            if [ -e "$CUDA_MODELS/llama-build.failed" ]; then
                tail -5 "$CUDA_MODELS/llama-build.log" >&2
                echo "headline: llama.cpp's CUDA build failed after $(( $(date +%s) - CHECK_START )) s ($CUDA_MODELS/llama-build.log)"
                exit 1
            fi
            n=$(grep -o '^\[[0-9]*/[0-9]*\]' "$LLAMA_BUILD_CUDA.build.log" 2>/dev/null | tail -1)
            echo "llamacpp: skipped: llama.cpp's CUDA build is not done $(( $(date +%s) - CHECK_START )) s into the call (${n:-no object built yet} in $LLAMA_BUILD_CUDA.build.log)"
            exit 77
        fi
        grep '^llamacpp: built in' "$CUDA_MODELS/llama-build.log" 2>/dev/null || true
        LB=$LLAMA_BUILD_CUDA/bin NGL="" rc=0
        [ "$CHECK_DEVICE" = cuda ] && NGL="-ngl 99"
        need_wide
        # llama-bench: one pass over n tokens (pp n, from an empty cache), on the widened
        # target and the 1B random model, beside bench's M_T(n) of the same files
        {   hdr
            echo "# llama-bench -p 1,2,4,8,16,32,64 -n 0 -r $CHECK_LLAMA_REPS $NGL -o jsonl ($LB); M_T(n): its mean time of a pass"
            echo "# specdec_mt_ms: bench_cuda's M_T(n) of the same file (cuda-mt.tsv), - when bench did not run it"
            printf 'model\tn\tmt_ms\tmt_ratio\ttok_s\tspecdec_mt_ms\tspecdec_over_llamacpp\n'; } > "$R/llamacpp-mt.tsv"
        sdt=$R/cuda-mt.tsv
        [ -s "$sdt" ] || sdt=/dev/null
        for m in "$CUDA_MODELS/$CHECK_WIDE_NAME.gguf" "$CUDA_MODELS/$CHECK_BIG_NAME.gguf"; do
            # the 1B model only when written whole (its .ok), the widened one is (need_wide)
            [ "$m" = "$CUDA_MODELS/$CHECK_WIDE_NAME.gguf" ] || [ -e "$m.ok" ] || continue
            name=$(basename "$m" .gguf)
            if ! "$LB/llama-bench" -m "$m" -p 1,2,4,8,16,32,64 -n 0 -r "$CHECK_LLAMA_REPS" -t "$CHECK_THREADS" $NGL -o jsonl \
                    > "$R/llamacpp-bench-$name.jsonl" 2> "$T/lb.err"; then
                echo "llamacpp: llama-bench on $m failed: $(tail -2 "$T/lb.err")" >&2; rc=1; continue
            fi
            # one JSON object a line: "n_prompt": N, ..., "avg_ns": NS
            awk -v name="$name" -v sdt="$sdt" 'FILENAME == sdt { split($0, c, "\t"); if (c[1] == name) sd[c[2]] = c[3]; next }
                 match($0, /"n_prompt": *[0-9]+/) { n = substr($0, RSTART, RLENGTH); sub(/.*: */, "", n)
                     if (!match($0, /"avg_ns": *[0-9]+/)) next
                     ns = substr($0, RSTART, RLENGTH); sub(/.*: */, "", ns)
                     k++; nn[k] = n; ms[k] = ns / 1e6; if (n == 1) one = ms[k] }
                 END { for (i = 1; i <= k; i++) printf "%s\t%d\t%.4f\t%.3f\t%.1f\t%s\t%s\n", name, nn[i], ms[i], one ? ms[i] / one : 0,
                           nn[i] / ms[i] * 1e3, nn[i] in sd ? sd[nn[i]] : "-", nn[i] in sd ? sprintf("%.3f", sd[nn[i]] / ms[i]) : "-" }' \
                "$sdt" "$R/llamacpp-bench-$name.jsonl" >> "$R/llamacpp-mt.tsv"
        done
        grep -v '^#' "$R/llamacpp-mt.tsv" | column -t 2>/dev/null || grep -v '^#' "$R/llamacpp-mt.tsv"
        # llama-completion, llama-speculative-simple and llama-speculative on the widened pair
        # (the study's llamacpp step), against wide-decode's specdec rates of the same pair
        wide_study E2E_PROMPTS=$CHECK_LLAMA_PROMPTS E2E_TOKENS=$CHECK_SWEEP_TOKENS STUDY_DECODE_ARGS= \
            sh tests/bench/gpu-study.sh --step llamacpp || rc=1
        {   grep -v '^#' "$R/llamacpp-mt.tsv" | awk -F'\t' '$1 != "model" && $7 != "-" { if (!k || $7 > w) { w = $7; wn = $2; wm = $1 } k++ }
                $1 != "model" && $2 == 1 { one = one (one ? ", " : "") $1 " " $3 " ms" }
                END { printf "M_T(1) %s; ", one ? one : "none measured"
                      if (k) printf "specdec/llama.cpp M_T(n) worst %.2f (%s, n=%d; goal <= 1 at every n: %s); ", w, wm, wn, (w <= 1 ? "met" : "missed")
                      else printf "specdec/llama.cpp M_T(n): no bench rows to compare; " }'
            awk -F'\t' 'FNR == 1 { f++ } f == 1 && !/^#/ && $1 != "program" && $4 > 0 { n[$1] += $3; s[$1] += $4; next }
                f == 2 && !/^#/ && $1 != "ar" && $6 > best { best = $6; bn = $1 }
                END { lb = 0; for (k in n) if (k != "completion" && n[k] / s[k] > lb) { lb = n[k] / s[k]; ln = k }
                      if (!(lb > 0) || !(best > 0)) { printf "speculative: no rates to compare"; exit }
                      printf "specdec best %s %.1f t/s, llama.cpp best speculative (%s) %.1f t/s: %.2fx (goal >= 1.5: %s)",
                             bn, best, ln, lb, best / lb, (best / lb >= 1.5 ? "met" : "missed") }' \
                "$R/wide/llamacpp.tsv" "$R/wide/e2e-predicted.tsv" 2>/dev/null; } | tr -d '\n' > "$T/lhead"
        echo "headline: $(cat "$T/lhead")"
        exit $rc
    }
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
        # the large target widened to 1B parameters (written in the background too)
        wide=$CUDA_MODELS/$CHECK_WIDE_NAME.gguf
        if wait_bg "$CHECK_WIDE_NAME.gguf" 20; then models="$models $wide"
        else echo "bench: the widened target is not there: $(tail -1 "$wide.log" 2>/dev/null)"; fi
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
            if [ -e "$wide.done" ]; then
                wrc=0
                SPECDEC_CUDA_MODEL=$wide SPECDEC_CUDA_TESTS=logits_files $LINEBUF "$B/tests/test_cuda" >> "$R/bench-logits.txt" 2>&1 || wrc=$?
                grep "$CHECK_WIDE_NAME" "$R/bench-logits.txt" || true
                logits="$logits; $CHECK_WIDE_NAME: $([ $wrc = 0 ] && echo within tolerance || echo "FAILED (bench-logits.txt)")"
                [ $wrc = 0 ] || lrc=$wrc
            fi
        else
            logits="$CHECK_BIG_NAME logits vs CPU: not checked ($([ "$CHECK_DEVICE" = cuda ] && echo 'no model' || echo 'dry run'))"
        fi
        # the headline: the largest model's one-token pass against the copy bandwidth, its M_T(n)/M_T(1)
        grep -v '^#' "$R/cuda-mt.tsv" | awk -F'\t' -v lg="$logits" -v wn="$CHECK_WIDE_NAME" '
            NF > 1 { if ($1 != m) { m = $1; k++ } name[k] = $1; r[k, $2] = $4; if ($2 == 1) { ms[k] = $3; pc[k] = $6 }
                     if ($1 == wn) wk = k }
            END { if (!k) { print "headline: no bench table; " lg; exit }
                  printf "headline: %s: one-token pass %.3f ms, %.0f%% of copy bandwidth (goal >= 70%%: %s); M_T(n)/M_T(1) n=4 %.2f, 16 %.2f, 64 %.2f (goal: flat to 16, <= 1.3: %s); ",
                         name[k], ms[k], pc[k], (pc[k] >= 70 ? "met" : "missed"), r[k, 4], r[k, 16], r[k, 64],
                         (r[k, 16] <= 1.3 ? "met" : "missed")
                  if (wk && wk != k) printf "%s: %.3f ms, %.0f%%, M_T(16)/M_T(1) %.2f; ", wn, ms[wk], pc[wk], r[wk, 16]
                  printf "%s\n", lg }'
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
    tune)
        # every kernel variant's logits and M_T(n) on the 1B-class model (written in the
        # background since the start), and the choice the later steps run with
        [ $CHECK_DEVICE = cuda ] && dev="" || dev="--device cpu"
        rc=0
        TUNE_WAIT=$CHECK_BIG_WAIT TUNE_REPS=$CHECK_TUNE_REPS TUNE_TESTS=$CHECK_TUNE_TESTS SPECDEC_DEVICE_ARG=$dev \
            sh tests/bench/cuda-tune.sh "$B" "$CUDA_MODELS/$CHECK_BIG_NAME.gguf" "$R" ${CHECK_TUNE_VARIANTS:-} || rc=$?
        awk -F'\t' '!/^#/ && $2 == "ok" && $4 != "-" { if (b == "" || $4 + 0 < b + 0) { b = $4; pc = $11 } if (b16 == "" || $8 + 0 < b16 + 0) b16 = $8 }
                     !/^#/ { n++; if ($2 == "ok") k++ }
                     END { printf "headline: %d of %d variants held their logits; best M_T(1) %s ms (%s of copy), best M_T(16) %s ms; choice: %s\n",
                                  k, n, b == "" ? "-" : b, pc == "" ? "-" : pc, b16 == "" ? "-" : b16, choice }' \
            choice="$(cat "$R/tune-choice" 2>/dev/null || echo none)" "$R/tune.tsv"
        exit $rc
        ;;
    wide-decode)
        need_wide
        wide_study E2E_PROMPTS=$CHECK_DEC_PROMPTS E2E_TOKENS=$CHECK_DEC_TOKENS STUDY_DECODE_ARGS="--calibrate $CHECK_DEC_CAL" \
            sh tests/bench/gpu-study.sh --step decode
        sed -n '/^# costs/p; /^scheme/,/^# each/p' "$R/wide/decode.txt"
        echo "headline: $(decode_head "wide pair" "$R/wide/e2e-predicted.tsv" 2)"
        ;;
    wide-gt)
        need_wide
        wide_study E2E_PROMPTS=$CHECK_SWEEP_PROMPTS E2E_TOKENS=$CHECK_SWEEP_TOKENS STUDY_DECODE_ARGS="--calibrate $CHECK_SWEEP_CAL" \
            STUDY_GT_TEMPS="0 1" STUDY_GT_MULTS=$CHECK_GT_MULTS sh tests/bench/gpu-study.sh --step gt
        # decode's verdict: "gt sweep: KIND's measured optimum at threshold X (c x M); the
        # predicted threshold c = C [LO, HI]: inside|below it|above it"
        for t in 0 1; do sed -n "s/^gt sweep: /T=$t: /p" "$R/wide/gt-$t.txt"; done | tee "$T/verdicts"
        v=$(awk '{ n++; if ($NF == "inside") k++ } END { printf "%d of %d GT optima inside the threshold'"'"'s predicted interval (goal: all: %s)", k, n, (n && k == n ? "met" : "missed") }' "$T/verdicts")
        grep -v '^#' "$R/wide/e2e-gt-sweep.tsv" | awk -F'\t' -v v="$v" '$1 ~ /^gt/ { if ($8 > best[$4]) { best[$4] = $8; b[$4] = $1; p[$4] = $9 } }
            END { printf "headline: wide pair:"; for (t in b) printf " T=%s best %s %.3fx (predicted %.3f);", t, b[t], best[t], p[t]
                  printf " %s\n", v }'
        ;;
    wide-parallel)
        need_wide
        wide_study E2E_PROMPTS=$CHECK_SWEEP_PROMPTS E2E_TOKENS=$CHECK_SWEEP_TOKENS STUDY_DECODE_ARGS="--calibrate $CHECK_SWEEP_CAL" \
            STUDY_PAR_SWEEP=$CHECK_PAR_SWEEP sh tests/bench/gpu-study.sh --step parallel
        grep -v '^#' "$R/wide/e2e-parallel.tsv" | awk -F'\t' '$1 ~ /^(parallel|sequential) L=/ { split($1, w, " "); s[w[2], w[1]] = $8; p[w[2], w[1]] = $9; L[w[2]] = 1
                n++; if ($8 >= $15 && $8 <= $16) in_++ }
            END { printf "headline: wide pair: speedup parallel/sequential (predicted):"
                  for (l = 1; l <= 8; l++) if (("L=" l) in L) printf " L=%d %.2f/%.2f (%.2f/%.2f)", l, s["L=" l, "parallel"], s["L=" l, "sequential"], p["L=" l, "parallel"], p["L=" l, "sequential"]
                  printf "; %d of %d inside their predicted interval (goal: all: %s)\n", in_, n, (n && in_ == n ? "met" : "missed") }'
        ;;
    llamacpp)
        llamacpp_step
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
USER_TUNE=${SPECDEC_CUDA_TUNE:-}
# The steps with their time limits (s), in the order they run: a step is a line here and a
# branch of the --step case above. OPT_STEPS run only when --steps names them (e.g. a
# sweep of kernel variants); DRY_STEPS are the dry run's planted ones.
STEP_LIMITS="tune=120 test=75 generate=60 sanitize=70 bench=85 decode=50 gt=40 parallel=30 wide-decode=60 wide-gt=45 wide-parallel=40 llamacpp=300"
OPT_STEPS=""
DRY_STEPS="hang=3 fail=30 malformed=30"
ALL=$(echo $STEP_LIMITS | sed 's/=[0-9]*//g; s/ /,/g')
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
    case " $STEP_LIMITS $OPT_STEPS " in *" $s="*) continue ;; esac
    [ $DRY = 1 ] && case " $DRY_STEPS " in *" $s="*) continue ;; esac
    echo "gpu-check: unknown step '$s' in --steps ($(echo $ALL | sed 's/,/, /g')$(echo " $OPT_STEPS" | sed 's/=[0-9]*//g; s/ /, /g'))" >&2
    exit 2
done

# a step's time limit (s): GPU_CHECK_LIMITS=step=s,... overrides the tables above. Each
# step also stops at the call's deadline (GPU_CHECK_DEADLINE, s from the start: 480 on
# the GPU, so that the call with its summary ends within 8 minutes; the limits together
# are more, the late steps get what the early ones left), and one that would start with
# under 10 s left is skipped
limit() {
    l=$(echo ",${GPU_CHECK_LIMITS:-}," | sed -n "s/.*,$1=\([0-9]*\),.*/\1/p")
    [ -n "$l" ] || l=$(echo " $STEP_LIMITS $OPT_STEPS $DRY_STEPS " | sed -n "s/.* $1=\([0-9]*\) .*/\1/p")
    echo "${l:-30}"
}

if [ -n "$BUNDLE" ]; then
    [ -s "$BUNDLE" ] || { echo "gpu-check: the bundle '$BUNDLE' does not exist" >&2; exit 1; }
    # xz (cuda-bundle.sh's) or gzip; without an xz program, Python's tarfile reads it
    sh tests/bench/cuda-bundle.sh --unpack "$BUNDLE" > "${TMPDIR:-/tmp}/gpu-check.$$.files" ||
        { echo "gpu-check: cannot unpack the bundle '$BUNDLE'" >&2; exit 1; }
    echo "gpu-check: unpacked $BUNDLE ($(grep -c -v '/$' "${TMPDIR:-/tmp}/gpu-check.$$.files") files)"
    rm -f "${TMPDIR:-/tmp}/gpu-check.$$.files"
fi

. tests/bench/steps.sh
# build-cuda/BUNDLE (tests/bench/cuda-bundle.sh): the commit and CUDA runtime of the bundle
binfo() { sed -n "s/^$1: //p" "${B:-build-cuda}/BUNDLE" 2>/dev/null | head -1; }
# llama.cpp's CUDA build (tests/bench/llamacpp/build.sh --cuda) is made on the GPU
# machine inside the call, from the bundle's trimmed sources (pack.sh), in the background
# from the start (nice'd: the steps keep their cores), sm_90 only, flash attention off;
# llamacpp waits for it. CHECK_LLAMA_WHY: why it cannot be built or run here.
if [ $DRY = 1 ]; then
    B=${GPU_CHECK_BUILD:-build} CHECK_DEVICE=cpu CHECK_THREADS=2
    CHECK_GEN_PROMPTS=2 CHECK_GEN_TOKENS=8 CHECK_SAN_TESTS=plan,forward_check CHECK_RACE_TESTS=plan_layout
    CHECK_BENCH_REPS=2 CHECK_BIG_NAME=tiny-f16 BIG_SHAPE="--shape 256,2,4,2,512,300 --ctx 600"
    CHECK_DEC_PROMPTS=1 CHECK_DEC_TOKENS=8 CHECK_DEC_CAL=1
    CHECK_SWEEP_PROMPTS=1 CHECK_SWEEP_TOKENS=8 CHECK_SWEEP_CAL=1 CHECK_GT_MULTS=0.5,1 CHECK_PAR_SWEEP=1-2
    CHECK_TUNE_REPS=2 CHECK_TUNE_TESTS=plan,forward_check
    # the wide pair's plumbing: the shipped target (its tokenizer) a little wider
    CHECK_WIDE_NAME=target-wide CHECK_WIDE_FFN=768 CHECK_WIDE_SRC=data/models/target.gguf CHECK_LLAMA_PROMPTS=1 CHECK_LLAMA_REPS=2
    : "${RESULTS:=out/gpu-check-dry}" "${CUDA_MODELS:=out/gpu-check-dry-models}" "${GPU_CHECK_DEADLINE:=1800}"
    CHECK_SANITIZER=""
else
    B=${GPU_CHECK_BUILD:-build-cuda} CHECK_DEVICE=cuda CHECK_THREADS=$(nproc)
    CHECK_GEN_PROMPTS=8 CHECK_GEN_TOKENS=48 CHECK_SAN_TESTS=logits_tiny,logits_arch,tree_equals_paths CHECK_RACE_TESTS=logits_tiny
    CHECK_BENCH_REPS=20 CHECK_BIG_NAME=llama-1b-f16 BIG_SHAPE=""
    CHECK_DEC_PROMPTS=8 CHECK_DEC_TOKENS=64 CHECK_DEC_CAL=8
    CHECK_SWEEP_PROMPTS=4 CHECK_SWEEP_TOKENS=64 CHECK_SWEEP_CAL=4 CHECK_GT_MULTS=0.5,1,2 CHECK_PAR_SWEEP=1-4
    CHECK_TUNE_REPS=15 CHECK_TUNE_TESTS=logits_tiny,logits_arch,tree_equals_paths
    # the large target widened to 1.002B parameters (2.0 GB of F16: data/models/large-wide.sh)
    CHECK_WIDE_NAME=large-wide-f16 CHECK_WIDE_FFN=53760 CHECK_WIDE_SRC=data/models/large-target.gguf
    CHECK_LLAMA_PROMPTS=3 CHECK_LLAMA_REPS=5
    : "${CUDA_MODELS:=out/gpu-check-models}" "${GPU_CHECK_DEADLINE:=480}"
    CHECK_SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer \
        /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1 || true)
    export SPECDEC_REQUIRE_GPU=1
fi
CHECK_SAN_MEM_S=$(( $(limit sanitize) * 6 / 10 )) CHECK_SAN_RACE_S=$(( $(limit sanitize) * 3 / 10 ))
CHECK_BIG_WAIT=$(( $(limit bench) - 45 )) CHECK_TEST_S=$(limit test) CHECK_WIDE_WAIT=$(( $(limit wide-decode) - 40 ))
# llamacpp keeps this much of its limit for its runs after waiting for the build
CHECK_LLAMA_RUN_S=$([ $DRY = 1 ] && echo 60 || echo 80)
# test_cuda's stdout line by line, so that a program cut at its limit keeps its lines
LINEBUF=$(command -v stdbuf >/dev/null 2>&1 && echo "stdbuf -oL" || true)
: "${LLAMA_BUILD_CUDA:=.cache/llama.cpp-build-cuda}"
SD=$B/specdec
[ -d "$B/lib" ] && export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LOG=${TMPDIR:-/tmp}/gpu-check.$$.log
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }
# what this call received against a lent machine's 64 MiB: the tree and the bundle
say "$(sh tests/bench/cuda-bundle.sh --room "${BUNDLE:-none}" | sed 's/^cuda-bundle: /gpu-check: /')"

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
# llama.cpp's CUDA programs: a build there already, or one to start now, or why not
LLAMA_BINS="llama-bench llama-completion llama-speculative llama-speculative-simple"
CHECK_LLAMA_WHY="" CHECK_LLAMA_BG=0 missing=""
for b in $LLAMA_BINS; do [ -x "$LLAMA_BUILD_CUDA/bin/$b" ] || missing="$missing $b"; done
case ,$STEPS, in *,llamacpp,*)
    if [ -z "$missing" ]; then :
    elif [ $DRY = 1 ]; then
        CHECK_LLAMA_WHY="dry run: no CUDA build of llama.cpp in $LLAMA_BUILD_CUDA, and the dry run builds none (the GPU check builds it from the bundle's sources, on the GPU machine's cores)"
    elif [ ! -f out/llama.cpp-src.tar.xz ] && [ ! -f .cache/llama.cpp-src/include/llama.h ] && [ ! -f .cache/llama.cpp/include/llama.h ]; then
        CHECK_LLAMA_WHY="no llama.cpp sources here: the bundle carries them (out/llama.cpp-src.tar.xz) when tests/bench/cuda-bundle.sh finds .cache/llama.cpp"
    elif ! why=$(sh tests/bench/llamacpp/build.sh --cuda --can-build 2>&1); then
        CHECK_LLAMA_WHY="llama.cpp cannot be built here: $why"
    fi ;;
esac
export CHECK_RESULTS="$RESULTS" CHECK_BUILD="$B" CHECK_DEVICE CHECK_THREADS CHECK_GEN_PROMPTS CHECK_GEN_TOKENS \
    CHECK_SAN_TESTS CHECK_RACE_TESTS CHECK_SANITIZER CHECK_SAN_MEM_S CHECK_SAN_RACE_S CHECK_BENCH_REPS CHECK_BIG_NAME \
    CUDA_MODELS CHECK_DEC_PROMPTS CHECK_DEC_TOKENS CHECK_DEC_CAL CHECK_SWEEP_PROMPTS CHECK_SWEEP_TOKENS CHECK_SWEEP_CAL \
    CHECK_GT_MULTS CHECK_PAR_SWEEP LLAMA_BUILD_CUDA CHECK_LLAMA_WHY CHECK_BIG_WAIT CHECK_TEST_S LINEBUF \
    CHECK_WIDE_NAME CHECK_WIDE_WAIT CHECK_LLAMA_PROMPTS CHECK_LLAMA_REPS CHECK_LLAMA_RUN_S \
    CHECK_TUNE_REPS CHECK_TUNE_TESTS

# Background jobs, started now so that the steps find their results: each in its own
# session (the end of the check stops it and its children if unfinished), writing
# $CUDA_MODELS/NAME.log and, when it ends, NAME.done or NAME.failed (the steps' wait_bg)
mkdir -p "$CUDA_MODELS"
BGPIDS="" SETSID=$(command -v setsid || true)
bg() { # NAME COMMAND...
    rm -f "$CUDA_MODELS/$1.done" "$CUDA_MODELS/$1.failed"
    M=$CUDA_MODELS/$1 $SETSID sh -c 'shift; if "$@" > "$M.log" 2>&1; then touch "$M.done"; else touch "$M.failed"; fi' \
        sh "$@" &
    BGPIDS="$BGPIDS $!"
}
# the 1B-class random model (bench; about 60 s of one core)
BIG=$CUDA_MODELS/$CHECK_BIG_NAME.gguf
rm -f "$BIG.done" "$BIG.failed"
case ,$STEPS, in *,bench,* | *,tune,*)
    if [ -s "$BIG" ] && [ -e "$BIG.ok" ]; then touch "$BIG.done"
    else
        bg "$CHECK_BIG_NAME.gguf" sh -c 'rm -f "$1.ok" && "$2" random-model --type f16 $3 --out "$1" && touch "$1.ok"' \
            sh "$BIG" "$SD" "$BIG_SHAPE"
    fi ;;
esac
# the widened large target (bench, the wide steps, llamacpp; 35 s on the build machine, most of it writing 2 GB)
case ,$STEPS, in *,bench,*|*,wide-*|*,llamacpp,*)
    bg "$CHECK_WIDE_NAME.gguf" env LARGE_WIDE="$CUDA_MODELS/$CHECK_WIDE_NAME.gguf" LARGE_WIDE_FFN=$CHECK_WIDE_FFN \
        LARGE_WIDE_SRC=$CHECK_WIDE_SRC sh data/models/large-wide.sh "$SD" ;;
esac
# llama.cpp's CUDA build on the cores the steps leave (nice 19), for llamacpp at the end
if [ -n "$missing" ] && [ -z "$CHECK_LLAMA_WHY" ] && case ,$STEPS, in *,llamacpp,*) true ;; *) false ;; esac; then
    bg llama-build nice -n 19 env JOBS="$(nproc)" LLAMA_BUILD="$LLAMA_BUILD_CUDA" sh tests/bench/llamacpp/build.sh --cuda
    CHECK_LLAMA_BG=1
    say "gpu-check: building llama.cpp's CUDA programs in the background ($LLAMA_BUILD_CUDA, log $CUDA_MODELS/llama-build.log)"
fi
export CHECK_LLAMA_BG CHECK_START=$START

{
    cat "$RESULTS/.header"
    echo "# gpu-check: $B on $DEVICE; steps $STEPS; results in $RESULTS/"
    for s in $(echo "$STEPS" | tr ',' ' '); do
        lim=$(limit "$s") left=$(( START + GPU_CHECK_DEADLINE - $(date +%s) ))
        if [ $left -lt 10 ]; then
            steps_run "$s" 5 sh -c 'echo "$1: skipped: $2 s left of the call'"'"'s $3 s (GPU_CHECK_DEADLINE)"; exit 77' sh "$s" $left "$GPU_CHECK_DEADLINE"
            continue
        fi
        [ "$lim" -le $left ] || lim=$left
        export CHECK_STEP_LIMIT=$lim
        steps_run "$s" "$lim" sh "$HERE" --step "$s"
        # the kernels the tune step chose run every later step (unless the caller set them)
        if [ "$s" = tune ] && [ -z "$USER_TUNE" ] && [ -s "$RESULTS/tune-choice" ]; then
            export SPECDEC_CUDA_TUNE="$(cat "$RESULTS/tune-choice")"
            echo "gpu-check: the later steps run SPECDEC_CUDA_TUNE=$SPECDEC_CUDA_TUNE (the tune step's choice)"
            echo "$SPECDEC_CUDA_TUNE (the tune step's choice)" > "$RESULTS/.tmp/kernels"
        fi
        # a call cut short keeps in $OUT what the steps so far measured
        [ -z "${OUT:-}" ] || { mkdir -p "$OUT" && cp "$RESULTS/steps.tsv" "$OUT/" && cp "$LOG" "$OUT/log.txt"; } || true
    done
    echo "$STEPS_BAD $STEPS_FAILED" > "$RESULTS/.tmp/tally"
} 2>&1 | tee -a "$LOG"
read -r STEPS_BAD STEPS_FAILED < "$RESULTS/.tmp/tally"
if [ -s "$RESULTS/.tmp/kernels" ]; then KERNELS=$(cat "$RESULTS/.tmp/kernels")
elif [ -n "$USER_TUNE" ]; then KERNELS="$USER_TUNE (set by the caller)"
else KERNELS="unset (the build's defaults)"; fi
for p in $BGPIDS; do kill -TERM "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
rm -rf "$RESULTS/.tmp" "$RESULTS/wide/.tmp"
rm -f "$CUDA_MODELS"/*.done "$CUDA_MODELS"/*.failed

n=$(echo "$STEPS" | tr ',' '\n' | wc -l)
{
    echo
    echo "# gpu-check summary: $DEVICE; driver $DRIVER; commit $(sed -n 's/^# commit: //p' "$RESULTS/.header")"
    echo "# kernels: SPECDEC_CUDA_TUNE=$KERNELS"
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
