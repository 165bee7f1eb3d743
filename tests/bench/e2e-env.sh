# Sourced by the end-to-end benchmarks (e2e.sh, parallel.sh, predict.sh) after
# `BUILD=${1:-build}`: the repository root as the working folder, the binary, the run's
# size, the device, the output folder and the shipped files.
# env: E2E_PROMPTS (default 20), E2E_TOKENS (64), E2E_THREADS (2), E2E_DEVICE (cpu, or
#      cuda with a `make cuda` build: passed as --device to every decode, tree and compare
#      call), E2E_OUT (out/figs, or paper-figs/e2e-PAIR with RECORD=1: where the TSVs and
#      figures go), E2E_PAIR (large: the
#      large target data/models/large-target.gguf (run as its F16 expansion,
#      data/models/large-f16.sh) with data/models/$LARGE_DRAFT.gguf
#      (default large-draft-4800) and large-parallel.gguf, the default when they are there;
#      small: the shipped 5.5M target with draft.gguf and parallel.gguf; wide: the large
#      target widened to 1B parameters with inert neurons, data/models/large-wide.sh, or
#      the file E2E_WIDE_TARGET, with large-draft.gguf and large-parallel.gguf). PDM: the
#      draft the pair's parallel drafter was initialised from (its sequential twin).
cd "$(dirname "$0")/../.."
SD=$BUILD/specdec
N=${E2E_PROMPTS:-20}
TOK=${E2E_TOKENS:-64}
TH=${E2E_THREADS:-2}
LARGE_DRAFT=${LARGE_DRAFT:-large-draft-4800}
if [ -z "${E2E_PAIR:-}" ]; then
    E2E_PAIR=small
    [ -s data/models/large-target.gguf ] && [ -s "data/models/$LARGE_DRAFT.gguf" ] && E2E_PAIR=large
fi
case $E2E_PAIR in
    small) TM=data/models/target.gguf DM=data/models/draft.gguf PM=data/models/parallel.gguf PDM=$DM ;;
    large) TM=data/models/large-target.gguf DM=data/models/$LARGE_DRAFT.gguf PM=data/models/large-parallel.gguf
           PDM=data/models/large-draft.gguf ;;
    wide) TM=data/models/large-target.gguf DM=data/models/large-draft.gguf PM=data/models/large-parallel.gguf
          PDM=$DM ;;
    *) echo "E2E_PAIR=$E2E_PAIR: expected small, large or wide" >&2; exit 2 ;;
esac
for f in "$TM" "$DM"; do
    [ -s "$f" ] || { echo "E2E_PAIR=$E2E_PAIR: no $f (the large pair: make models-large)" >&2; exit 1; }
done
# the large target runs as its F16 expansion (data/models/large-f16.sh: weights streamed from memory)
[ "$E2E_PAIR" = large ] && { TM=$(sh data/models/large-f16.sh "$SD") || exit 1; }
# the wide one as its 1B widening (data/models/large-wide.sh), or the file made already
if [ "$E2E_PAIR" = wide ]; then
    if [ -n "${E2E_WIDE_TARGET:-}" ]; then TM=$E2E_WIDE_TARGET; else TM=$(sh data/models/large-wide.sh "$SD") || exit 1; fi
fi
# RECORD=1 (make bench-e2e RECORD=1, bench-predict, bench-parallel): into paper-figs/e2e-PAIR/,
# which make figs draws; else out/figs
OUT=${E2E_OUT:-$([ -n "${RECORD:-}" ] && echo "paper-figs/e2e-$E2E_PAIR" || echo out/figs)}
# where the figures are drawn: beside the data, but never into paper-figs (make figs draws those)
case $OUT in paper-figs/*) DRAW=out/figs/${OUT#paper-figs/} ;; *) DRAW=$OUT ;; esac
# DEV: nothing on the CPU (the commands stay as they were), else --device NAME
DEV=""
case "${E2E_DEVICE:-cpu}" in
    cpu) ;;
    cuda) DEV="--device cuda" ;;
    *) echo "E2E_DEVICE=$E2E_DEVICE: expected cpu or cuda" >&2; exit 2 ;;
esac
# a bundle from tests/bench/cuda-bundle.sh carries its libraries
[ -d "$BUILD/lib" ] && export LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$OUT"
