#!/bin/sh
# The large target as a 1B-class model for a GPU: data/models/large-target.gguf with every
# block's feed-forward widened from 1408 to LARGE_WIDE_FFN neurons (default 53760), the
# added ones inert (specdec convert --ffn-width: their ffn_down columns are zero, so every
# logit is the large target's, bit for bit on the CPU), in F16: 1.002B parameters, 2.0 GB
# that each pass reads whole. On a GPU, where the large target itself (75 MB) is bound by
# its launches, this one is bound by memory, with the large target's law: the same drafts
# accept, the same text comes out. Written once (about 35 s on the 2-core build machine,
# mostly the writing of 2 GB), again when the stored file is newer; prints its path.
# tests/gpu-check.sh writes it in the background from its start; make bench-wide runs it
# on the CPU.
# usage: data/models/large-wide.sh [SPECDEC_BINARY]   (default build/specdec)
#   env: LARGE_WIDE_FFN (the width), LARGE_WIDE (the file; default
#        out/models/large-target-ffnWIDTH-f16.gguf), LARGE_WIDE_SRC (the model widened:
#        the large target; the GPU check's dry run widens the shipped one a little)
set -eu
cd "$(dirname "$0")/../.."
BIN=${1:-build/specdec}
W=${LARGE_WIDE_FFN:-53760}
SRC=${LARGE_WIDE_SRC:-data/models/large-target.gguf}
DST=${LARGE_WIDE:-out/models/$(basename "$SRC" .gguf)-ffn$W-f16.gguf}
[ -s "$SRC" ] || { echo "large-wide: no $SRC (make models-large trains it)" >&2; exit 1; }
if [ ! -s "$DST" ] || [ "$SRC" -nt "$DST" ]; then
    [ -x "$BIN" ] || { echo "large-wide: no $BIN (run make first)" >&2; exit 1; }
    mkdir -p "$(dirname "$DST")"
    "$BIN" convert --model "$SRC" --out "$DST" --type f16 --ffn-width "$W" >&2 ||
        { echo "large-wide: widening $SRC to $W failed" >&2; exit 1; }
fi
echo "$DST"
