#!/bin/sh
# The CUDA decoder's kernel variants side by side, in one call on a GPU: for each
# variant (SPECDEC_CUDA_TUNE, src/model/cuda/cuda_host.h) test_cuda's logits against the
# CPU (tiny models, every architecture and weight type: a variant that is fast and wrong
# is marked so), then bench_cuda's M_T(n) for n = 1 .. 64 on MODEL (graphs, no prompt).
# The tests of every variant run first, then the timings (MODEL may still be being
# written: they wait up to TUNE_WAIT seconds for MODEL.done when MODEL.log exists).
# Writes DIR/tune.txt (every output), DIR/tune.tsv (a row a variant) and DIR/tune-choice
# (one SPECDEC_CUDA_TUNE value), and prints the table, per n the fastest variant whose
# logits held, and the choice that those give: mma the first n from which the tensor
# cores win at every larger n, rp likewise for two pairs a warp below it, wk the tensor
# cores' fastest at 64, pdl as most n have it; path=base when base wins most n or no
# fused variant held. Exit 1 when no variant's logits held or none was timed.
#
# usage: tests/bench/cuda-tune.sh BUILD MODEL DIR [VARIANT...]
#   BUILD    build folder with tests/test_cuda and tests/bench/bench_cuda (build-cuda)
#   MODEL    the model to time (the 1B-class F16 random model)
#   DIR      results folder
#   VARIANT  SPECDEC_CUDA_TUNE values (default: the sweep below)
#   env: TUNE_REPS (passes a point, default 15), TUNE_WAIT (default 120), TUNE_TESTS (test_cuda's tests, default
#        logits_tiny,logits_arch,tree_equals_paths), SPECDEC_DEVICE_ARG (--device cpu for the dry run: the
#        CPU decoder, the variants then all the same)
set -eu
[ $# -ge 3 ] || { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
B=$1 MODEL=$2 DIR=$3
shift 3
# the sweep: every key given, so that the choice reads each variant's kernels at each n
[ $# -gt 0 ] || set -- path=base \
    path=fused,mma=0,rp=65535,wk=4,pdl=0 path=fused,mma=0,rp=1,wk=4,pdl=0 \
    path=fused,mma=1,rp=65535,wk=4,pdl=0 path=fused,mma=1,rp=65535,wk=8,pdl=0 \
    path=fused,mma=0,rp=65535,wk=4,pdl=1 path=fused,mma=0,rp=1,wk=4,pdl=1 \
    path=fused,mma=1,rp=65535,wk=4,pdl=1 path=fused,mma=1,rp=65535,wk=8,pdl=1
mkdir -p "$DIR"
REPS=${TUNE_REPS:-15} TESTS=${TUNE_TESTS:-logits_tiny,logits_arch,tree_equals_paths}
[ -d "$B/lib" ] && export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
: > "$DIR/tune.txt"
rm -f "$DIR/tune-choice"
printf '# variant\tlogits\tworst_of_tol\tn1\tn2\tn4\tn8\tn16\tn32\tn64\tof_copy_n1\tratio16\n' > "$DIR/tune.tsv"
i=0
for v in "$@"; do # the tests first: they need no MODEL
    i=$((i + 1))
    trc=0
    SPECDEC_CUDA_TUNE=$v SPECDEC_CUDA_TESTS=$TESTS "$B/tests/test_cuda" > "$DIR/.tune-test-$i" 2>&1 || trc=$?
    echo $trc > "$DIR/.tune-rc-$i"
done
w=0
while [ -e "$MODEL.log" ] && [ ! -e "$MODEL.done" ] && [ ! -e "$MODEL.failed" ] && [ $w -lt "${TUNE_WAIT:-120}" ]; do
    sleep 1; w=$((w + 1))
done
[ $w = 0 ] || echo "tune: waited $w s for $MODEL"
i=0
for v in "$@"; do
    i=$((i + 1))
    echo "## variant $v" >> "$DIR/tune.txt"
    trc=$(cat "$DIR/.tune-rc-$i")
    cat "$DIR/.tune-test-$i" >> "$DIR/tune.txt"
    worst=$(sh tests/gpu-check.sh --headline test "$DIR/.tune-test-$i" | sed -n 's/.*logits: worst \([0-9.]*\) of the tolerance.*/\1/p')
    brc=0
    SPECDEC_CUDA_TUNE=$v "$B/tests/bench/bench_cuda" ${SPECDEC_DEVICE_ARG:-} --reps "$REPS" --graphs-only --no-prompt \
        "$MODEL" > "$DIR/.tune-bench" 2>&1 || brc=$?
    cat "$DIR/.tune-bench" >> "$DIR/tune.txt"
    awk -v v="$v" -v ok="$([ "$trc" = 0 ] && echo ok || echo FAILED)" -v worst="${worst:--}" '
        /^[0-9]+ / && NF == 7 { ms[$1] = $2; if ($1 == 1) pc = $5; if ($1 == 16) r16 = $3 }
        END { printf "%s\t%s\t%s", v, ok, worst
              for (n = 1; n <= 64; n *= 2) printf "\t%s", (n in ms) ? ms[n] : "-"
              printf "\t%s\t%s\n", pc == "" ? "-" : pc, r16 == "" ? "-" : r16 }' "$DIR/.tune-bench" >> "$DIR/tune.tsv"
    [ $brc = 0 ] || echo "tune: $v: bench_cuda failed (exit $brc): $(tail -1 "$DIR/.tune-bench")"
    rm -f "$DIR/.tune-test-$i" "$DIR/.tune-rc-$i"
done
rm -f "$DIR/.tune-bench"
column -t -s "$(printf '\t')" "$DIR/tune.tsv" 2>/dev/null || cat "$DIR/tune.tsv"
# per n the fastest variant whose logits held, and the choice they give
awk -F'\t' '
    function key(v, k,   a, i, n) { n = split(v, a, ","); for (i = 1; i <= n; i++) if (index(a[i], k "=") == 1) return substr(a[i], length(k) + 2); return "" }
    function tc(v, n) { return key(v, "path") != "base" && key(v, "mma") + 0 > 0 && n >= key(v, "mma") + 0 }
    function rp2(v, n) { return key(v, "path") != "base" && n >= key(v, "rp") + 0 }
    !/^#/ && $2 == "ok" { for (i = 4; i <= 10; i++) if ($i != "-" && (best[i] == "" || $i + 0 < best[i] + 0)) { best[i] = $i; who[i] = $1 } }
    END {
        n = 1; line = "tune: fastest with correct logits:"; k = 0
        for (i = 4; i <= 10; i++) { nn[i] = n; line = line sprintf(" n=%d %s (%s ms);", n, who[i] == "" ? "none" : who[i], best[i] == "" ? "-" : best[i]); if (who[i] != "") k++; n *= 2 }
        print line
        if (!k) { print "tune: no variant both held its logits and was timed"; exit 1 }
        nb = 0; np = 0
        for (i = 4; i <= 10; i++) { if (key(who[i], "path") == "base") nb++; if (key(who[i], "pdl") == "1") np++ }
        if (nb * 2 > k) choice = "path=base"
        else {
            mma = 0; for (i = 10; i >= 4 && who[i] != "" && tc(who[i], nn[i]); i--) mma = nn[i]
            top = mma ? 0 : 11; for (i = 4; i <= 10; i++) if (nn[i] == mma) top = i
            rp = 65535; for (i = top - 1; i >= 4 && who[i] != "" && rp2(who[i], nn[i]); i--) rp = nn[i]
            wk = mma && key(who[10], "wk") != "" ? key(who[10], "wk") : 4
            choice = sprintf("path=fused,mma=%d,rp=%d,wk=%d,pdl=%d", mma, rp, wk, np * 2 > k ? 1 : 0)
        }
        print "tune: choice: " choice
        print choice > (dir "/tune-choice")
    }' dir="$DIR" "$DIR/tune.tsv"
