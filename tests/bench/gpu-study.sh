#!/bin/sh
# make bench-e2e-cuda: the end-to-end study of `specdec decode` on an NVIDIA GPU
# in one command. Each step runs under its own time limit; a step that fails or runs out
# of time is recorded in steps.tsv and the next one runs, so what was measured is kept.
#   decode    decode --scheme all at temperature 1 (every scheme against its prediction)
#   check     greedy identity of every scheme, the parallel drafter's included (--check)
#   gt        the GT threshold sweep at temperatures 0, 0.7 and 1
#   parallel  the parallel drafter against the sequential one, L = 1..8 (--parallel-sweep)
#   predict   bench-predict with fewer runs (tests/bench/predict.sh, PREDICT_RUNS)
#   whatif    the shipped pair's acceptance under the costs of a 1B-class random target
#             on the same device: M_T(n) of `specdec random-model --type f16` measured by
#             decode's cost ladder, M_D(1) of the shipped draft measured beside it; the
#             predicted speedup of every scheme and of the best trees (specdec tree)
#   llamacpp  llama.cpp's plain generation and speculative programs on the same pair and
#             prompts, fully offloaded (skipped with a note when llama.cpp's CUDA build is
#             absent: tests/bench/llamacpp/build.sh --cuda)
# Every TSV starts with a header: device, driver, commit, command, date. Results go to
# out/gpu-study/ (--record: paper-figs/gpu/, which make figs draws).
#
# usage: tests/bench/gpu-study.sh [--dry-run] [--record] [--results DIR] [--steps LIST]
#   --dry-run     the CPU build (build/), --device cpu, tiny sizes (1 prompt x 8 tokens,
#                 short sweeps, tiny random models) into out/gpu-study-dry/: checks the
#                 plumbing of every step without a GPU
#   --steps LIST  comma-separated steps (default: all, in the order above)
#   env: STUDY_BUILD (build-cuda; build with --dry-run), E2E_PROMPTS (20), E2E_TOKENS (64),
#        E2E_THREADS (the machine's cores), PREDICT_RUNS (3), CUDA_MODELS (out/cuda: the
#        1B model, shared with make bench-cuda), LLAMA_BUILD_CUDA (.cache/llama.cpp-build-cuda)
# Each step runs under its own time limit (tests/bench/steps.sh), recorded in steps.tsv
# with its status: ok, skipped (llamacpp without its build: not ok), timed out, failed.
# Exit status: 0 every step ok, 1 a step failed or timed out (the others' results kept)
# or no GPU, 2 usage error, 3 none failed but one was skipped.
set -eu
cd "$(dirname "$0")/../.."
HERE=tests/bench/gpu-study.sh

if [ "${1:-}" = --step ]; then
    # one step, run by the driver below under `timeout` (everything it needs is in the env)
    STEP=$2
    BUILD=$STUDY_BUILD
    E2E_OUT=$STUDY_RESULTS/.tmp
    . tests/bench/e2e-env.sh
    R=$STUDY_RESULTS
    T=$R/.tmp
    mkdir -p "$T"
    PAIR="--target $TM --draft $DM --n-prompts $N --max-tokens $TOK --threads $TH $DEV $STUDY_DECODE_ARGS"
    hdr() { cat "$R/.header"; }
    case $STEP in
    decode)
        "$SD" decode $PAIR --scheme all --tsv "$T/decode.tsv" --quiet > "$R/decode.txt"
        { hdr; cat "$T/decode.tsv"; } > "$R/e2e-predicted.tsv"
        ;;
    check)
        # the list of e2e.sh's step 2 (spectr-otm is not among --scheme all's greedy ones), and
        # the parallel drafter's two schemes
        "$SD" decode --target $TM --draft $DM --n-prompts "$N" --max-tokens "$STUDY_CHECK_TOKENS" \
            --threads "$TH" $DEV $STUDY_DECODE_ARGS --quiet --tsv "$T/check.tsv" \
            --scheme sd,spectr,mcsd,mcsd-wor,rsd-c,rsd-s,gt,gt-dynamic,throughput,parallel,parallel-tree \
            --check > "$R/check.txt"
        { hdr; cat "$T/check.tsv"; } > "$R/check.tsv"
        grep '^check:' "$R/check.txt"
        ;;
    gt)
        rm -f "$T/gt.part" "$T/gt.notes"
        for temp in $STUDY_GT_TEMPS; do
            "$SD" decode $PAIR --gt-sweep "$STUDY_GT_MULTS" --temperature "$temp" --tsv "$T/gt-$temp.tsv" \
                --quiet > "$R/gt-$temp.txt"
            grep '^#' "$T/gt-$temp.tsv" | sed "s/^# /# T=$temp: /" >> "$T/gt.notes"
            grep -v '^#' "$T/gt-$temp.tsv" >> "$T/gt.part"
            # rewritten after each temperature: a later one running out of time keeps these
            { hdr; cat "$T/gt.notes"
              echo "# GT sweep: scheme shape threshold_mult temperature nodes tok_s pred_tok_s speedup pred_speedup block_eff pred_block_eff mean_accepted"
              cat "$T/gt.part"; } > "$R/e2e-gt-sweep.tsv"
            echo "gt: temperature $temp done"
        done
        ;;
    parallel)
        "$SD" decode $PAIR --parallel-draft "$PM" --parallel-sweep "$STUDY_PAR_SWEEP" --temperature 1 \
            --tsv "$T/par.tsv" --quiet > "$R/parallel.txt"
        { hdr; cat "$T/par.tsv"; } > "$R/e2e-parallel.tsv"
        "$SD" decode $PAIR --parallel-draft "$PM" --parallel-sweep "$STUDY_PAR_SWEEP" --temperature 0 \
            --tsv "$T/par0.tsv" --quiet > "$R/parallel-t0.txt"
        { hdr; cat "$T/par0.tsv"; } > "$R/parallel-t0.tsv"
        grep -i 'wins\|ratio' "$R/parallel.txt" | head -12 || true
        ;;
    predict)
        E2E_OUT=$T PREDICT_ARGS="$STUDY_DECODE_ARGS" sh tests/bench/predict.sh "$BUILD" > "$R/predict.txt"
        { hdr; cat "$T/predict-runs.tsv"; } > "$R/predict-runs.tsv"
        sed -n '/^scheme/,/^all:/p' "$R/predict.txt"
        ;;
    whatif)
        mkdir -p "$CUDA_MODELS"
        big=$CUDA_MODELS/$STUDY_BIG_NAME.gguf small=$CUDA_MODELS/$STUDY_BIG_NAME-draft.gguf
        [ -s "$big" ] || "$SD" random-model --type f16 $STUDY_BIG_SHAPE --out "$big"
        # a random draft of the shipped draft's size over the big model's vocabulary: decode
        # wants a pair with one tokenizer; only the big target's costs are used
        [ -s "$small" ] || "$SD" random-model --type f32 --shape "$STUDY_BIG_DRAFT_SHAPE" --out "$small"
        "$SD" decode --target "$big" --draft "$small" --n-prompts 1 --max-tokens 8 --threads "$TH" $DEV \
            $STUDY_DECODE_ARGS --scheme sd --tsv "$T/big.tsv" --quiet > "$R/whatif-costs-big.txt"
        "$SD" decode --target $TM --draft $DM --n-prompts 1 --max-tokens 8 --threads "$TH" $DEV \
            $STUDY_DECODE_ARGS --scheme sd --tsv "$T/ship.tsv" --quiet > "$R/whatif-costs-ship.txt"
        # M_T(1) and M_D(1) in ms from decode's "# costs (ms):" line; M_T(n)/M_T(1) from its TSV
        cost() { awk -v k="$2" '/^# costs \(ms\):/ { for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "$1"; }
        MT1_BIG=$(cost "$R/whatif-costs-big.txt" "M_T(1)") MD1_SHIP=$(cost "$R/whatif-costs-ship.txt" "M_D(1)")
        CURVE=$(awk '/^# cost-target / { print $3; exit }' "$T/big.tsv")
        [ -n "$CURVE" ] && [ -n "$MT1_BIG" ] && [ -n "$MD1_SHIP" ] || {
            echo "whatif: no costs in decode's output ($R/whatif-costs-big.txt, whatif-costs-ship.txt)" >&2; exit 1; }
        C=$(awk -v d="$MD1_SHIP" -v b="$MT1_BIG" 'BEGIN { printf "%.6g", d / b }')
        LM="gguf:$DM,$TM"
        {   hdr
            echo "# what-if: the shipped pair's acceptance (specdec tree --lm $LM, $STUDY_TREE_SAMPLES blocks a tree)"
            echo "# with the cost curve of $big ($STUDY_BIG_NAME) measured on this device: M_T(1) $MT1_BIG ms,"
            echo "# M_T(n)/M_T(1) $CURVE; the shipped draft's M_D(1) $MD1_SHIP ms, c = M_D(1)/M_T(1) = $C"
            echo "# small_*: the shipped pair's own speedup (measured, predicted) from e2e-predicted.tsv, - when absent"
            printf 'scheme\ttree\tshape\tnodes\tblock_eff\twhatif_speedup\tsmall_speedup\tsmall_pred_speedup\n'
        } > "$R/whatif.tsv"
        for spec in "sd sd chain:4" "spectr kseq spectr:2,3" "mcsd specinfer kconfig:2,1,1" \
                    "mcsd-wor rrs kconfig:2,1,1" "rsd-c rrs kconfig:3,1" "rsd-s rrs beam:2,3" \
                    "gt-dynamic rrs dynamic:$C,16,6,4" "gt rrs gt" "throughput rrs throughput"; do
            set -- $spec
            if [ "$3" = gt ] || [ "$3" = throughput ]; then shape="--optimize $3"; else shape="--shape $3"; fi
            "$SD" tree --lm "$LM" --scheme "$2" $shape --samples "$STUDY_TREE_SAMPLES" --no-exact \
                --cost-draft "$C" --cost-target "$CURVE" --threads "$TH" $DEV > "$T/tree.txt" 2>&1 || {
                # e.g. GT at c >= 1: no node pays; the row says so, the reason goes to whatif.err
                echo "whatif: $1: $(tail -1 "$T/tree.txt")" >&2
                printf '%s\tnone\t-\t-\t-\t-\t-\t-\n' "$1" >> "$R/whatif.tsv"
                continue; }
            # the tree's sections: "== LABEL: K draft nodes...", its shape, block efficiency, speedup
            pf=/dev/null
            [ -s "$R/e2e-predicted.tsv" ] && pf=$R/e2e-predicted.tsv
            awk -F'\t' -v s="$1" -v pf="$pf" 'FILENAME == pf { if ($1 == s) { m = $8; p = $9 } next }
                 /^== / && /draft nodes/ { lab = $0; sub(/^== /, "", lab); sub(/:.*/, "", lab); nodes = $3; getline; shape = $1 }
                 /block efficiency/ { be = $3 }
                 /speedup/ { for (i = 1; i <= NF; i++) if ($i == "speedup") sp = $(i + 1)
                             printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s, lab, shape, nodes, be, sp,
                                    m == "" ? "-" : m, p == "" ? "-" : p }' \
                "$pf" FS=' ' "$T/tree.txt" \
                >> "$R/whatif.tsv"
        done
        if command -v column >/dev/null 2>&1; then grep -v '^#' "$R/whatif.tsv" | column -t -s "$(printf '\t')"
        else grep -v '^#' "$R/whatif.tsv"; fi
        ;;
    llamacpp)
        LB=$LLAMA_BUILD_CUDA/bin
        for b in llama-completion llama-speculative-simple llama-speculative; do
            [ -x "$LB/$b" ] || { echo "llamacpp: skipped: $LB/$b is not built (tests/bench/llamacpp/build.sh --cuda)"; exit 77; }
        done
        NGL=""
        [ -n "$DEV" ] && NGL="-ngl 99"
        head -n "$N" data/prompts.txt > "$T/prompts.txt"
        {   hdr
            echo "# llama.cpp ($LB) on $TM / $DM, prompts 1-$N of data/prompts.txt, $TOK tokens, temperature 1, draft 4${NGL:+, all layers on the GPU}"
            printf 'program\tprompt\ttokens\tseconds\n'
        } > "$R/llamacpp.tsv"
        i=0
        while IFS= read -r p; do
            i=$((i + 1))
            "$LB/llama-completion" -m $TM -p "$p" -n "$TOK" -t "$TH" $NGL --temp 1 -s $i -c 256 -no-cnv \
                > "$T/ll.txt" 2>&1 < /dev/null || true
            grep ' eval time =' "$T/ll.txt" | grep -v 'prompt eval' |
                sed -n 's/.* eval time = *\([0-9.]*\) ms \/ *\([0-9]*\) runs.*/\2 \1/p' |
                awk -v i=$i '{ n = $1; s = $2 / 1000 } END { printf "completion\t%d\t%d\t%.6f\n", i, n, s }' >> "$R/llamacpp.tsv"
            "$LB/llama-speculative-simple" -m $TM -md $DM --spec-type draft-simple --spec-draft-n-max 4 $NGL \
                ${NGL:+-ngld 99} -p "$p" -n "$TOK" -t "$TH" -td "$TH" --temp 1 -s $i -c 256 > "$T/ll.txt" 2>&1 < /dev/null || true
            awk -v i=$i '/decoded/ { for (k = 1; k <= NF; k++) { if ($k == "decoded") n = $(k + 1); if ($k == "in") s = $(k + 1) } }
                 END { printf "speculative-simple\t%d\t%d\t%.6f\n", i, n, s }' "$T/ll.txt" >> "$R/llamacpp.tsv"
            "$LB/llama-speculative" -m $TM -md $DM --spec-draft-n-max 4 -np 1 $NGL ${NGL:+-ngld 99} \
                -p "$p" -n "$TOK" -t "$TH" -td "$TH" --temp 1 -s $i -c 256 > "$T/ll.txt" 2>&1 < /dev/null || true
            awk -v i=$i '/decoded/ { for (k = 1; k <= NF; k++) { if ($k == "decoded") n = $(k + 1); if ($k == "in") s = $(k + 1) } }
                 END { printf "speculative\t%d\t%d\t%.6f\n", i, n, s }' "$T/ll.txt" >> "$R/llamacpp.tsv"
        done < "$T/prompts.txt"
        awk -F'\t' '!/^#/ && $1 != "program" && $4 > 0 { n[$1] += $3; s[$1] += $4 }
             END { for (k in n) printf "llama.cpp %-20s %8.1f tokens/s\n", k, n[k] / s[k] }' "$R/llamacpp.tsv"
        # the study's goals (specdec best >= 1.3x llama.cpp best, SD/AR >= llama.cpp's), when the decode step left specdec's rates
        [ -s "$R/e2e-predicted.tsv" ] && awk -F'\t' '
            f != 2 && !/^#/ && $1 != "program" && $4 > 0 { n[$1] += $3; s[$1] += $4; next }
            f == 2 && !/^#/ { r[$1] = $6; if ($1 != "ar" && $6 > best) { best = $6; bn = $1 } }
            END {
                if (!("completion" in n) || !(r["ar"] > 0)) exit
                lar = n["completion"] / s["completion"]; lb = 0
                for (k in n) if (k != "completion" && n[k] / s[k] > lb) lb = n[k] / s[k]
                if (!(lb > 0)) exit
                printf "specdec best %s %.1f t/s, llama.cpp best speculative %.1f t/s: %.2fx (goal >= 1.3)\n", bn, best, lb, best / lb
                printf "SD/AR: specdec %.3f, llama.cpp best speculative/AR %.3f (goal: specdec >= llama.cpp)\n", r["sd"] / r["ar"], lb / lar
            }' "$R/llamacpp.tsv" f=2 "$R/e2e-predicted.tsv" | tee "$R/llamacpp-goals.txt" || true
        ;;
    *) echo "gpu-study: unknown step '$STEP'" >&2; exit 2 ;;
    esac
    exit 0
fi

# ---- the driver ----
DRY=0 RESULTS="" STEPS="decode,check,gt,parallel,predict,whatif,llamacpp"
CMDLINE="sh $HERE $*"
while [ $# -gt 0 ]; do
    case $1 in
    --dry-run) DRY=1 ;;
    --record) RESULTS=paper-figs/gpu ;;
    --results) RESULTS=${2:?--results needs a folder}; shift ;;
    --steps) STEPS=${2:?--steps needs a list}; shift ;;
    -h|--help) sed -n '2,/^# or no GPU, 2 usage error/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-study: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for s in $(echo "$STEPS" | tr ',' ' '); do
    case $s in decode|check|gt|parallel|predict|whatif|llamacpp) ;;
    *) echo "gpu-study: unknown step '$s' in --steps (decode, check, gt, parallel, predict, whatif, llamacpp)" >&2; exit 2 ;;
    esac
done
if [ $DRY = 1 ]; then
    : "${STUDY_BUILD:=build}" "${E2E_PROMPTS:=1}" "${E2E_TOKENS:=8}" "${E2E_THREADS:=2}" "${PREDICT_RUNS:=1}"
    : "${RESULTS:=out/gpu-study-dry}" "${CUDA_MODELS:=out/gpu-study-dry/models}"
    E2E_DEVICE=cpu STUDY_DECODE_ARGS="--calibrate 1" STUDY_CHECK_TOKENS=8
    STUDY_GT_TEMPS="0 1" STUDY_GT_MULTS="0.5,1" STUDY_PAR_SWEEP=1-2 STUDY_TREE_SAMPLES=20
    # a tiny target and draft: the what-if's plumbing, not a 1B model on a CPU
    STUDY_BIG_NAME=tiny STUDY_BIG_SHAPE="--shape 256,4,8,4,768,300" STUDY_BIG_DRAFT_SHAPE=32,1,2,1,64,300
    LIMIT_SCALE=1
else
    : "${STUDY_BUILD:=build-cuda}" "${E2E_PROMPTS:=20}" "${E2E_TOKENS:=64}" "${E2E_THREADS:=$(nproc)}" "${PREDICT_RUNS:=3}"
    : "${RESULTS:=out/gpu-study}" "${CUDA_MODELS:=out/cuda}"
    E2E_DEVICE=cuda STUDY_DECODE_ARGS="" STUDY_CHECK_TOKENS=32
    STUDY_GT_TEMPS="0 0.7 1" STUDY_GT_MULTS="0.25,0.5,1,2,4" STUDY_PAR_SWEEP=1-8 STUDY_TREE_SAMPLES=300
    # the 1B-class model of make bench-cuda (2.2 GB in F16) and a random draft of the
    # shipped draft's shape (dim 128, 2 layers, 4/2 heads, SwiGLU 320) over its 32000 tokens
    STUDY_BIG_NAME=llama-1b-f16 STUDY_BIG_SHAPE="" STUDY_BIG_DRAFT_SHAPE=128,2,4,2,320,32000
    LIMIT_SCALE=1
fi
: "${LLAMA_BUILD_CUDA:=.cache/llama.cpp-build-cuda}"
SD=$STUDY_BUILD/specdec
[ -d "$STUDY_BUILD/lib" ] && export LD_LIBRARY_PATH="$STUDY_BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ ! -x "$SD" ]; then
    echo "gpu-study: $SD is not built ($([ $DRY = 1 ] && echo make || echo 'make cuda, or sh tests/bench/cuda-bundle.sh and carry build-cuda/'))" >&2
    exit 1
fi

# the device, or a clear refusal before anything is measured
if [ $DRY = 1 ]; then
    DEVICE="cpu (dry run): $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) cores"
    DRIVER="-"
else
    why=""
    if ! command -v nvidia-smi >/dev/null 2>&1; then why="nvidia-smi not found"
    elif ! nvidia-smi -L >/dev/null 2>&1; then why="nvidia-smi sees no device"
    elif ! "$SD" generate --model data/models/target.gguf --prompt probe --max-tokens 1 --device cuda --ids \
            --threads 1 >/dev/null 2>"${TMPDIR:-/tmp}/gpu-study-probe.$$"; then
        why="$SD generate --device cuda: $(head -1 "${TMPDIR:-/tmp}/gpu-study-probe.$$")"
    fi
    rm -f "${TMPDIR:-/tmp}/gpu-study-probe.$$"
    if [ -n "$why" ]; then
        echo "gpu-study: needs an NVIDIA GPU ($why); nothing measured." >&2
        echo "gpu-study: --dry-run runs every step on the CPU build with tiny sizes." >&2
        exit 1
    fi
    DEVICE=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)
    DRIVER="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1), $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/CUDA \1/p')"
fi

STEPS_DEVICE=$DEVICE STEPS_DRIVER=$DRIVER
STEPS_COMMAND="$CMDLINE (E2E_PROMPTS=$E2E_PROMPTS E2E_TOKENS=$E2E_TOKENS E2E_THREADS=$E2E_THREADS E2E_DEVICE=$E2E_DEVICE)"
. tests/bench/steps.sh
steps_begin "$RESULTS"
export STUDY_BUILD STUDY_RESULTS="$RESULTS" E2E_PROMPTS E2E_TOKENS E2E_THREADS E2E_DEVICE PREDICT_RUNS CUDA_MODELS \
    LLAMA_BUILD_CUDA STUDY_DECODE_ARGS STUDY_CHECK_TOKENS STUDY_GT_TEMPS STUDY_GT_MULTS STUDY_PAR_SWEEP \
    STUDY_TREE_SAMPLES STUDY_BIG_NAME STUDY_BIG_SHAPE STUDY_BIG_DRAFT_SHAPE
echo "# gpu-study: $DEVICE; $E2E_PROMPTS prompts x $E2E_TOKENS tokens, $E2E_THREADS threads; results in $RESULTS/"

# time limits (s) of each step on the GPU: about 3x the expected time, and together
# about 20 minutes of the expected device time (SCALE.md: the GPU section)
limit() {
    case $1 in
    decode) echo 240 ;; check) echo 180 ;; gt) echo 420 ;; parallel) echo 300 ;;
    predict) echo 480 ;; whatif) echo 300 ;; llamacpp) echo 240 ;;
    esac
}
for s in $(echo "$STEPS" | tr ',' ' '); do
    steps_run "$s" $(( $(limit "$s") * LIMIT_SCALE )) sh "$HERE" --step "$s"
done
rm -rf "$RESULTS/.tmp"
echo
echo "# gpu-study: steps:"
steps_table "$RESULTS" "$(echo "$STEPS" | tr ',' '\n' | wc -l)"
echo "# results: $(cd "$RESULTS" && ls | tr '\n' ' ')"
[ $STEPS_FAILED = 0 ] || exit 1
[ $STEPS_BAD = 0 ] || exit 3
exit 0
