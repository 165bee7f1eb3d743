#!/bin/sh
# The large target's decoding file: data/models/large-target.gguf is stored as Q4_K
# (rows of 1408 in Q8_0; 25 MB in git instead of 75 MB of F16) and runs as those same
# numbers widened to F16, out/models/large-target-f16.gguf: 75 MB, over twice the L3,
# so that each pass streams its weights from memory, the regime where speculation pays
# (as a 21 MB Q4_K file it would sit in the cache). Written once, in about a second,
# again when the stored file is newer; prints its path. The benchmarks and make demo
# call it; `specdec decode --target data/models/large-target.gguf` runs the Q4_K file
# itself (same model, other kernels and speed).
# usage: data/models/large-f16.sh [SPECDEC_BINARY [NAME]]   (default build/specdec)
#   NAME: print the file that runs data/models/NAME.gguf instead: this widened one for
#         large-target, the stored file for any other (the benchmarks take models by name)
set -eu
cd "$(dirname "$0")/../.."
BIN=${1:-build/specdec}
if [ -n "${2:-}" ] && [ "$2" != large-target ]; then echo "data/models/$2.gguf"; exit 0; fi
SRC=data/models/large-target.gguf
DST=${LARGE_F16:-out/models/large-target-f16.gguf}
[ -s "$SRC" ] || { echo "large-f16: no $SRC (make models-large trains it)" >&2; exit 1; }
if [ ! -s "$DST" ] || [ "$SRC" -nt "$DST" ]; then
    [ -x "$BIN" ] || { echo "large-f16: no $BIN (run make first)" >&2; exit 1; }
    mkdir -p "$(dirname "$DST")"
    "$BIN" convert --model "$SRC" --out "$DST" --type f16 >&2 ||
        { echo "large-f16: converting $SRC failed" >&2; exit 1; }
fi
echo "$DST"
