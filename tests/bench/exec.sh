#!/bin/sh
# make bench-exec: what `specdec certify --exec` costs and catches.
#  1. the power table: cases the certification needs to reject each planted bug of
#     tests/exec/adapter.py (Python), doubling from 1000, with the output law alone
#     (--scheme none) and with the acceptance test of the named scheme as well;
#  2. the correct adapters at a large sample;
#  3. the protocol's throughput: cases/s through the C adapter against specdec's own
#     verifier in process (specdec mc, one thread), the overhead per case, and the
#     effect of the batch size (cases per flush).
# usage: exec.sh [BUILD]   (about two minutes; timings move with the machine's load;
# EXEC_BENCH_PART=throughput runs part 3 alone)
BUILD=${1:-build}
S=$BUILD/specdec
A=$BUILD/tests/exec/adapter
PAIR=dirichlet:6,1,2385
K=3
PY=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "import numpy" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "bench-exec: no python3 with numpy (sh install-deps.sh)" >&2; exit 1; }
P="$PY tests/exec/adapter.py"

# needed SCHEME_ARGS...: the smallest n = 1000 * 2^i (up to 1024000) that fails
needed() {
    n=1000
    while [ $n -le 1024000 ]; do
        if "$S" certify --pair $PAIR -k $K --samples $n "$@" 2>/dev/null | grep -q "^== FAIL"; then
            echo $n; return; fi
        n=$((n * 2))
    done
    echo "> 1024000"
}

[ "${EXEC_BENCH_PART:-all}" = throughput ] || {
echo "# 1. power: cases needed to reject at p < 1e-6, pair $PAIR, k = $K (Python adapters)"
printf '%-24s %-10s %14s %14s\n' "planted bug" "scheme" "law only" "law + accept"
for b in rrs-remove-first:rrs ratio-inverted:specinfer residual-unnormalised:specinfer \
         correction-from-target:specinfer kseq-low-gamma:kseq specinfer-last-round:specinfer; do
    bug=${b%%:*}; s=${b#*:}
    wor=""; [ $s = rrs ] && wor=--without-replacement
    a=$(needed --exec "$P $s --bug $bug" --scheme none $wor)
    c=$(needed --exec "$P $s --bug $bug" --scheme $s)
    printf '%-24s %-10s %14s %14s\n' "$bug" "$s" "$a" "$c"
done

echo "# 2. correct adapters, 2e5 cases (Python) and 2e6 (C) per pair, default pairs and k = 1,3"
for s in sd specinfer rrs kseq; do
    k=1,3; [ $s = sd ] && k=1
    "$S" certify --exec "$P $s" --scheme $s -k $k --samples 2e5 | grep "^==\|^# [0-9]" | sed "s/^/python $s: /"
done
for s in sd specinfer; do
    k=1,3; [ $s = sd ] && k=1
    "$S" certify --exec "$A $s" --scheme $s -k $k --samples 2e6 | grep "^==\|^# [0-9]" | sed "s/^/C $s: /"
done

}
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
