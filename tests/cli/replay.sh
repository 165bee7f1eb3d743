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

# the cost of a pass: replay states its assumption beside every speedup, and with the
# costs decode measured (--cost-out) its chain speedup is the machine's: on the shipped
# pair, sd's chain:4 speedup replayed within a factor 2 of the one decode measured (the
# flat assumption, a pass over 5 tokens as dear as one over 1, says about 1.8x where this
# pair, whose target sits in cache, measures 0.4x to 0.6x on 2 cores)
M="--target data/models/target.gguf --draft data/models/draft.gguf"
"$SPECDEC" generate --model data/models/target.gguf --draft data/models/draft.gguf --prompt "Call me Ishmael." \
    --max-tokens 200 --log-logits "$T/pair.safetensors" >/dev/null 2>&1 || bad "generate --log-logits"
expect 0 "M_T(gamma+1)/M_T(1) = 1, a memory-bound target" -- "$SPECDEC" replay --log "$T/pair.safetensors" --scheme sd
measured=$("$SPECDEC" decode $M --scheme sd --shape chain:4 --n-prompts 4 --max-tokens 48 --threads 2 --quiet \
    --cost-out "$T/cost.tsv" --json | sed -n 's/.*"scheme": "sd",.*"tokens_per_second": [0-9.e+-]*, "speedup": \([0-9.e+-]*\),.*/\1/p')
expect 0 "priced by the costs measured in $T/cost.tsv" -- "$SPECDEC" replay --log "$T/pair.safetensors" --scheme sd --cost "$T/cost.tsv"
out=$("$SPECDEC" replay --log "$T/pair.safetensors" --scheme sd --cost "$T/cost.tsv" --json)
# every chain row priced from the file: speedup = eff / (g c + M_T(g+1)/M_T(1)), c = M_D(1)/M_T(1)
printf '%s\n' "$out" | tr '{' '\n' | sed -n 's/^"gamma": \([0-9]*\), "block_efficiency": \([0-9.e+-]*\), "speedup": \([0-9.e+-]*\), "target_pass_cost": \([0-9.e+-]*\).*/\1 \2 \3 \4/p' > "$T/chain"
awk 'FNR == NR { if ($1 !~ /^#/) { t[$1] = $2; d[$1] = $3 } next }
     { n++; c = d[1] / t[1]; pc = t[$1 + 1] / t[1]; want = $2 / ($1 * c + pc)
       if (!(t[1] > 0 && ($3 - want) ^ 2 < 1e-12 * want ^ 2 && ($4 - pc) ^ 2 < 1e-12 * pc ^ 2)) bad++ }
     END { exit !(n == 8 && !bad) }' "$T/cost.tsv" "$T/chain" && ok || { bad "replay --cost: a chain row not priced from the file"; cat "$T/chain"; }
replayed=$(awk '$1 == 4 { print $3 }' "$T/chain")
awk -v m="$measured" -v r="$replayed" 'BEGIN { exit !(m > 0 && r > 0 && r / m < 2 && m / r < 2) }' && ok ||
    bad "sd chain:4 on the shipped pair: replay --cost says ${replayed}x, decode measured ${measured}x"
printf '1 0.5 0.1\n3 0.9 0.2\n' > "$T/gap.tsv"
expect 1 "gap.tsv:2: width 3 where 2 was due" -- "$SPECDEC" replay --log "$T/pair.safetensors" --cost "$T/gap.tsv"
printf '1 0.5 0.1\n2 0.4 0.2\n' > "$T/down.tsv"
expect 1 "down.tsv" -- "$SPECDEC" replay --log "$T/pair.safetensors" --cost "$T/down.tsv"
expect 2 "no --cost-ratio" -- "$SPECDEC" replay --log "$T/pair.safetensors" --cost "$T/cost.tsv" --cost-ratio 0.2
expect 1 "no-such.tsv: cannot open" -- "$SPECDEC" replay --log "$T/pair.safetensors" --cost no-such.tsv
expect 2 "no --gt-sweep, --parallel-sweep, --check, --json, --tsv, --cost-out or --text" -- "$SPECDEC" decode $M --ids --cost-out "$T/x.tsv"
finish "cli replay"
