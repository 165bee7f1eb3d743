#!/bin/sh
# Command-line tests of 'specdec train': the contract, a tiny model trained from a tiny
# corpus (loss falls, the file loads), a draft distilled from it, and bad input.
# usage: train.sh path/to/specdec
SPECDEC=${1:-build/specdec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"

# a small corpus: a few sentences, many times, documents apart
i=0
while [ $i -lt 60 ]; do
    printf 'Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, I thought I would sail about a little and see the watery part of the world.<|endoftext|>' >> "$T/train.txt"
    printf 'It is a way I have of driving off the spleen and regulating the circulation.<|endoftext|>' >> "$T/train.txt"
    i=$((i + 1))
done
printf 'Call me Ishmael. It is a way I have of driving off the spleen, and I would sail about a little.<|endoftext|>' > "$T/val.txt"
TINY="--dim 16 --layers 1 --heads 2 --ctx 16 --batch 2 --eval-tokens 64 --threads 1"

# --- the contract ---
expect 0 "usage: specdec train" -- "$SPECDEC" train --help
expect 0 "train " -- "$SPECDEC" help
expect 2 "--corpus is required" -- "$SPECDEC" train --out "$T/m.gguf" --vocab 300
expect 2 "--out is required" -- "$SPECDEC" train --corpus "$T/train.txt" --vocab 300
expect 2 "a tokenizer is needed" -- "$SPECDEC" train --corpus "$T/train.txt" --out "$T/m.gguf"
expect 2 "exclude each other" -- "$SPECDEC" train --corpus "$T/train.txt" --out "$T/m.gguf" --vocab 300 --tokenizer "$T/x.gguf"
expect 2 "head size" -- "$SPECDEC" train --corpus "$T/train.txt" --out "$T/m.gguf" --vocab 300 --dim 30 --heads 4
expect 2 "multiple of --kv-heads" -- "$SPECDEC" train --corpus "$T/train.txt" --out "$T/m.gguf" --vocab 300 --heads 4 --kv-heads 3
expect 2 "cosine, linear or constant" -- "$SPECDEC" train --corpus "$T/train.txt" --out "$T/m.gguf" --vocab 300 --schedule step
expect 2 "f32 or f16" -- "$SPECDEC" train --corpus "$T/train.txt" --out "$T/m.gguf" --vocab 300 --type q4
expect 2 "--vocab 100: need 258" -- "$SPECDEC" train --corpus "$T/train.txt" --out "$T/m.gguf" --vocab 100
expect 2 "finite number" -- "$SPECDEC" train --corpus "$T/train.txt" --out "$T/m.gguf" --vocab 300 --lr fast
expect 2 "unexpected argument" -- "$SPECDEC" train --corpus "$T/train.txt" --out "$T/m.gguf" --vocab 300 extra
expect 1 "cannot open" -- "$SPECDEC" train --corpus "$T/none.txt" --out "$T/m.gguf" --vocab 300
expect 1 "learning rate" -- "$SPECDEC" train --corpus "$T/train.txt" --out "$T/m.gguf" --vocab 300 --lr 0
expect 1 "fewer than one window of 17" -- sh -c "printf 'Call me' > '$T/short.txt'; '$SPECDEC' train --corpus '$T/train.txt' --val '$T/short.txt' --out '$T/m.gguf' --vocab 300 $TINY"

# --- a tiny target: the validation loss falls, the file loads and generates ---
expect 0 "wrote $T/target.gguf" -- "$SPECDEC" train --corpus "$T/train.txt" --val "$T/val.txt" --vocab 300 \
    $TINY --steps 40 --lr 1e-2 --warmup 5 --eval-every 20 --log-every 10 --out "$T/target.gguf" --log "$T/target.tsv"
rows=$(grep -vc '^#' "$T/target.tsv")
[ "$rows" = 6 ] && ok || bad "target.tsv: $rows lines besides the header, want 6 (columns + steps 0..40 by 10)"
grep -q "^step	tokens	train_loss	val_loss	lr	seconds" "$T/target.tsv" && ok || bad "target.tsv: no column line"
grep -q "^# model: vocab 300 dim 16 layers 1" "$T/target.tsv" && ok || bad "target.tsv: no model line"
awk -F'\t' '!/^#/ && $4 != "nan" && $1 ~ /^[0-9]/ { if (first == "") first = $4; last = $4 }
    END { exit !(last < first - 1) }' "$T/target.tsv" && ok || bad "target.tsv: the validation loss did not fall by a nat"
expect 0 "generated 5 tokens" -- "$SPECDEC" generate --model "$T/target.gguf" --prompt "Call me" --max-tokens 5
# --steps 0 evaluates a model: the same validation loss the run ended on; against itself
# as the teacher, KL 0 and acceptance 1; nothing written
last=$(awk -F'\t' '!/^#/ && $1 == 40 { printf "%.4f", $4 }' "$T/target.tsv")
expect 0 "^validation loss $last  (" -- "$SPECDEC" train --corpus "$T/train.txt" --val "$T/val.txt" \
    --init "$T/target.gguf" $TINY --steps 0
expect 0 "KL(teacher || model) 0.0000  acceptance 1.0000" -- "$SPECDEC" train --corpus "$T/train.txt" --val "$T/val.txt" \
    --init "$T/target.gguf" --teacher "$T/target.gguf" $TINY --steps 0
expect 2 "--steps 0 evaluates a model: --init M.gguf is needed" -- "$SPECDEC" train --corpus "$T/train.txt" --vocab 300 --steps 0
expect 2 "--steps 0 only evaluates: no --out" -- "$SPECDEC" train --corpus "$T/train.txt" --init "$T/target.gguf" --steps 0 --out "$T/x.gguf"

# --- a draft distilled from it, tokenizer taken from the teacher ---
expect 0 "distilled" -- "$SPECDEC" train --corpus "$T/train.txt" --val "$T/val.txt" --teacher "$T/target.gguf" \
    --dim 8 --layers 1 --heads 2 --ctx 16 --batch 2 --eval-tokens 64 --threads 1 --steps 4 --eval-every 2 \
    --type f32 --out "$T/draft.gguf" --log "$T/draft.tsv"
awk -F'\t' '!/^#/ && $1 == 4 { exit !($9 > 0 && $9 <= 1 && $8 >= 0) }' "$T/draft.tsv" && ok || bad "draft.tsv: no acceptance in (0, 1] at step 4"
expect 0 "generated 3 tokens" -- "$SPECDEC" generate --model "$T/draft.gguf" --prompt "Call me" --max-tokens 3
# a teacher with another vocabulary
"$SPECDEC" train --corpus "$T/train.txt" --vocab 280 $TINY --steps 1 --out "$T/other.gguf" >/dev/null 2>&1
expect 1 "vocabulary of 300 tokens, the tokenizer has 280" -- "$SPECDEC" train --corpus "$T/train.txt" --tokenizer "$T/other.gguf" \
    --teacher "$T/target.gguf" $TINY --steps 1 --out "$T/m.gguf"
# --- a parallel drafter (ParallelSpec): the draft plus [MASK] tokens, group-wise layout
expect 2 "--parallel 65" -- "$SPECDEC" train --corpus "$T/train.txt" --teacher "$T/target.gguf" --parallel 65 --out "$T/p.gguf"
expect 1 "context of 16 tokens, shorter than the 18 it reads per window" -- "$SPECDEC" train --corpus "$T/train.txt" \
    --teacher "$T/target.gguf" --init "$T/draft.gguf" --parallel 4 --groups 14 --steps 1 --out "$T/p.gguf"
expect 1 "--init .*other.gguf: vocabulary of 280" -- "$SPECDEC" train --corpus "$T/train.txt" --val "$T/val.txt" \
    --teacher "$T/target.gguf" --init "$T/other.gguf" --parallel 2 --groups 8 --steps 1 --out "$T/p.gguf"
printf 'Tokens of another text entirely, with other merges, zebra quartz jumps.<|endoftext|>%.0s' $(seq 40) > "$T/other.txt"
"$SPECDEC" train --corpus "$T/other.txt" --vocab 300 $TINY --steps 1 --out "$T/same-size.gguf" >/dev/null 2>&1
expect 1 "same-size.gguf: its tokenizer differs from the training one at token" -- "$SPECDEC" train --corpus "$T/train.txt" \
    --val "$T/val.txt" --teacher "$T/target.gguf" --init "$T/same-size.gguf" --parallel 2 --groups 8 $TINY --steps 1 --out "$T/p.gguf"
[ ! -e "$T/p.gguf" ] && ok || bad "a failed --parallel run wrote its --out file"
expect 0 "wrote .*p.gguf" -- "$SPECDEC" train --corpus "$T/train.txt" --val "$T/val.txt" --teacher "$T/target.gguf" \
    --init "$T/draft.gguf" --parallel 3 --groups 8 $TINY --steps 4 --eval-every 2 --out "$T/p.gguf" --log "$T/p.tsv"
grep -q "^# parallel drafter: 3 \[MASK\] tokens, 8 groups per example (32 inputs" "$T/p.tsv" && ok || bad "p.tsv: no layout line"
awk -F'\t' '!/^#/ && $1 == 4 { exit !(NF == 13 && $11 > 0 && $13 <= 1) }' "$T/p.tsv" && ok || bad "p.tsv: no acceptance per mask at step 4"
# resuming a parallel drafter keeps its masks (the file's last tensor: 3 x 16 F16 values);
# a step at a learning rate of 1e-30 leaves every F16 weight as it was
expect 0 "wrote .*p2.gguf" -- "$SPECDEC" train --corpus "$T/train.txt" --val "$T/val.txt" --teacher "$T/target.gguf" \
    --init "$T/p.gguf" --parallel 3 --groups 8 $TINY --steps 1 --lr 1e-30 --warmup 0 --seed 77 --out "$T/p2.gguf"
[ "$(tail -c 96 "$T/p.gguf" | od -An -tx1)" = "$(tail -c 96 "$T/p2.gguf" | od -An -tx1)" ] && ok \
    || bad "--init with 3 masks: the masks were drawn again"
"$SPECDEC" train --corpus "$T/train.txt" --val "$T/val.txt" --teacher "$T/target.gguf" --init "$T/draft.gguf" \
    --parallel 3 --groups 8 $TINY --steps 1 --lr 1e-30 --warmup 0 --seed 77 --out "$T/p3.gguf" >/dev/null 2>&1
[ "$(tail -c 96 "$T/p.gguf" | od -An -tx1)" != "$(tail -c 96 "$T/p3.gguf" | od -An -tx1)" ] && ok \
    || bad "new masks from another seed equal the old ones: the check above means nothing"

# --- a truncated draft (--init-layers): the first blocks of a 2-block target ---
expect 2 "--init-layers needs --init" -- "$SPECDEC" train --corpus "$T/train.txt" --teacher "$T/target.gguf" --init-layers 1 --out "$T/t.gguf"
"$SPECDEC" train --corpus "$T/train.txt" --val "$T/val.txt" --vocab 300 --dim 16 --layers 2 --heads 2 --ctx 16 \
    --batch 2 --eval-tokens 64 --threads 1 --steps 80 --lr 1e-2 --warmup 5 --out "$T/target2.gguf" >/dev/null 2>&1
expect 1 "target2.gguf: 2 blocks, fewer than --init-layers 3" -- "$SPECDEC" train --corpus "$T/train.txt" \
    --teacher "$T/target2.gguf" --init "$T/target2.gguf" --init-layers 3 $TINY --steps 1 --out "$T/t.gguf"
# both blocks kept, the copy is its teacher: KL 0 and acceptance 1 before any step;
# one block kept: the second block's work is missing, the KL is not 0
for n in 2 1; do
    expect 0 "layers 1\\|layers 2" -- "$SPECDEC" train --corpus "$T/train.txt" --val "$T/val.txt" --teacher "$T/target2.gguf" \
        --init "$T/target2.gguf" --init-layers $n $TINY --steps 1 --eval-every 1 --out "$T/t$n.gguf" --log "$T/t$n.tsv"
    grep -q "^# model: vocab 300 dim 16 layers $n " "$T/t$n.tsv" && ok || bad "t$n.tsv: not $n blocks"
    grep -q "^# initialised from .*target2.gguf, its first $n blocks" "$T/t$n.tsv" && ok || bad "t$n.tsv: no init line"
done
awk -F'\t' '!/^#/ && $1 == 0 { exit !($8 < 1e-4 && $9 > 0.999) }' "$T/t2.tsv" && ok || bad "--init-layers 2 of 2: not its teacher at step 0"
awk -F'\t' '!/^#/ && $1 == 0 { exit !($8 > 0.003 && $9 < 0.99) }' "$T/t1.tsv" && ok || bad "--init-layers 1 of 2: equals its teacher at step 0"
expect 0 "generated 3 tokens" -- "$SPECDEC" generate --model "$T/t1.gguf" --prompt "Call me" --max-tokens 3

# --- a checkpointed run stopped twice (on 1 thread, then 2) ends with the unbroken run's
# bytes, and its log with the unbroken log's rows (seconds aside); with a teacher too
for kind in target draft; do
    if [ $kind = target ]; then src="--vocab 300 --dim 16 --layers 2 --heads 2"; else src="--teacher $T/target.gguf --dim 8 --layers 1 --heads 2"; fi
    R="--corpus $T/train.txt --val $T/val.txt $src --ctx 16 --batch 2 --eval-tokens 64 --steps 9 --warmup 2 --eval-every 4 --log-every 2 --name r"
    "$SPECDEC" train $R --threads 2 --out "$T/r-$kind.gguf" --log "$T/r-$kind.tsv" >/dev/null 2>&1 || bad "unbroken $kind run"
    expect 0 "stopped at step 4/9 (--stop-after 4)" -- "$SPECDEC" train $R --threads 1 --checkpoint "$T/ck-$kind" \
        --checkpoint-every 3 --stop-after 4 --out "$T/s-$kind.gguf" --log "$T/s-$kind.tsv"
    [ ! -e "$T/s-$kind.gguf" ] && ok || bad "a stopped $kind run wrote its --out file"
    expect 0 "resuming from .*ck-$kind at step 4/9" -- "$SPECDEC" train $R --threads 2 --checkpoint "$T/ck-$kind" \
        --checkpoint-every 3 --stop-after 3 --out "$T/s-$kind.gguf" --log "$T/s-$kind.tsv"
    # a row written after the last checkpoint, as a stop between two checkpoints leaves it
    printf '8\t0\t0\tnan\t0\t0\tnan\tnan\tnan\t0\n' >> "$T/s-$kind.tsv"
    expect 0 "resuming from .*at step 7/9" -- "$SPECDEC" train $R --threads 2 --checkpoint "$T/ck-$kind" \
        --checkpoint-every 3 --out "$T/s-$kind.gguf" --log "$T/s-$kind.tsv"
    cmp -s "$T/r-$kind.gguf" "$T/s-$kind.gguf" && ok || bad "$kind: the resumed run's file differs from the unbroken run's"
    grep -v '^#' "$T/r-$kind.tsv" | cut -f1-5,7- > "$T/r.rows"
    grep -v '^#' "$T/s-$kind.tsv" | cut -f1-5,7- > "$T/s.rows"
    cmp -s "$T/r.rows" "$T/s.rows" && ok || bad "$kind: the resumed log's rows differ from the unbroken log's"
done
expect 1 "ck-target: the checkpoint is of another run: it has 'batch 2 steps 9 lr 0.002 .*this run: 'batch 2 steps 9 lr 0.01 " -- \
    "$SPECDEC" train --corpus "$T/train.txt" --val "$T/val.txt" --vocab 300 --dim 16 --layers 2 --heads 2 --ctx 16 --batch 2 \
    --eval-tokens 64 --steps 9 --warmup 2 --eval-every 4 --lr 1e-2 --checkpoint "$T/ck-target" --out "$T/x.gguf"
head -c 500 "$T/ck-target" > "$T/ck-short"
expect 1 "ck-short: the checkpoint's header is truncated\\|ck-short: the checkpoint is truncated" -- "$SPECDEC" train \
    --corpus "$T/train.txt" --val "$T/val.txt" --vocab 300 --dim 16 --layers 2 --heads 2 --ctx 16 --batch 2 --eval-tokens 64 \
    --steps 9 --warmup 2 --eval-every 4 --checkpoint "$T/ck-short" --out "$T/x.gguf"
expect 1 "train.txt: not a specdec training checkpoint" -- "$SPECDEC" train --corpus "$T/train.txt" --vocab 300 $TINY \
    --checkpoint "$T/train.txt" --out "$T/x.gguf"
expect 2 "--stop-after needs --checkpoint" -- "$SPECDEC" train --corpus "$T/train.txt" --vocab 300 --stop-after 2 --out "$T/x.gguf"

finish "train.sh"
