#!/bin/sh
# Command-line tests of 'specdec accept' and 'specdec otm': contract, JSON, bad input.
# usage: accept.sh path/to/specdec
SPECDEC=${1:-build/specdec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"

# --- the contract ---
expect 0 "usage: specdec accept" -- "$SPECDEC" accept --help
expect 0 "accept" -- "$SPECDEC" help
expect 2 "unknown command" -- "$SPECDEC" frobnicate
expect 0 '"acceptance": 0.9375' -- "$SPECDEC" accept --draft 0.75,0.25 --target 0.5,0.5 -k 2 --scheme otm --json
expect 0 '"scheme": "rrs", "acceptance": 1' -- "$SPECDEC" accept --draft 0.75,0.25 --target 0.5,0.5 -k 2 --json
expect 0 '0.812500000000000' -- "$SPECDEC" accept --draft 0.75,0.25 --target 0.5,0.5 -k 2 --scheme specinfer
expect 0 '^{"command": "accept", "version": "[0-9.]*", "settings": {"vocab": 2, "k": 2, "pair": "bernoulli:0.25,0.5"},$' -- "$SPECDEC" accept --pair bernoulli:0.25,0.5 -k 2 --json
# rrs asked for more drafts than the draft's support: it drafts the whole support (k used
# = 2, in the table's drafts column and in the JSON), acceptance target(support) = 1
expect 0 'rrs  *2  1.000000000000000  .*whole support' -- "$SPECDEC" accept --pair bernoulli:0.3,0.6 --scheme rrs -k 4
expect 0 '"scheme": "rrs", "acceptance": [0-9.]*, "method": "[^"]*whole support[^"]*", "drafts": 2' -- "$SPECDEC" accept --pair bernoulli:0.3,0.6 --scheme rrs -k 4 --json
expect 0 'rrs  *1  0.300000000000000' -- "$SPECDEC" accept --draft 0,1,0 --target 0.2,0.3,0.5 --scheme all -k 3
expect 0 '"scheme": "otm-setlp", "acceptance": 0.9375' -- "$SPECDEC" accept --pair bernoulli:0.25,0.5 -k 2 --scheme otm,otm-lp,otm-setlp --json

# the shipped pair equals its family spec, scheme for scheme
a=$("$SPECDEC" accept --draft data/pair/draft.txt --target data/pair/target.txt -k 4 --json | sed '1d; s/"seconds": [0-9.]*//')
b=$("$SPECDEC" accept --pair zipf:50,1.2,0.7 -k 4 --json | sed '1d; s/"seconds": [0-9.]*//')
[ "$a" = "$b" ] && ok || bad "data/pair differs from --pair zipf:50,1.2,0.7"

# logits: softmax(log p) = p
expect 0 '"acceptance": 0.937[45]' -- "$SPECDEC" accept --logits --draft=-0.2876820724517809,-1.3862943611198906 --target=-0.6931471805599453,-0.6931471805599453 -k 2 --scheme otm --json
# normalize
expect 0 '"acceptance": 0.9375' -- "$SPECDEC" accept --normalize --draft 3,1 --target 2,2 -k 2 --scheme otm --json

# .npy input (float64, written by hand: header padded to 64 bytes)
python3 - "$T" <<'PY' 2>/dev/null || printf '' > "$T/no-python"
import sys, struct
d = sys.argv[1]
def npy(path, vals, descr='<f8', fmt='d'):
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (descr, len(vals))
    hdr += ' ' * (64 - (10 + len(hdr) + 1) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hdr)) + hdr.encode())
        f.write(struct.pack('<%d%s' % (len(vals), fmt), *vals))
npy(d + '/draft.npy', [0.75, 0.25])
npy(d + '/target.npy', [0.5, 0.5], '<f4', 'f')
npy(d + '/wrong.npy', [1, 2], '<i8', 'q')
with open(d + '/trunc.npy', 'wb') as f:
    f.write(open(d + '/draft.npy', 'rb').read()[:70])
# a Dirichlet(1) pair of 1000 tokens stored as float32: the rounded entries sum to 1
# within float32's precision, not within the 1e-9 of double input
import random
rng = random.Random(2385)
def dirichlet32(n):
    g = [rng.expovariate(1.0) for _ in range(n)]
    s = sum(g)
    return [struct.unpack('<f', struct.pack('<f', x / s))[0] for x in g]
d32, t32 = dirichlet32(1000), dirichlet32(1000)
npy(d + '/d32.npy', d32, '<f4', 'f')
npy(d + '/t32.npy', t32, '<f4', 'f')
npy(d + '/t32off.npy', [x * 0.999 for x in t32], '<f4', 'f')
sd, st = sum(d32), sum(t32)
with open(d + '/d32.txt', 'w') as f:  # the sums, and sd's acceptance after rescaling in double
    f.write('%.3g %.3g %.9f' % (abs(sd - 1), abs(st - 1), sum(min(a / sd, b / st) for a, b in zip(d32, t32))))
PY
if [ ! -f "$T/no-python" ]; then
    expect 0 '"acceptance": 0.9375' -- "$SPECDEC" accept --draft "$T/draft.npy" --target "$T/target.npy" -k 2 --scheme otm --json
    expect 1 "wrong.npy" -- "$SPECDEC" accept --draft "$T/wrong.npy" --target "$T/target.npy"
    expect 1 "trunc.npy" -- "$SPECDEC" accept --draft "$T/trunc.npy" --target "$T/target.npy"
    set -- $(cat "$T/d32.txt")
    echo "accept: float32 Dirichlet pair, |sum - 1| = $1 and $2"
    expect 0 "\"acceptance\": ${3%???}" -- "$SPECDEC" accept --draft "$T/d32.npy" --target "$T/t32.npy" --scheme sd --json
    expect 1 "target: entries sum to 0.999" -- "$SPECDEC" accept --draft "$T/d32.npy" --target "$T/t32off.npy" --scheme sd
fi

# --- bad input: exit 1, a message naming the input, no crash ---
expect 1 "draft: .*negative" -- "$SPECDEC" accept --draft 0.5,-0.1,0.6 --target 0.2,0.3,0.5
expect 1 "target: .*non-finite" -- "$SPECDEC" accept --draft 0.5,0.5 --target nan,0.5
expect 1 "target: .*non-finite" -- "$SPECDEC" accept --draft 0.5,0.5 --target inf,0.5
expect 1 "sum to" -- "$SPECDEC" accept --draft 0.5,0.6 --target 0.5,0.5
expect 1 "all 2 entries are zero" -- "$SPECDEC" accept --draft 0,0 --target 0.5,0.5 --normalize
expect 1 "draft has 3 tokens but target has 2" -- "$SPECDEC" accept --draft 0.2,0.3,0.5 --target 0.5,0.5
expect 2 "at least 1" -- "$SPECDEC" accept --draft 0.5,0.5 --target 0.5,0.5 -k 0
# -k 0 is a usage error (exit 2) on every command that takes k, as -k -1 is
for c in mc certify; do expect 2 "-k must be at least 1" -- "$SPECDEC" $c --pair bernoulli:0.3,0.6 --scheme sd -k 0; done
expect 2 "-k must be at least 1" -- "$SPECDEC" otm --pair bernoulli:0.3,0.6 -k 0
expect 2 "-k must be at least 1" -- "$SPECDEC" replay --log data/logs/sample.safetensors -k 0
expect 1 "no-such-file" -- "$SPECDEC" accept --draft no-such-file.txt --target 0.5,0.5
: > "$T/empty.txt"
expect 1 "empty.txt" -- "$SPECDEC" accept --draft "$T/empty.txt" --target 0.5,0.5
expect 1 "not lossless" -- "$SPECDEC" accept --draft 0.75,0.25 --target 0.5,0.5 -k 2 --scheme kseq --gamma 1
expect 1 "otm-lp.*tuple LP" -- "$SPECDEC" accept --pair dirichlet:1000,1,1 -k 4 --scheme otm-lp
expect 1 "Monte Carlo" -- "$SPECDEC" accept --pair dirichlet:32000,1,1 -k 3 --scheme rrs
expect 0 "rrs .*skipped" -- "$SPECDEC" accept --pair dirichlet:32000,1,1 -k 3
expect 2 "unknown scheme" -- "$SPECDEC" accept --draft 0.5,0.5 --target 0.5,0.5 --scheme foo
expect 2 "--draft and --target" -- "$SPECDEC" accept --draft 0.5,0.5
expect 2 "-k must be" -- "$SPECDEC" accept --draft 0.5,0.5 --target 0.5,0.5 -k x
expect 1 "pair spec" -- "$SPECDEC" accept --pair zipf:1
expect 2 "apply to --logits" -- "$SPECDEC" accept --draft 0.5,0.5 --target 0.5,0.5 --temperature 0.5

# --- specdec otm ---
expect 0 "usage: specdec otm" -- "$SPECDEC" otm --help
expect 0 '"status": "optimal"' -- "$SPECDEC" otm --pair dirichlet:10,1,3 -k 4 --form tuple --json
expect 0 '"theorem1"' -- "$SPECDEC" otm --pair dirichlet:5,0.5,3 -k 3 --theorem1 --json
expect 1 "tuple LP" -- "$SPECDEC" otm --pair dirichlet:1000,1,1 -k 4 --form tuple
expect 0 "" -- "$SPECDEC" otm --pair dirichlet:6,1,2 -k 3 --form tuple --write-lp "$T/otm.lp" --write-data "$T/otm.dat"
if command -v glpsol >/dev/null 2>&1; then
    want=$("$SPECDEC" otm --pair dirichlet:6,1,2 -k 3 --form tuple --json | sed -n 's/.*"optimum": \([0-9.e-]*\).*/\1/p')
    got=$(glpsol --lp "$T/otm.lp" -o "$T/sol.txt" >/dev/null 2>&1; sed -n 's/^Objective: *[^=]*= *\([0-9.e-]*\).*/\1/p' "$T/sol.txt")
    awk -v a="$want" -v b="$got" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b != "" && d < 1e-6) }' \
        && ok || bad "glpsol on the written LP gives '$got', specdec '$want'"
    got=$(glpsol -m lp/otm.mod -d "$T/otm.dat" -o "$T/sol2.txt" >/dev/null 2>&1; sed -n 's/^Objective: *[^=]*= *\([0-9.e-]*\).*/\1/p' "$T/sol2.txt")
    awk -v a="$want" -v b="$got" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b != "" && d < 1e-6) }' \
        && ok || bad "glpsol on lp/otm.mod + data gives '$got', specdec '$want'"
fi

finish "cli accept/otm"
