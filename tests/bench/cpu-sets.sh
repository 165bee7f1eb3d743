#!/bin/sh
# make bench-cpu-sets: every CPU kernel set this machine runs (SPECDEC_CPU=generic, avx2,
# avx512) beside llama.cpp built for AVX2 alone (tests/bench/llamacpp/build.sh --avx2;
# and llama.cpp built for this machine, when .cache/llama.cpp-build is there), side by
# side in one run, on the files issue 55 names: the large target widened to F16, the
# shipped target, a random 82M-parameter model (dim 768, 12 layers) in F16, Q8_0 and
# Q4_K_M. Per model and program: M_T(n) in ms for n = 1 2 4 ... 64 (one pass of n tokens
# after a 64-token prompt, the last token's logits: what llama-bench's pp n at depth 64
# times), generation tokens/s (64 single-token passes), M_T(4)/M_T(1), and the pass's
# roofline (its matrices read once at the read rate bench_model measures, or their FLOP
# at its FMA rate, whichever is longer). Each specdec figure is the best of ROUNDS runs
# of bench_model, the sets run in turn within each round (the machine's speed drifts:
# compare within one run); llama-bench's the average of its 5 repetitions, as it prints.
# Last, issue 55's goals for the AVX2 set against llama.cpp for AVX2, each met or missed.
# The random models are written once to DIR (about 800 MB; a minute).
# usage: tests/bench/cpu-sets.sh [BUILD_DIR]
#   env: CPUSETS_MODELS  (default: large-f16 target r82-f16 r82-q8_0 r82-q4_k_m r242-f16,
#                         the last a random 242M-parameter F16 model of 504 MB that
#                         streams from memory where the others sit in a large L3; also
#                         large-q4k, the large target's own Q4_K file)
#        CPUSETS_SETS    (default: every set this CPU runs)   CPUSETS_ROUNDS (3)
#        CPUSETS_THREADS (2)   CPUSETS_DIR (/tmp/specdec-cpu-sets)
#        LLAMA_OMP_WAIT  (llama.cpp's OpenMP waits: active, its default, unless set;
#                         passive puts a wake-up on each of its operations: on the
#                         shipped target, M_T(1) 8.2 ms against specdec's 0.74)
set -eu
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
B=$BUILD/tests/bench/bench_model
SD=$BUILD/specdec
[ -x "$B" ] && [ -x "$SD" ] || { echo "cpu-sets: $B or $SD is not built (make $B $SD)" >&2; exit 1; }
DIR=${CPUSETS_DIR:-/tmp/specdec-cpu-sets}
TH=${CPUSETS_THREADS:-2}
ROUNDS=${CPUSETS_ROUNDS:-3}
mkdir -p "$DIR"
sets=${CPUSETS_SETS:-$("$SD" generate --model data/models/target.gguf --prompt a --max-tokens 1 2>&1 >/dev/null |
    sed -n 's/.*CPU kernels [a-z0-9]* (this CPU: \([a-z0-9 ]*\)).*/\1/p')}
[ -n "$sets" ] || { echo "cpu-sets: cannot tell the kernel sets (specdec generate's report)" >&2; exit 1; }

# model NAME -> its file (written once)
model() {
    S82=768,12,12,4,2048,4096
    case $1 in
    target) echo data/models/target.gguf ;;
    large-q4k) echo data/models/large-target.gguf ;;
    large-f16) sh data/models/large-f16.sh "$SD" large-target ;;
    r82-f16 | r82-q8_0 | r82-q4_k_m | r242-f16)
        # r242: 504 MB, beyond a server's L3 of 260 MiB, where every file above sits in it
        shape=$S82
        [ "${1%%-*}" = r242 ] && shape=1024,16,16,4,4096,4096
        f=$DIR/$1.gguf
        [ -s "$f" ] || "$SD" random-model --shape $shape --type "${1#*-}" --out "$f" >&2 || return 1
        echo "$f" ;;
    *) echo "cpu-sets: unknown model $1" >&2; return 1 ;;
    esac
}

LB= # llama.cpp for AVX2 alone, and for this machine
for d in "${LLAMA_BUILD_AVX2:-}" .cache/llama.cpp-build-avx2; do
    if [ -n "$d" ] && [ -x "$d/bin/llama-bench" ]; then LB=$d/bin; break; fi
done
LN=
[ -x .cache/llama.cpp-build/bin/llama-bench ] && LN=.cache/llama.cpp-build/bin
# specdec's pool sleeps between loops; bench_model's OpenMP (its bandwidth and FMA
# figures) is kept from spinning beside it, as in bench-kquant
LLAMA_OMP_WAIT=${LLAMA_OMP_WAIT:-active}
export OMP_WAIT_POLICY=passive

# llama NAME BIN FILE: "M_T(1) .. M_T(64) gen" from llama-bench
llama() {
    OMP_WAIT_POLICY=$LLAMA_OMP_WAIT LD_LIBRARY_PATH="$2${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 1800 "$2/llama-bench" -m "$3" -t "$TH" \
        -p 1,2,4,8,16,32,64 -n 0 -d 64 -r 5 -o csv 2>/dev/null > "$DIR/lb.csv" || true
    OMP_WAIT_POLICY=$LLAMA_OMP_WAIT LD_LIBRARY_PATH="$2${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 900 "$2/llama-bench" -m "$3" -t "$TH" \
        -p 0 -n 64 -r 5 -o csv 2>/dev/null | tail -n +2 >> "$DIR/lb.csv" || true
    awk -F, -v name="$1" '{ gsub(/"/, "") }
        NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "avg_ts") c = i; if ($i == "n_prompt") p = i; if ($i == "n_gen") g = i }; next }
        $g > 0 { gen = $c; next }
        $p > 0 { mt[$p] = 1000 * $p / $c }
        END { printf "%-18s", name; for (n = 1; n <= 64; n *= 2) printf " %8.3f", mt[n]; printf " %9.1f %6.2f\n", gen, mt[4] / mt[1] }' "$DIR/lb.csv"
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $TH threads; specdec: best of $ROUNDS runs of bench_model, the sets in turn; llama.cpp: llama-bench -r 5 (OMP_WAIT_POLICY=$LLAMA_OMP_WAIT)"
for name in ${CPUSETS_MODELS:-large-f16 target r82-f16 r82-q8_0 r82-q4_k_m r242-f16}; do
    f=$(model "$name") || { echo "cpu-sets: $name: no file" >&2; continue; }
    r=0
    while [ $r -lt "$ROUNDS" ]; do
        for s in $sets; do
            SPECDEC_CPU=$s "$B" "$f" --threads "$TH" >> "$DIR/$name.$s.txt.new" 2>&1 ||
                { echo "cpu-sets: bench_model failed on $f under $s: $DIR/$name.$s.txt.new" >&2; exit 1; }
        done
        r=$((r + 1))
    done
    echo
    echo "## $name: $f ($(du -m "$f" | cut -f1) MB), M_T(n) ms for n = 1 2 4 8 16 32 64 (the last token's logits), generation t/s, M_T(4)/M_T(1)"
    printf "%-18s %8s %8s %8s %8s %8s %8s %8s %9s %6s\n" "" 1 2 4 8 16 32 64 "gen t/s" "4/1"
    for s in $sets; do
        mv "$DIR/$name.$s.txt.new" "$DIR/$name.$s.txt"
        awk -v name="specdec $s" '
            /M_T\(n\), ms, n = 1 2 4 \.\.\. 64 \(the last token/ { sub(/.*: /, ""); k = split($0, v, " ")
                for (i = 1; i <= k; i++) if (!(i in mt) || v[i] < mt[i]) mt[i] = v[i] }
            /roofline, ms, n = 1 2 4 \.\.\. 64/ { sub(/.*: /, ""); split($0, rl, " ") }
            /^[A-Z0-9_]+ +[0-9.]+ MB +[0-9.]+ +[0-9.]+/ { if ($5 > gen) gen = $5 }
            END { printf "%-18s", name; for (i = 1; i <= 7; i++) printf " %8.3f", mt[i]; printf " %9.1f %6.2f\n", gen, mt[3] / mt[1]
                  printf "%-18s", "roofline"; for (i = 1; i <= 7; i++) printf " %8.3f", rl[i]; printf "\n" }' \
            "$DIR/$name.$s.txt" > "$DIR/$name.$s.row"
        head -1 "$DIR/$name.$s.row"
    done
    rm -f "$DIR/$name.llama-avx2.row"
    [ -n "$LB" ] && llama "llama.cpp avx2" "$LB" "$f" | tee "$DIR/$name.llama-avx2.row"
    [ -n "$LN" ] && llama "llama.cpp native" "$LN" "$f"
    tail -n 1 "$DIR/$name.$(echo $sets | awk '{ print $NF }').row"
done
[ -n "$LB" ] || echo "(llama.cpp for AVX2 not built: sh tests/bench/llamacpp/build.sh --avx2 for its figures)"

# issue 55's goals for the AVX2 set against llama.cpp for AVX2 alone, from the rows above:
# M_T(n) no worse at every n, generation no lower, and M_T(4)/M_T(1) <= 1.2 where the
# passes are bound by their reads here: the roofline of 4 tokens within 1.2x of one's
# (else 4 tokens' products at the FMA rate outlast the reads, and no pass reaches 1.2)
# and M_T(1) within 2x of its roofline (a pass well above it is bound by its arithmetic)
case " $sets " in *" avx2 "*) ;; *) exit 0 ;; esac
[ -n "$LB" ] || exit 0
echo
echo "## goals: the AVX2 set against llama.cpp for AVX2 alone, this run"
for name in ${CPUSETS_MODELS:-large-f16 target r82-f16 r82-q8_0 r82-q4_k_m r242-f16}; do
    [ -s "$DIR/$name.avx2.row" ] && [ -s "$DIR/$name.llama-avx2.row" ] || continue
    cat "$DIR/$name.avx2.row" "$DIR/$name.llama-avx2.row" | awk -v name="$name" '
        NR == 1 { for (i = 1; i <= 7; i++) s[i] = $(i + 2); sg = $10; r41 = $11 }
        NR == 2 { for (i = 1; i <= 7; i++) rl[i] = $(i + 1) }
        NR == 3 { for (i = 1; i <= 7; i++) l[i] = $(i + 2); lg = $10 }
        END {
            if (!(l[1] > 0) || !(lg > 0)) { printf "%s: llama.cpp gave no figures\n", name; exit }
            worse = ""; worst = -1e9
            for (i = 1; i <= 7; i++) { d = 100 * (s[i] / l[i] - 1); if (d > 0) worse = worse " " 2 ^ (i - 1); if (d > worst) { worst = d; wn = 2 ^ (i - 1) } }
            printf "%s: M_T(n) %s (worst n = %d: %+.1f%% on llama.cpp'"'"'s)", name,
                (worse == "" ? "no worse at every n: met" : "worse at n =" worse ": missed"), wn, worst
            printf "; generation %.1f against %.1f t/s: %s", sg, lg, (sg >= lg ? "met" : "missed")
            b = s[1] / rl[1]; rr = rl[3] / rl[1]
            if (rr > 1.2) printf "; M_T(4)/M_T(1) %.2f, not read-bound at 4 tokens here (the roofline at 4 tokens %.2fx that at 1: the products outlast the reads)\n", r41, rr
            else if (b <= 2) printf "; M_T(4)/M_T(1) %.2f (M_T(1) %.2fx its roofline: read-bound): %s\n", r41, b, (r41 <= 1.2 ? "met" : "missed")
            else printf "; M_T(4)/M_T(1) %.2f, not read-bound here (M_T(1) %.2fx its roofline)\n", r41, b
        }'
done
