#!/bin/sh
# Trains the large target of data/models/ (`make models-large` runs it): a 37.5M-parameter
# Llama (dim 512, 12 blocks, 8 query / 4 key-value heads, SwiGLU 1408; 75 MB of F16
# weights, over twice this machine's 32 MB L3), on the shipped pair's corpus and with its
# tokenizer, so that the shipped target and draft can draft for it. Its pass streams its
# weights from memory, the regime where speculative decoding pays.
#
# Hours on 2 cores, so the run is resumable: its checkpoint (450 MB), log and model are
# kept in CKPT_DIR (default .cache/models-large) while it trains; rerunning the same
# command after a stop continues from the last checkpoint (at most 10 steps lost) and
# ends with the bytes an unbroken run writes. At the end the model and its log are
# copied to data/models/large-target.gguf and .tsv and the loss curves drawn.
# usage: data/models/build-large.sh [SPECDEC_BINARY]      (default build/specdec)
# LARGE_STEPS overrides the schedule's length (a quick trial: LARGE_STEPS=4, which
# writes into CKPT_DIR/trial-4 only); STOP_AFTER=N stops after N steps of this process.
set -eu
cd "$(dirname "$0")/../.."
BIN=${1:-build/specdec}
OUT=data/models
CORPUS=.cache/corpus
CKPT_DIR=${CKPT_DIR:-.cache/models-large}
LARGE_STEPS=${LARGE_STEPS:-1000}
[ "$LARGE_STEPS" = 1000 ] || CKPT_DIR="$CKPT_DIR/trial-$LARGE_STEPS"
[ -x "$BIN" ] || { echo "models-large: no $BIN (run make first)" >&2; exit 1; }
sh data/models/corpus.sh
mkdir -p "$CKPT_DIR"
start=$(date +%s)
# ---- large target: 37.5M parameters, tokenizer of the shipped target
"$BIN" train --corpus "$CORPUS/train.txt" --val "$CORPUS/val.txt" --tokenizer "$OUT/target.gguf" \
    --dim 512 --layers 12 --heads 8 --kv-heads 4 --ffn 1408 --ctx 256 \
    --batch 16 --steps "$LARGE_STEPS" --lr 1e-3 --warmup 100 --eval-every 50 --log-every 10 --seed 2385 \
    --checkpoint "$CKPT_DIR/large-target.ckpt" --checkpoint-every 10 ${STOP_AFTER:+--stop-after "$STOP_AFTER"} \
    --name "specdec large target (Moby-Dick + State of the Union)" \
    --out "$CKPT_DIR/large-target.gguf" --log "$CKPT_DIR/large-target.tsv"
[ -e "$CKPT_DIR/large-target.gguf" ] || { echo "models-large: stopped; run the same command to continue"; exit 0; }
echo "models-large: this process trained for $(( ($(date +%s) - start) / 60 )) minutes"
if [ "$LARGE_STEPS" != 1000 ]; then
    echo "models-large: a trial of $LARGE_STEPS steps: left in $CKPT_DIR, data/models untouched"
    exit 0
fi
cp "$CKPT_DIR/large-target.gguf" "$CKPT_DIR/large-target.tsv" "$OUT/"
if command -v gnuplot >/dev/null 2>&1; then
    for fmt in png svg; do
        gnuplot -e "target='$OUT/large-target.tsv'; draft='$OUT/target.tsv'; out='$OUT/large-loss'; fmt='$fmt'" plots/models-loss.gp
    done
fi
ls -l "$OUT"/large-*
