#!/bin/sh
# Command-line tests of 'specdec replay' and 'specdec synth-log'.
SPECDEC=${1:-build/specdec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"
D=data/logs/sample
expect 0 "usage: specdec replay" -- "$SPECDEC" replay --help
expect 0 "usage: specdec synth-log" -- "$SPECDEC" synth-log --help
expect 0 '"positions": 400' -- "$SPECDEC" replay --draft-log $D.draft.npy --target-log $D.target.npy --tokens-log $D.tokens.npy -k 4 --json
# token logs as NumPy saves them by default (int64), and int32; logits of integers refused
python3 - "$T" <<'PY'
import struct, sys
def npy(path, vals, descr, fmt):
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (descr, len(vals))
    hdr += ' ' * (64 - (10 + len(hdr) + 1) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hdr)) + hdr.encode())
        f.write(struct.pack('<%d%s' % (len(vals), fmt), *vals))
npy(sys.argv[1] + '/tok64.npy', list(range(400)), '<i8', 'q')
npy(sys.argv[1] + '/tok32.npy', list(range(400)), '<i4', 'i')
npy(sys.argv[1] + '/tok64short.npy', list(range(399)), '<i8', 'q')
PY
expect 0 '"positions": 400' -- "$SPECDEC" replay --draft-log $D.draft.npy --target-log $D.target.npy --tokens-log "$T/tok64.npy" -k 4 --json
expect 0 '"positions": 400' -- "$SPECDEC" replay --draft-log $D.draft.npy --target-log $D.target.npy --tokens-log "$T/tok32.npy" -k 4 --json
expect 1 "tok64short.npy: 399 tokens for 400 positions" -- "$SPECDEC" replay --draft-log $D.draft.npy --target-log $D.target.npy --tokens-log "$T/tok64short.npy"
expect 1 "tok64.npy: dtype '<i8' holds integers, not logits" -- "$SPECDEC" replay --draft-log "$T/tok64.npy" --target-log $D.target.npy
out=$("$SPECDEC" replay --draft-log $D.draft.npy --target-log $D.target.npy -k 2 --scheme sd,rrs --json)
for key in command version settings positions results scheme k mean_acceptance ci_low ci_high; do
    printf '%s' "$out" | grep -q "\"$key\":" && ok || bad "replay --json lacks $key"
done
expect 0 "float16 logits" -- "$SPECDEC" replay --draft-log $D.draft.npy --target-log $D.target.npy --scheme sd --precision-check --temperature 0.7 --top-p 0.9
# a log written now replays the same as the shipped one
expect 0 "written" -- "$SPECDEC" synth-log --lm markov:256,1,0.1,2385,0.4,1.3 --out "$T/again" --positions 400
a=$("$SPECDEC" replay --draft-log $D.draft.npy --target-log $D.target.npy --scheme sd,otm --json | sed 1d)
b=$("$SPECDEC" replay --draft-log "$T/again.draft.npy" --target-log "$T/again.target.npy" --scheme sd,otm --json | sed 1d)
[ "$a" = "$b" ] && ok || bad "data/logs/sample differs from a fresh synth-log"
# the same log as one safetensors file replays the same
a=$("$SPECDEC" replay --log $D.safetensors --scheme sd,otm,rrs --json | sed 1d)
b=$("$SPECDEC" replay --draft-log $D.draft.npy --target-log $D.target.npy --scheme sd,otm,rrs --json | sed 1d)
[ "$a" = "$b" ] && ok || bad "data/logs/sample.safetensors replays differently from the .npy pair"
printf 'not json at all' > "$T/bad.safetensors"
expect 1 "bad.safetensors" -- "$SPECDEC" replay --log "$T/bad.safetensors"
# bad input
expect 1 "no-such.npy" -- "$SPECDEC" replay --draft-log no-such.npy --target-log $D.target.npy
head -c 300 $D.draft.npy > "$T/trunc.npy"
expect 1 "trunc.npy" -- "$SPECDEC" replay --draft-log "$T/trunc.npy" --target-log $D.target.npy
"$SPECDEC" synth-log --lm markov:256,1,0.1,2385,0.4,1.3 --out "$T/short" --positions 100 2>/dev/null
expect 1 "same positions" -- "$SPECDEC" replay --draft-log "$T/short.draft.npy" --target-log $D.target.npy
expect 2 "give --log FILE" -- "$SPECDEC" replay --draft-log $D.draft.npy
expect 2 "unknown scheme" -- "$SPECDEC" replay --draft-log $D.draft.npy --target-log $D.target.npy --scheme nope
expect 1 "model spec" -- "$SPECDEC" synth-log --lm markov:1 --out "$T/x"
finish "cli replay"
