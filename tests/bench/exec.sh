#!/bin/sh
# make bench-exec: what `specdec certify --exec` costs and catches.
#  1. the power table: for each planted bug of tests/exec/adapter.py (Python), the
#     cases needed on the old default pairs (dirichlet:6,1,2385, zipf:50,1.2,0.7,
#     bernoulli:0.3,0.6 at k = 2, 3), how many cases of the default plan (family.h)
#     reject it at 128000 cases, and the plan's case that needs the fewest cases with
#     that number (doubling from 1000; law and acceptance tests of the named scheme);
#  2. the default run (the plan, 2e5 cases a case) through each correct adapter, timed;
#  3. the protocol's throughput: cases/s through the C adapter against specdec's own
#     verifier in process (specdec mc, one thread), the overhead per case, and the
#     effect of the batch size (cases per flush).
# usage: exec.sh [BUILD]   (about eight minutes; timings move with the machine's load;
# EXEC_BENCH_PART=power|default|throughput runs one part)
BUILD=${1:-build}
S=$BUILD/specdec
A=$BUILD/tests/exec/adapter
PAIR=dirichlet:6,1,2385
K=3
PART=${EXEC_BENCH_PART:-all}
PY=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "import numpy" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "bench-exec: no python3 with numpy (sh install-deps.sh)" >&2; exit 1; }
P="$PY tests/exec/adapter.py"

# needed MAX ARGS...: the smallest n = 1000 * 2^i (up to MAX) at which certify FAILs
needed() {
    max=$1; shift
    n=1000
    while [ $n -le "$max" ]; do
        if "$S" certify --samples $n "$@" 2>/dev/null | grep -q "^== FAIL"; then
            echo $n; return; fi
        n=$((n * 2))
    done
    echo "> $max"
}

if [ "$PART" = all ] || [ "$PART" = power ]; then
OLD="--pair dirichlet:6,1,2385 --pair zipf:50,1.2,0.7 --pair bernoulli:0.3,0.6 -k 2,3"
echo "# 1. power: cases to reject at p < 1e-6 (Python adapters, law + acceptance of the scheme)"
printf '%-24s %-10s %10s %9s  %-36s %8s\n' "planted bug" "scheme" "old pairs" "plan" "fastest case of the plan" "cases"
for b in rrs-remove-first:rrs ratio-inverted:specinfer residual-unnormalised:specinfer \
         correction-from-target:specinfer kseq-low-gamma:kseq specinfer-last-round:specinfer \
         residual-draft-support:specinfer zero-target-accepted:specinfer rounds-capped:specinfer; do
    bug=${b%%:*}; s=${b#*:}
    old=$(needed 256000 --exec "$P $s --bug $bug" --scheme $s $OLD)
    # the plan's cases that reject it at 128000 (rows "PAIR V K ... FAIL")
    out=$("$S" certify --exec "$P $s --bug $bug" --scheme $s --samples 128000 2>/dev/null)
    rows=$(printf '%s\n' "$out" | awk '$NF == "FAIL" && $3 ~ /^[0-9]+$/ { print $1 ":" $3 }')
    total=$(printf '%s\n' "$out" | sed -n 's/^== .*: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) inconclusive, \([0-9]*\) too good.*/\1 \2 \3 \4/p' | awk '{ print $1 + $2 + $3 + $4 }')
    best=""; bestn=256000
    for r in $rows; do
        spec=${r%:*}; k=${r##*:}
        n=$(needed $((bestn / 2)) --exec "$P $s --bug $bug" --scheme $s --pair $spec -k $k)
        case $n in ">"*) ;; *) best="$spec k=$k"; bestn=$n ;; esac
    done
    nrows=$(echo $rows | wc -w)
    [ -n "$best" ] || { best="-"; bestn="> 128000"; }
    printf '%-24s %-10s %10s %4s of %2s  %-36s %8s\n' "$bug" "$s" "$old" "$nrows" "$total" "$best" "$bestn"
done
fi

if [ "$PART" = all ] || [ "$PART" = default ]; then
echo "# 2. the default run: the plan (family.h), 2e5 cases a case, through each correct adapter"
for s in sd specinfer rrs kseq; do
    t0=$(date +%s.%N)
    v=$("$S" certify --exec "$P $s" --scheme $s | grep "^==")
    awk -v s=$s -v v="$v" -v t0=$t0 -v t1=$(date +%s.%N) 'BEGIN { printf "python %-10s %6.1f s  %s\n", s, t1 - t0, v }'
done
for s in sd specinfer; do
    t0=$(date +%s.%N)
    v=$("$S" certify --exec "$A $s" --scheme $s | grep "^==")
    awk -v s=$s -v v="$v" -v t0=$t0 -v t1=$(date +%s.%N) 'BEGIN { printf "C      %-10s %6.1f s  %s\n", s, t1 - t0, v }'
done
fi

[ "$PART" = all ] || [ "$PART" = throughput ] || exit 0
echo "# 3. throughput, pair $PAIR, specinfer k = $K, 2e6 cases (1e5 below batch 256; median of 3)"
med() { sort -g | sed -n 2p; }
inproc=$(for i in 1 2 3; do "$S" mc --pair $PAIR --scheme specinfer -k $K --samples 1e7 --threads 1 --json | sed 's/.*"rate": \([0-9.e+]*\).*/\1/'; done | med)
awk -v r="$inproc" 'BEGIN { printf "in process (specdec mc, 1 thread)   %12.0f cases/s  %8.3f us/case\n", r, 1e6 / r }'
for B in 1 16 256 1024 8192; do
    n=2e6; [ $B -lt 256 ] && n=1e5 # a round trip per flush: small batches are slow
    r=$(for i in 1 2 3; do "$S" certify --exec "$A specinfer" --scheme specinfer --pair $PAIR -k $K --samples $n --batch $B | sed -n 's/^# [0-9]* cases in [0-9.]* s: \([0-9]*\) cases.*/\1/p'; done | med)
    awk -v b=$B -v r="$r" -v i="$inproc" 'BEGIN { printf "C adapter, batch %-5s               %12.0f cases/s  %8.3f us/case, overhead %.3f us/case\n", b, r, 1e6 / r, 1e6 / r - 1e6 / i }'
done
r=$("$S" certify --exec "$P specinfer" --scheme specinfer --pair $PAIR -k $K --samples 5e5 | sed -n 's/^# [0-9]* cases in [0-9.]* s: \([0-9]*\) cases.*/\1/p')
awk -v r="$r" 'BEGIN { printf "Python adapter, batch 1024          %12.0f cases/s  %8.3f us/case\n", r, 1e6 / r }'
