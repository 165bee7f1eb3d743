#!/bin/sh
# The options every command shares: one JSON envelope for every --json ({"command",
# "version", "settings", ..., "results": [...]}), --scheme all where schemes are named,
# --threads where a command computes, "did you mean" for a mistyped command or option.
# usage: json.sh path/to/specdec
SPECDEC=${1:-build/specdec}
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
PY=python3
command -v $PY >/dev/null 2>&1 || PY=""

# envelope NAME command...: stdout is one JSON object whose keys start command, version,
# settings and end with results (a list), command naming the command
envelope() {
    name=$1; shift
    if ! "$@" > "$T/out.json" 2> "$T/err"; then bad "$name: exit $? ($(head -c 300 "$T/err"))"; return; fi
    if [ -z "$PY" ]; then
        grep -q "^{\"command\": \"$name\", \"version\": \"[0-9][0-9.]*\", \"settings\": {" "$T/out.json" &&
            grep -q '"results": \[' "$T/out.json" && ok || bad "$name --json: not the envelope"
        return
    fi
    $PY - "$name" "$T/out.json" <<'EOF' && ok || bad "$name --json: not the envelope: $(head -c 300 "$T/out.json")"
import json, sys
o = json.load(open(sys.argv[2]))
k = list(o)
sys.exit(not (k[:3] == ["command", "version", "settings"] and k[-1] == "results" and o["command"] == sys.argv[1]
              and isinstance(o["version"], str) and o["version"][:1].isdigit()
              and isinstance(o["settings"], dict) and isinstance(o["results"], list) and len(o["results"]) > 0))
EOF
}
M="--target data/models/target.gguf --draft data/models/draft.gguf"
envelope accept "$SPECDEC" accept --pair dirichlet:6,1,3 -k 2 --json
envelope otm "$SPECDEC" otm --pair dirichlet:5,1,3 -k 2 --json
envelope mc "$SPECDEC" mc --pair dirichlet:6,1,3 --scheme rrs --samples 1e4 --json
envelope certify "$SPECDEC" certify --scheme sd --pair dirichlet:6,1,3 --samples 1e4 --seq-samples 1e4 --json
envelope certify "$SPECDEC" certify --exec "$(dirname "$SPECDEC")/tests/exec/adapter sd" --scheme sd --pair dirichlet:6,1,3 --samples 1e4 --json
# (a sampler that always answers token 0, never accepted, fails: exit 1 with the object on stdout)
envelope certify sh -c '"$0" certify --exec "$1" --pair dirichlet:6,1,3 --samples 1000 --json
                        [ $? = 1 ]' "$SPECDEC" 'while read w rest; do [ "$w" = case ] && echo 0 0; done'
# (a constant decoder fails: exit 1 with the object on stdout)
envelope certify sh -c '"$0" certify --decoder "echo 0 0" --target data/models/target.gguf --prompt Ishmael --samples 10 --json
                        [ $? = 1 ]' "$SPECDEC"
envelope tree "$SPECDEC" tree --lm const:0.8 --scheme chain --shape 4 --exact --samples 0 --json
envelope compare "$SPECDEC" compare --lm markov:4,1,0.5,7,0.5 --length 2 --samples 2000 --json
envelope replay "$SPECDEC" replay --log data/logs/sample.safetensors -k 2 --json
envelope generate "$SPECDEC" generate --model data/models/target.gguf --prompt "Call me" --max-tokens 4 --threads 1 --json
envelope decode "$SPECDEC" decode $M --scheme sd --n-prompts 2 --max-tokens 6 --threads 1 --quiet --json

# mc --scheme all: the five schemes in turn, each as its own run on the same seed
all=$("$SPECDEC" mc --pair dirichlet:12,1,3 -k 3 --scheme all --samples 20000 --seed 5 --json)
for s in sd specinfer rrs kseq otm; do
    one=$("$SPECDEC" mc --pair dirichlet:12,1,3 -k 3 --scheme $s --samples 20000 --seed 5 --json |
          sed -n 's/.*"acceptance": \([0-9.e-]*\),.*/\1/p')
    printf '%s' "$all" | grep -q "\"scheme\": \"$s\", \"k\": 3, \"acceptance\": $one," && ok ||
        bad "mc --scheme all: $s's row is not its own run's ($one)"
done
expect 0 '^# otm, V = 12' -- "$SPECDEC" mc --pair dirichlet:12,1,3 -k 3 --scheme sd,otm --samples 2000
expect 2 "certify takes one scheme" -- "$SPECDEC" certify --scheme all
expect 0 "^# sd, V = 5, k = 2, 1 sample, seed" -- "$SPECDEC" mc --pair dirichlet:5,1,1 --scheme sd --samples 1
# compare --threads: the same table for any thread count
a=$("$SPECDEC" compare --lm markov:8,1,0.5,3,0.5 --budget 6 --samples 20000 --threads 1 --json)
b=$("$SPECDEC" compare --lm markov:8,1,0.5,3,0.5 --budget 6 --samples 20000 --threads 2 --json)
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "compare --threads 1 and 2 differ"
expect 2 "need 1 to 1024" -- "$SPECDEC" compare --lm markov:8,1,0.5,3,0.5 --budget 6 --threads 0
expect 2 "need 1 to 1024" -- "$SPECDEC" figs --check gt-nodes --threads 0
expect 0 "gt-nodes .* 0 off" -- "$SPECDEC" figs --check gt-nodes --threads 1
expect 0 "written" -- "$SPECDEC" synth-log --lm markov:8,1,0.5,3,0.5 --out "$T/s" --positions 10 --threads 1

# did you mean: a mistyped command or long option names the nearest one, exit 2
expect 2 "did you mean 'accept'" -- "$SPECDEC" acept --pair dirichlet:6,1,3
expect 2 "did you mean 'replay'" -- "$SPECDEC" replya
expect 2 "did you mean '--samples'" -- "$SPECDEC" mc --pair dirichlet:6,1,3 --scheme sd --smaples 100
expect 2 "did you mean '--target'" -- "$SPECDEC" accept --draft 0.5,0.5 --traget 0.5,0.5
expect 2 "did you mean '--max-tokens'" -- "$SPECDEC" decode $M --max-tokns 4
out=$("$SPECDEC" accept --pair dirichlet:6,1,3 --zzzzzzzz 2>&1)
printf '%s' "$out" | grep -q "unknown option '--zzzzzzzz'" && ! printf '%s' "$out" | grep -q "did you mean" && ok ||
    bad "an option far from every one gets no suggestion: $out"
finish "cli json"
