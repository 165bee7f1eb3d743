#!/bin/sh
# The draft-size ladder (`make models-ladder`; issue 26): drafts of several sizes distilled
# from the shipped target (data/models/target.gguf), on the corpus of the default pair:
#   ladder-d48, -d96         one block of width 48 / 96 (tied embeddings), new weights
#                            (ONLY=d64 adds width 64: it measured as d48 did, at 1.5x the
#                            size, and is not shipped: the models stay under 20 MiB);
#   ladder-t1                the target's embedding, first block and output norm (a
#                            truncated, self-speculative draft), fine-tuned briefly.
# Each is distilled as the shipped draft is (0.3 x cross-entropy + 0.7 x KL(target || draft),
# temperature 1), with fewer tokens (about 15-20 minutes each at one thread on the shared
# 2-core machine; the teacher's forward pass is most of the cost).
# Writes data/models/ladder-*.gguf and ladder-*.tsv, and the curves ladder.png / .svg
# (plots/ladder-loss.gp) if gnuplot is there.
# usage: data/models/ladder.sh [SPECDEC_BINARY]      (default build/specdec)
# ONLY="d48 t1" trains those rungs alone; STEPS and T1_STEPS override the schedule lengths
# (a quick trial); THREADS the OpenMP threads of each run (default 1).
set -eu
cd "$(dirname "$0")/../.."
BIN=${1:-build/specdec}
OUT=data/models
CORPUS=.cache/corpus
STEPS=${STEPS:-480}
T1_STEPS=${T1_STEPS:-120}
THREADS=${THREADS:-1}
ONLY=${ONLY:-"d48 d96 t1"}
[ -x "$BIN" ] || { echo "ladder: no $BIN (run make first)" >&2; exit 1; }
[ -s "$OUT/target.gguf" ] || { echo "ladder: no $OUT/target.gguf (make models)" >&2; exit 1; }
sh data/models/corpus.sh

# rung NAME STEPS [train options]: one distillation run
rung() {
    name=$1 steps=$2
    shift 2
    "$BIN" train --corpus "$CORPUS/train.txt" --val "$CORPUS/val.txt" --teacher "$OUT/target.gguf" \
        --ctx 256 --batch 16 --steps "$steps" --lr 3e-3 --warmup 30 --eval-every 60 --seed 2385 \
        --alpha 0.7 --temperature 1 --threads "$THREADS" \
        --out "$OUT/ladder-$name.gguf" --log "$OUT/ladder-$name.tsv" "$@"
}

start=$(date +%s)
for r in $ONLY; do
    case $r in
    d48) rung d48 "$STEPS" --dim 48 --layers 1 --heads 2 --kv-heads 1 --ffn 128 \
            --name "specdec ladder draft d48 (distilled from the target)" ;;
    d64) rung d64 "$STEPS" --dim 64 --layers 1 --heads 2 --kv-heads 1 --ffn 192 \
            --name "specdec ladder draft d64 (distilled from the target)" ;;
    d96) rung d96 "$STEPS" --dim 96 --layers 1 --heads 3 --kv-heads 1 --ffn 256 \
            --name "specdec ladder draft d96 (distilled from the target)" ;;
    t1)  rung t1 "$T1_STEPS" --init "$OUT/target.gguf" --init-layers 1 --lr 1e-3 \
            --name "specdec ladder draft t1 (the target's first block, fine-tuned)" ;;
    *) echo "ladder: unknown rung '$r' (d48 d64 d96 t1)" >&2; exit 2 ;;
    esac
done
echo "ladder: trained in $(( ($(date +%s) - start) / 60 )) minutes"

if command -v gnuplot >/dev/null 2>&1; then
    for fmt in png svg; do
        gnuplot -e "dir='$OUT'; out='$OUT/ladder'; fmt='$fmt'" plots/ladder-loss.gp
    done
    echo "ladder: $OUT/ladder.png, .svg"
else
    echo "ladder: gnuplot is not installed; the curves are in $OUT/ladder-*.tsv" >&2
fi
ls -l "$OUT"/ladder-*.gguf
