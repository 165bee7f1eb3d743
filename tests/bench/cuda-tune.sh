#!/bin/sh
# The CUDA decoder's kernel variants side by side, in one call on a GPU: for each
# variant (SPECDEC_CUDA_TUNE, src/model/cuda/cuda_host.h) test_cuda's logits against the
# CPU (tiny models, every architecture and weight type: a variant that is fast and wrong
# is marked so), then bench_cuda's M_T(n) for n = 1 .. 64 on MODEL (graphs, no prompt).
# Writes DIR/tune.txt (every output) and DIR/tune.tsv (a row a variant), and prints the
# table and, per n, the fastest variant whose logits held, then the defaults that those
# choices give (mma = the first n from which the tensor cores win, rp, wk).
#
# usage: tests/bench/cuda-tune.sh BUILD MODEL DIR [VARIANT...]
#   BUILD    build folder with tests/test_cuda and tests/bench/bench_cuda (build-cuda)
#   MODEL    the model to time (the 1B-class F16 random model)
#   DIR      results folder
#   VARIANT  SPECDEC_CUDA_TUNE values (default: the sweep below)
#   env: TUNE_REPS (passes a point, default 15), TUNE_TESTS (test_cuda's tests, default
#        logits_tiny,logits_arch,tree_equals_paths), SPECDEC_DEVICE_ARG (--device cpu for the dry run: the
#        CPU decoder, the variants then all the same)
set -eu
[ $# -ge 3 ] || { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
B=$1 MODEL=$2 DIR=$3
shift 3
[ $# -gt 0 ] || set -- path=base \
    "path=fused,mma=0,rp=65535" "path=fused,mma=0,rp=1" \
    "path=fused,mma=1,wk=4" "path=fused,mma=1,wk=8"
mkdir -p "$DIR"
REPS=${TUNE_REPS:-15} TESTS=${TUNE_TESTS:-logits_tiny,logits_arch,tree_equals_paths}
[ -d "$B/lib" ] && export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
: > "$DIR/tune.txt"
printf '# variant\tlogits\tworst_of_tol\tn1\tn2\tn4\tn8\tn16\tn32\tn64\tof_copy_n1\tratio16\n' > "$DIR/tune.tsv"
for v in "$@"; do
    echo "## variant $v" >> "$DIR/tune.txt"
    trc=0
    SPECDEC_CUDA_TUNE=$v SPECDEC_CUDA_TESTS=$TESTS "$B/tests/test_cuda" > "$DIR/.tune-test" 2>&1 || trc=$?
    cat "$DIR/.tune-test" >> "$DIR/tune.txt"
    worst=$(sh tests/gpu-check.sh --headline test "$DIR/.tune-test" | sed -n 's/.*logits: worst \([0-9.]*\) of the tolerance.*/\1/p')
    brc=0
    SPECDEC_CUDA_TUNE=$v "$B/tests/bench/bench_cuda" ${SPECDEC_DEVICE_ARG:-} --reps "$REPS" --graphs-only --no-prompt \
        "$MODEL" > "$DIR/.tune-bench" 2>&1 || brc=$?
    cat "$DIR/.tune-bench" >> "$DIR/tune.txt"
    awk -v v="$v" -v ok="$([ $trc = 0 ] && echo ok || echo FAILED)" -v worst="${worst:--}" -v brc=$brc '
        /^[0-9]+ / && NF == 7 { ms[$1] = $2; if ($1 == 1) pc = $5; if ($1 == 16) r16 = $3 }
        END { printf "%s\t%s\t%s", v, ok, worst
              for (n = 1; n <= 64; n *= 2) printf "\t%s", (n in ms) ? ms[n] : "-"
              printf "\t%s\t%s\n", pc == "" ? "-" : pc, r16 == "" ? "-" : r16 }' "$DIR/.tune-bench" >> "$DIR/tune.tsv"
    [ $brc = 0 ] || echo "tune: $v: bench_cuda failed (exit $brc): $(tail -1 "$DIR/.tune-bench")"
done
rm -f "$DIR/.tune-test" "$DIR/.tune-bench"
column -t -s "$(printf '\t')" "$DIR/tune.tsv" 2>/dev/null || cat "$DIR/tune.tsv"
# per n the fastest variant whose logits held
awk -F'\t' '!/^#/ && $2 == "ok" { for (i = 4; i <= 10; i++) if ($i != "-" && (best[i] == "" || $i + 0 < best[i] + 0)) { best[i] = $i; who[i] = $1 } }
    END { n = 1; line = "tune: fastest with correct logits:"
          for (i = 4; i <= 10; i++) { line = line sprintf(" n=%d %s (%s ms);", n, who[i] == "" ? "none" : who[i], best[i] == "" ? "-" : best[i]); n *= 2 }
          print line }' "$DIR/tune.tsv"
