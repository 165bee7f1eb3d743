#!/bin/sh
# Command-line tests of 'specdec random-model': the contract, a tiny model in every
# type that generate then loads and runs, the same seed writing the same bytes, and
# bad shapes, types and paths.
# usage: random-model.sh path/to/specdec
SPECDEC=${1:-build/specdec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"

SHAPE=64,2,4,2,96,300
expect 0 "usage: specdec random-model" -- "$SPECDEC" random-model --help
expect 2 "--out FILE.gguf is required" -- "$SPECDEC" random-model --shape $SHAPE
expect 2 "--type 'q3'" -- "$SPECDEC" random-model --out "$T/x.gguf" --type q3
expect 2 "--shape '64,2'" -- "$SPECDEC" random-model --out "$T/x.gguf" --shape 64,2
expect 2 "--shape '64,2,5,1,96,300'" -- "$SPECDEC" random-model --out "$T/x.gguf" --shape 64,2,5,1,96,300
expect 1 "vocabulary 100" -- "$SPECDEC" random-model --out "$T/x.gguf" --shape 64,2,4,2,96,100
expect 1 "rows of 48" -- "$SPECDEC" random-model --out "$T/x.gguf" --shape 48,1,4,2,96,300 --type q8_0
expect 1 "$T/none/x.gguf" -- "$SPECDEC" random-model --out "$T/none/x.gguf" --shape $SHAPE --ctx 64
for t in f32 f16 bf16 q8_0 q4_0; do
    expect 0 "vocab 300, $(echo $t | tr a-z A-Z)" -- "$SPECDEC" random-model --out "$T/$t.gguf" --shape $SHAPE --type $t --ctx 64
    expect 0 "generated 8 tokens" -- "$SPECDEC" generate --model "$T/$t.gguf" --prompt "abc" --max-tokens 8 --temperature 0
done
expect 0 "" -- "$SPECDEC" random-model --out "$T/again.gguf" --shape $SHAPE --type q4_0 --ctx 64
expect 0 "" -- cmp "$T/q4_0.gguf" "$T/again.gguf"
expect 0 "" -- "$SPECDEC" random-model --out "$T/seed.gguf" --shape $SHAPE --type q4_0 --ctx 64 --seed 7
expect 1 "differ" -- cmp "$T/q4_0.gguf" "$T/seed.gguf"
finish "cli random-model"
