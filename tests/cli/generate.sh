#!/bin/sh
# Command-line tests of 'specdec generate': the contract, seeded and greedy text, the
# speed report, a replay log, and bad input (files, prompts, contexts, vocabularies).
# The models are tiny and trained here (specdec train, a few steps).
# usage: generate.sh path/to/specdec
SPECDEC=${1:-build/specdec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"

tiny_models "$T" 32

# --- the contract ---
expect 0 "usage: specdec generate" -- "$SPECDEC" generate --help
expect 2 "--model FILE.gguf is required" -- "$SPECDEC" generate --prompt hi
expect 2 "give one of --prompt" -- "$SPECDEC" generate --model "$T/m.gguf"
expect 2 "give one of --prompt" -- "$SPECDEC" generate --model "$T/m.gguf" --prompt a --prompt-file "$T/c.txt"
expect 2 "needs --draft" -- "$SPECDEC" generate --model "$T/m.gguf" --prompt a --log-logits "$T/l.safetensors"
expect 2 "--temperature -1" -- "$SPECDEC" generate --model "$T/m.gguf" --prompt a --temperature -1
expect 2 "--top-p 0" -- "$SPECDEC" generate --model "$T/m.gguf" --prompt a --top-p 0
expect 2 "unexpected argument" -- "$SPECDEC" generate --model "$T/m.gguf" --prompt a extra

# --- text and speed ---
expect 0 "generated 8 tokens, .* in forward passes (.* tokens/s; .* with sampling and output; steady, from the median pass: .*), first pass" -- "$SPECDEC" generate --model "$T/m.gguf" --prompt "Call me" --max-tokens 8
a=$("$SPECDEC" generate --model "$T/m.gguf" --prompt "Call me" --max-tokens 12 --seed 5 2>/dev/null)
b=$("$SPECDEC" generate --model "$T/m.gguf" --prompt "Call me" --max-tokens 12 --seed 5 --threads 1 2>/dev/null)
[ "$a" = "$b" ] && ok || bad "same seed, different text: '$a' / '$b'"
g1=$("$SPECDEC" generate --model "$T/m.gguf" --prompt "Call me" --max-tokens 12 --temperature 0 --seed 1 2>/dev/null)
g2=$("$SPECDEC" generate --model "$T/m.gguf" --prompt "Call me" --max-tokens 12 --temperature 0 --seed 2 2>/dev/null)
[ "$g1" = "$g2" ] && ok || bad "greedy text depends on the seed"
expect 0 '"generation_tokens_per_second"' -- "$SPECDEC" generate --model "$T/m.gguf" --prompt "Call me" --max-tokens 4 --json
expect 0 '"generation_median_pass_seconds": [0-9.]*, "generation_steady_tokens_per_second": [0-9.]*,' -- "$SPECDEC" generate --model "$T/m.gguf" --prompt "Call me" --max-tokens 4 --json
expect 0 '"first_pass_seconds": [0-9.]*, "generation_passes": 3,' -- "$SPECDEC" generate --model "$T/m.gguf" --prompt "Call me" --max-tokens 4 --json
printf 'Call me Ishmael.' > "$T/p.txt"
"$SPECDEC" generate --model "$T/m.gguf" --prompt-file "$T/p.txt" --max-tokens 2 --ctx 20 >/dev/null 2>&1 && ok || bad "--prompt-file"
expect 1 "--ctx 4000: past the model's context length of 32" -- "$SPECDEC" generate --model "$T/m.gguf" --prompt a --ctx 4000

# --- a replay log: the target's and the draft's logits along the generated text ---
expect 0 "logits of 10 positions" -- "$SPECDEC" generate --model "$T/m.gguf" --draft "$T/d.gguf" \
    --prompt "Call me" --max-tokens 10 --log-logits "$T/l.safetensors"
expect 0 "10 positions" -- "$SPECDEC" replay --log "$T/l.safetensors" --scheme sd
expect 1 "vocabulary of 280 tokens, the target's has 300" -- "$SPECDEC" generate --model "$T/m.gguf" \
    --draft "$T/other.gguf" --prompt "Call me" --max-tokens 3 --log-logits "$T/x.safetensors"
[ ! -e "$T/x.safetensors" ] && ok || bad "a failed log left a file"

# --- the same models as the oracle of the tree engine (--lm gguf:DRAFT,TARGET) ---
expect 0 "block efficiency .*Monte Carlo, 300 blocks" -- "$SPECDEC" tree --lm "gguf:$T/d.gguf,$T/m.gguf,0.8" \
    --scheme rrs --shape kconfig:2,1 --samples 300 --no-exact
expect 1 "must share one" -- "$SPECDEC" tree --lm "gguf:$T/other.gguf,$T/m.gguf" --scheme sd --shape 2 --no-exact
expect 1 "expected gguf:DRAFT.gguf,TARGET.gguf" -- "$SPECDEC" tree --lm "gguf:$T/m.gguf" --scheme sd --shape 2
expect 1 "$T/none.gguf" -- "$SPECDEC" tree --lm "gguf:$T/none.gguf,$T/m.gguf" --scheme sd --shape 2

# --- bad input ---
expect 1 "$T/none.gguf" -- "$SPECDEC" generate --model "$T/none.gguf" --prompt a
head -c 3000 "$T/m.gguf" > "$T/cut.gguf"
expect 1 "$T/cut.gguf" -- "$SPECDEC" generate --model "$T/cut.gguf" --prompt a
printf 'GGUF' > "$T/tiny.gguf"
expect 1 "$T/tiny.gguf" -- "$SPECDEC" generate --model "$T/tiny.gguf" --prompt a
expect 1 "cannot open" -- "$SPECDEC" generate --model "$T/m.gguf" --prompt-file "$T/none.txt"
expect 1 "the context is 32" -- "$SPECDEC" generate --model "$T/m.gguf" --prompt-file "$T/c.txt" --max-tokens 4
expect 1 "need .* positions" -- "$SPECDEC" generate --model "$T/m.gguf" --prompt "Call me" --max-tokens 100
finish "cli generate"
