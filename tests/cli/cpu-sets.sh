#!/bin/sh
# Command-line tests of the CPU kernel sets (src/model/cpu/): the greedy text of the
# shipped target (F16, in the cache) and of the large target (Q4_K, the K-quant kernels;
# and widened to F16 by specdec convert, the float rows streamed from memory) is the
# same under every set this machine runs; the programs name the set in their headers;
# SPECDEC_CPU naming an unknown set, or one this build or CPU lacks, is an error that
# names the variable and its value. The sets' logits: test_cpu.
# usage: cpu-sets.sh path/to/specdec
SPECDEC=${1:-build/specdec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"

# the sets this CPU runs, from the header generate prints
sets=$("$SPECDEC" generate --model data/models/target.gguf --prompt a --max-tokens 1 2>&1 >/dev/null |
    sed -n 's/.*CPU kernels [a-z0-9]* (this CPU: \([a-z0-9 ]*\)).*/\1/p')
[ -n "$sets" ] && ok || bad "generate names no kernel sets in its report"
case " $sets " in *" generic "*) ok ;; *) bad "generic is not among the sets ($sets)" ;; esac

# greedy text under each set: MODEL TOKENS
same_text() {
    ref=
    for s in $sets; do
        txt=$(SPECDEC_CPU=$s "$SPECDEC" generate --model "$1" --prompt "The ship sailed into the harbour and" \
            --max-tokens "$2" --temperature 0 --ids 2>"$T/err") || { bad "$s: generate failed: $(cat "$T/err")"; return; }
        grep -q "CPU kernels $s " "$T/err" || bad "$s: generate's report does not name the set: $(cat "$T/err")"
        if [ -z "$ref" ]; then ref=$txt; ref_set=$s; continue; fi
        [ "$txt" = "$ref" ] && ok || bad "$(basename "$1"): greedy tokens under $s differ from $ref_set: '$txt' / '$ref'"
    done
    echo "$(basename "$1"): the same $2 greedy tokens under$(printf ' %s' $sets)"
}
same_text data/models/target.gguf 48
if [ -f data/models/large-target.gguf ]; then
    same_text data/models/large-target.gguf 24
    "$SPECDEC" convert --model data/models/large-target.gguf --out "$T/large-f16.gguf" --type f16 >/dev/null 2>&1 ||
        bad "convert the large target to F16"
    same_text "$T/large-f16.gguf" 24
else
    echo "cpu-sets: skipped: no data/models/large-target.gguf (the large target's greedy text across sets)"
fi

# the headers name the set
expect 0 "CPU kernels generic (this CPU: generic" -- env SPECDEC_CPU=generic "$SPECDEC" generate --model data/models/target.gguf --prompt a --max-tokens 2
expect 0 "^# CPU kernels generic (this CPU:" -- env SPECDEC_CPU=generic "$SPECDEC" decode --target data/models/target.gguf --draft data/models/draft.gguf --prompt "Call me" --scheme sd --max-tokens 1 --threads 1

# SPECDEC_CPU that cannot run: an error naming it, exit 1, no crash
expect 1 "SPECDEC_CPU=sse9: no such kernel set (generic, avx2, avx512, neon; this CPU runs generic" -- env SPECDEC_CPU=sse9 "$SPECDEC" generate --model data/models/target.gguf --prompt a --max-tokens 2
for s in avx2 avx512 neon; do
    case " $sets " in *" $s "*) continue ;; esac
    expect 1 "SPECDEC_CPU=$s: this .* the $s kernel set (it runs generic" -- env SPECDEC_CPU=$s "$SPECDEC" generate --model data/models/target.gguf --prompt a --max-tokens 2
done
finish cpu-sets
