#!/bin/sh
# Runs llama.cpp (ref_logits) on MODEL.gguf and a token sequence, and prints where
# the logits are: the reference side of "specdec's decoder against llama.cpp".
#
# usage: tests/bench/llamacpp/compare.sh MODEL.gguf TOKENS [OUTDIR] [-- REF_LOGITS_OPTIONS...]
#   TOKENS   a file of token ids (whitespace/commas/brackets) or a list "1,15043,3186"
#   OUTDIR   default out/llamacpp; gets MODEL-NAME.llamacpp.npy (float32, n_tokens x n_vocab)
#            and MODEL-NAME.llamacpp.json (ref_logits' summary: settings and token ids)
#   options after -- go to ref_logits (e.g. --batch 1, --kv f16; see ref_logits --help)
#   env: SPECDEC_LOGITS=FILE.npy  compare with these logits (same shape) using numpy:
#        max |difference|, its position, and how often the argmax agrees.
# Builds llama.cpp first if needed (tests/bench/llamacpp/build.sh; long the first time).
#
# TODO (issue 9, decoder author): run specdec's decoder on the same MODEL and TOKENS
# to write $OUTDIR/MODEL-NAME.specdec.npy here, then compare in C (src/npy.h) with a
# stated tolerance, instead of the numpy summary below.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BUILD=${LLAMA_BUILD:-$ROOT/.cache/llama.cpp-build}

if [ $# -lt 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    [ $# -ge 1 ] && { [ "$1" = -h ] || [ "$1" = --help ]; } && exit 0
    exit 2
fi
MODEL=$1 TOKENS=$2
shift 2
OUTDIR=$ROOT/out/llamacpp
if [ $# -gt 0 ] && [ "$1" != -- ]; then OUTDIR=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = -- ] && shift
[ -f "$MODEL" ] || { echo "compare.sh: $MODEL: no such file" >&2; exit 1; }

[ -x "$BUILD/bin/ref_logits" ] || sh "$HERE/build.sh"

if [ -f "$TOKENS" ] || [ "$TOKENS" = - ]; then
    set -- --tokens-file "$TOKENS" "$@"
else
    set -- --tokens "$TOKENS" "$@"
fi
mkdir -p "$OUTDIR"
name=$(basename "$MODEL" .gguf)
REF=$OUTDIR/$name.llamacpp.npy
"$BUILD/bin/ref_logits" -m "$MODEL" -o "$REF" -t 2 --json "$@" >"$OUTDIR/$name.llamacpp.json"
echo "llama.cpp logits: $REF"
echo "settings, tokens: $OUTDIR/$name.llamacpp.json"

if [ -n "${SPECDEC_LOGITS:-}" ]; then
    PY=python3
    $PY -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3
    $PY - "$REF" "$SPECDEC_LOGITS" <<'EOF'
import sys
import numpy as np
ref, got = (np.load(p).astype(np.float64) for p in sys.argv[1:3])
if ref.shape != got.shape:
    sys.exit(f"compare.sh: shapes differ: llama.cpp {ref.shape}, specdec {got.shape}")
d = np.abs(ref - got)
i, j = np.unravel_index(np.argmax(d), d.shape)
agree = np.mean(ref.argmax(1) == got.argmax(1))
print(f"max |diff| {d.max():.3g} at position {i} token {j} (llama.cpp {ref[i, j]:.6g}, "
      f"specdec {got[i, j]:.6g}); mean |diff| {d.mean():.3g}; argmax agrees at {agree:.1%} of positions")
EOF
fi
