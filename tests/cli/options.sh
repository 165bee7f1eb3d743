#!/bin/sh
# The options the commands share (src/cli/common.c's table) and the one exit-status
# rule: usage errors exit 2 wherever they are made (an unknown scheme, --samples 0, a
# shape or cost spec that does not parse), input and run failures 1; -k lists; --quiet
# everywhere; progress only on a terminal; under --json an error is a JSON object on
# stdout as well as a line on stderr. usage: options.sh path/to/specdec
SPECDEC=${1:-build/specdec}
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
M="--target data/models/target.gguf --draft data/models/draft.gguf"
P="--pair dirichlet:6,1,3"

# an unknown scheme: 2 in every command that takes --scheme (decode before any model loads)
expect 2 "unknown scheme 'nope'" -- "$SPECDEC" accept $P --scheme nope
expect 2 "unknown scheme 'nope'" -- "$SPECDEC" mc $P --scheme nope
expect 2 "unknown scheme 'nope'" -- "$SPECDEC" certify $P --scheme nope
expect 2 "unknown scheme 'nope'" -- "$SPECDEC" tree --lm const:0.8 --scheme nope --shape 4
expect 2 "unknown scheme 'nope'" -- "$SPECDEC" replay --log data/logs/sample.safetensors --scheme nope
expect 2 "unknown scheme 'nope'" -- "$SPECDEC" decode --target /nonexistent.gguf --draft /nonexistent.gguf --scheme nope
expect 2 "an empty name" -- "$SPECDEC" mc $P --scheme sd,,rrs
# --samples: a whole number from 1 (0 where it means none: tree), the same words everywhere
for c in "mc $P --scheme sd" "certify $P --scheme sd" "replay --log data/logs/sample.safetensors" \
         "compare --lm const:0.8 --budget 6"; do
    expect 2 "samples 0: need a whole number from" -- "$SPECDEC" $c --samples 0
done
expect 2 "samples 0: need a whole number from 2" -- "$SPECDEC" compare --lm const:0.8 --budget 6 --samples 0
expect 0 "" -- "$SPECDEC" tree --lm const:0.8 --scheme chain --shape 4 --samples 0
expect 2 "samples -3" -- "$SPECDEC" tree --lm const:0.8 --scheme chain --shape 4 --samples -3
# a spec on the command line that does not parse
expect 2 "tree shape 'chian:4'" -- "$SPECDEC" tree --lm const:0.8 --scheme sd --shape chian:4
expect 2 "tree shape 'chian:4'" -- "$SPECDEC" decode --target /nonexistent.gguf --draft /x.gguf --scheme sd --shape chian:4
expect 2 "cost curve" -- "$SPECDEC" tree --lm const:0.8 --scheme sd --shape 4 --cost-target lin:3
# input failures stay 1
expect 1 "nonexistent" -- "$SPECDEC" decode --target /nonexistent.gguf --draft /x.gguf --scheme sd
expect 1 "" -- "$SPECDEC" accept --draft 0.5,0.6 --target 0.5,0.5
# --seed, --threads, --device: one parser
expect 2 "seed must be a non-negative integer" -- "$SPECDEC" mc $P --scheme sd --seed x
expect 2 "seed must be a non-negative integer" -- "$SPECDEC" generate --model x.gguf --prompt a --seed -1
for c in "mc $P --scheme sd" "tree --lm const:0.8 --scheme sd --shape 4" "replay --log data/logs/sample.safetensors" \
         "decode $M" "generate --model x.gguf --prompt a" "synth-log --lm const:0.8 --out $T/x"; do
    expect 2 "threads 0: need 1 to 1024" -- "$SPECDEC" $c --threads 0
done
expect 2 "device gpu: expected cpu or cuda" -- "$SPECDEC" tree --lm const:0.8 --scheme sd --shape 4 --device gpu
expect 2 "device gpu: expected cpu or cuda" -- "$SPECDEC" decode $M --device gpu

# -k: a list where a command runs each k (accept), one k elsewhere
"$SPECDEC" accept $P -k 1,2,4 --json > "$T/list.json" || bad "accept -k 1,2,4"
"$SPECDEC" accept $P -k 4 --json > "$T/four.json" || bad "accept -k 4"
python3 - "$T/list.json" "$T/four.json" <<'EOF' && ok || bad "accept -k 1,2,4: the k = 4 rows are not accept -k 4's"
import json, sys
lst, four = (json.load(open(f)) for f in sys.argv[1:])
rows = [r for r in lst["results"] if r["k"] == 4]
want = {r["scheme"]: r["acceptance"] for r in four["results"]}
sys.exit(not (lst["settings"]["k_list"] == [1, 2, 4] and len(lst["results"]) == 15 and len(rows) == 5
              and all(r["acceptance"] == want[r["scheme"]] for r in rows)))
EOF
expect 0 "^  4 rrs " -- "$SPECDEC" accept $P -k 1,2,4
expect 2 "mc takes one k" -- "$SPECDEC" mc $P --scheme sd -k 1,2
expect 2 "at least 1" -- "$SPECDEC" accept $P -k 2,0

# --quiet everywhere: accepted, and nothing but errors on stderr
for c in "accept $P" "otm $P" "mc $P --scheme sd --samples 1000" \
         "certify $P --scheme sd --samples 1e4 --seq-samples 1e4" \
         "tree --lm const:0.8 --scheme sd --shape 4 --samples 1000" "compare --lm markov:8,1,0.5,3,0.5 --budget 6 --samples 200" \
         "replay --log data/logs/sample.safetensors -k 2" "synth-log --lm const:0.8 --out $T/q --positions 5" \
         "generate --model data/models/target.gguf --prompt Call --max-tokens 3 --threads 1" \
         "decode $M --scheme sd --n-prompts 1 --calibrate 1 --max-tokens 4 --threads 1"; do
    "$SPECDEC" $c --quiet > "$T/out" 2> "$T/err"; rc=$?
    [ "$rc" = 0 ] && [ ! -s "$T/err" ] && ok || bad "--quiet: $c: exit $rc, stderr: $(head -c 200 "$T/err")"
done

# progress: drawn on a terminal (script gives one), never into a file; 6e7 trials take over
# a second (the first report) even on a fast machine
"$SPECDEC" mc $P --scheme sd --samples 6e7 --threads 1 > /dev/null 2> "$T/err" || bad "mc 6e7"
grep -q "$(printf '\r')" "$T/err" && bad "progress written into a file: $(head -c 100 "$T/err")" || ok
if command -v script > /dev/null 2>&1; then
    script -qec "$SPECDEC mc $P --scheme sd --samples 6e7 --threads 1 > /dev/null" /dev/null > "$T/tty" 2>&1
    grep -q "mc: .* trials" "$T/tty" && ok || bad "no progress on a terminal: $(head -c 100 "$T/tty")"
    script -qec "$SPECDEC mc $P --scheme sd --samples 6e7 --threads 1 --quiet > /dev/null" /dev/null > "$T/tty" 2>&1
    grep -q "trials" "$T/tty" && bad "progress on a terminal with --quiet" || ok
else
    echo "options: skipped: no 'script' for a terminal (the progress-on-a-terminal half)"
fi

# --json: an error is a JSON object on stdout (and a line on stderr), also once the
# envelope is open (mc's second scheme fails after the first one's row)
jsonerr() {
    want=$1; shift
    "$@" > "$T/j.out" 2> "$T/j.err"; rc=$?
    python3 - "$T/j.out" "$rc" "$want" <<'EOF' && [ -s "$T/j.err" ] && ok || bad "--json error of: $* (exit $rc): $(head -c 300 "$T/j.out")"
import json, sys
o = json.load(open(sys.argv[1]))
e = o["error"]
sys.exit(not (int(sys.argv[2]) == e["status"] == int(sys.argv[3]) and e["message"] and o["command"] and o["version"]))
EOF
}
jsonerr 2 "$SPECDEC" accept $P --scheme nope --json
jsonerr 2 "$SPECDEC" mc $P --scheme sd --samples 0 --json
jsonerr 2 "$SPECDEC" tree --json --lm const:0.8 --scheme sd --shape chian:4
jsonerr 1 "$SPECDEC" mc --draft /nonexistent.npy --target 0.5,0.5 --scheme sd --json
jsonerr 1 "$SPECDEC" decode --target /nonexistent.gguf --draft /x.gguf --json
jsonerr 1 "$SPECDEC" mc $P --scheme sd,kseq --gamma 0.5 --samples 1000 --json
python3 -c "import json,sys; o=json.load(open('$T/j.out')); sys.exit(len(o['results']) != 1)" && ok ||
    bad "mc --json: the row before the failure is lost"
finish "cli options"
