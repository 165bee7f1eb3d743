#!/bin/sh
# Trains the large pair of data/models/ (`make models-large` runs it).
#   large-target    a 37.5M-parameter Llama (dim 512, 12 blocks, 8 query / 4 key-value
#                   heads, SwiGLU 1408; 75 MB of F16 weights, over twice this machine's
#                   32 MB L3), on the shipped pair's corpus and with its tokenizer: its pass
#                   streams its weights from memory, the regime where speculation pays.
#                   Shipped as Q4_K (25 MB; rows of 1408 in Q8_0), run widened to F16
#                   (data/models/large-f16.sh); large-target-q4k.txt: that model's loss,
#                   KL to the trained F16 one and acceptance (train --steps 0);
#   large-draft     the shipped 0.87M draft, distilled from the shipped large target
#                   (0.3 x cross-entropy + 0.7 x KL(large || draft), temperature 1, as the
#                   shipped draft was from its target);
#   large-parallel  a ParallelSpec drafter (large-draft + 7 [MASK] tokens) distilled from it;
#   large-mid       the shipped 5.5M target distilled from it the same way (a slower,
#                   closer draft);
#   large-draft-long  the shipped draft distilled as large-draft, 1200 steps instead of
#                   300 (val_accept 0.664 -> 0.739, data/models/README.md);
#   large-draft-4800  the same, 4800 steps (its acceptance was still rising at 1200):
#                   the default draft.
# The drafts start from the shipped pair's weights: trained on the same corpus with the
# same tokenizer, they already draft for it, and distillation moves them to its law with
# few tokens (the teacher's pass is most of a distillation step's cost).
#
# Hours on 2 cores, so every run is resumable: checkpoints (450 MB for the target), logs
# and models are kept in CKPT_DIR (default .cache/models-large) while they train;
# rerunning the same command after a stop continues from the last checkpoint (at most 10
# steps lost) and ends with the bytes an unbroken run writes; a model already written is
# not trained again. At the end the models and their logs are copied to data/models/
# (large-*.gguf, .tsv) and the loss curves drawn.
# usage: data/models/build-large.sh [SPECDEC_BINARY]      (default build/specdec)
# LARGE_STEPS overrides the target's schedule length (a quick trial: LARGE_STEPS=4, which
# writes into CKPT_DIR/trial-4 only; DRAFT_STEPS then sets each draft's, default 3);
# STOP_AFTER=N stops each run after N steps of this process; ONLY=target stops after the
# target.
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
[ "${ONLY:-}" = target ] && { echo "models-large: the target is trained (ONLY=target: no drafts)"; exit 0; }
if [ "$LARGE_STEPS" = 1000 ]; then DRAFT_STEPS=""; else DRAFT_STEPS=${DRAFT_STEPS:-3}; fi

# ---- the shipped form: Q4_K (rows of 1408 in Q8_0), 25 MB in git instead of 75 MB of F16;
# the drafts learn that model's law, widened back to F16 (what the benchmarks run:
# data/models/large-f16.sh), and its loss, KL to the F16 original and acceptance are logged
if [ ! -e "$CKPT_DIR/large-target-q4k-f16.gguf" ]; then
    "$BIN" convert --model "$CKPT_DIR/large-target.gguf" --out "$CKPT_DIR/large-target-q4k.gguf" --type q4_k --fallback q8_0
    "$BIN" train --corpus "$CORPUS/train.txt" --val "$CORPUS/val.txt" --init "$CKPT_DIR/large-target-q4k.gguf" \
        --teacher "$CKPT_DIR/large-target.gguf" --ctx 256 --steps 0 > "$CKPT_DIR/large-target-q4k.txt"
    cat "$CKPT_DIR/large-target-q4k.txt"
    "$BIN" convert --model "$CKPT_DIR/large-target-q4k.gguf" --out "$CKPT_DIR/large-target-q4k-f16.gguf" --type f16
fi

# distill NAME STEPS [train options]: one draft distilled from the large target, resumable
distill() {
    name=$1 steps=${DRAFT_STEPS:-$2}
    shift 2
    [ -e "$CKPT_DIR/$name.gguf" ] && { echo "models-large: $name already trained"; return 0; }
    "$BIN" train --corpus "$CORPUS/train.txt" --val "$CORPUS/val.txt" --teacher "$CKPT_DIR/large-target-q4k-f16.gguf" \
        --ctx 256 --steps "$steps" --eval-every 50 --log-every 10 --seed 2385 --alpha 0.7 --temperature 1 \
        --checkpoint "$CKPT_DIR/$name.ckpt" --checkpoint-every 10 ${STOP_AFTER:+--stop-after "$STOP_AFTER"} \
        --out "$CKPT_DIR/$name.gguf" --log "$CKPT_DIR/$name.tsv" "$@"
    [ -e "$CKPT_DIR/$name.gguf" ] || { echo "models-large: stopped in $name; run the same command to continue"; exit 0; }
}
# ---- drafts, most useful first: the shipped draft distilled from it, the parallel drafter
# made from that, then the shipped target distilled from it (a slower, closer draft)
distill large-draft 300 --init "$OUT/draft.gguf" --batch 8 --lr 2e-3 --warmup 20 \
    --name "specdec large-pair draft (the shipped draft, distilled from the large target)"
distill large-parallel 300 --init "$CKPT_DIR/large-draft.gguf" --parallel 7 --groups 96 --batch 6 \
    --lr 2e-3 --warmup 30 --eval-tokens 16384 \
    --name "specdec large-pair parallel drafter (large-draft + 7 [MASK] tokens, distilled from the large target)"
distill large-mid 200 --init "$OUT/target.gguf" --batch 8 --lr 1e-3 --warmup 20 \
    --name "specdec large-pair draft (the shipped target, distilled from the large target)"
# the shipped draft again, four times as long (its name as large-draft's: the same model, trained on)
distill large-draft-long 1200 --init "$OUT/draft.gguf" --batch 8 --lr 2e-3 --warmup 20 --eval-every 100 \
    --name "specdec large-pair draft (the shipped draft, distilled from the large target)"
# and four times as long again (about an hour on 2 cores)
distill large-draft-4800 4800 --init "$OUT/draft.gguf" --batch 8 --lr 2e-3 --warmup 20 --eval-every 200 \
    --name "specdec large-pair draft (the shipped draft, distilled from the large target for 4800 steps)"

echo "models-large: this process trained for $(( ($(date +%s) - start) / 60 )) minutes"
if [ "$LARGE_STEPS" != 1000 ]; then
    echo "models-large: a trial of $LARGE_STEPS steps: left in $CKPT_DIR, data/models untouched"
    exit 0
fi
# the target as Q4_K (data/models/large-f16.sh widens it for the benchmarks); the drafts F16
cp "$CKPT_DIR/large-target-q4k.gguf" "$OUT/large-target.gguf"
cp "$CKPT_DIR/large-target.tsv" "$CKPT_DIR/large-target-q4k.txt" "$OUT/"
for m in large-mid large-draft large-parallel large-draft-long large-draft-4800; do
    cp "$CKPT_DIR/$m.gguf" "$CKPT_DIR/$m.tsv" "$OUT/"
done
if command -v gnuplot >/dev/null 2>&1; then
    for fmt in png svg; do
        gnuplot -e "target='$OUT/large-target.tsv'; draft='$OUT/large-draft.tsv'; out='$OUT/large-loss'; fmt='$fmt'; pair='Large pair (large-target, large-draft)'" plots/models-loss.gp
        gnuplot -e "log='$OUT/large-parallel.tsv'; out='$OUT/large-parallel'; fmt='$fmt'" plots/parallel-accept.gp
    done
fi
ls -l "$OUT"/large-*
echo "models-large: next, make bench-ladder picks the draft by measured speedup"
