#!/bin/sh
# Command-line tests of the architectures beyond the plain llama block (qwen2, qwen3,
# Llama 3.x): random-model --arch, a draft/target pair whose vocabularies differ, the
# speculative decoder certified on a qwen2 pair (and on a K-quant one), and, on files
# with llama.cpp's real test vocabularies written both by specdec and by llama.cpp's own gguf-py writer,
# the logits and the greedy text against llama.cpp's.
# The llama.cpp part needs its test vocabularies (.cache/llama.cpp/models, from
# tests/fetch-llama-cpp.sh), numpy for gguf-py and a llama.cpp build with ref_logits
# and llama-completion (tests/bench/llamacpp/build.sh; LLAMA_BUILD=DIR to point at one):
# without them that part is skipped, saying so.
# usage: arch.sh path/to/specdec
SPECDEC=${1:-build/specdec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SHAPE=64,2,4,2,128,300

# --- random-model --arch: usage, and what the files say of themselves ---
expect 2 "--arch: architecture 'gemma': not one of llama, llama3, qwen2, qwen3" -- \
    "$SPECDEC" random-model --out "$T/x.gguf" --arch gemma
expect 2 "a head size 32 other than DIM/HEADS is qwen3's only" -- \
    "$SPECDEC" random-model --out "$T/x.gguf" --arch qwen2 --shape $SHAPE,32
expect 1 "no such file\|cannot open" -- "$SPECDEC" random-model --out "$T/x.gguf" --vocab "$T/none.gguf" --shape $SHAPE
for a in llama3 qwen2 qwen3; do
    s=$SHAPE; [ $a = qwen3 ] && s=$SHAPE,32
    expect 0 "($a, dim 64, 2 layers, 4/2 heads of 1\?[0-9]*, ffn 128, vocab 300, Q8_0)" -- \
        "$SPECDEC" random-model --out "$T/$a.gguf" --arch $a --shape $s --type q8_0 --ctx 64
    expect 0 "generated 6 tokens" -- "$SPECDEC" generate --model "$T/$a.gguf" --prompt "t1 t2" --max-tokens 6 --temperature 0
done
# the draft: the same weights in Q4_0 (close to the target, so that the planted bug shows)
"$SPECDEC" random-model --out "$T/qwen2-d.gguf" --arch qwen2 --shape $SHAPE --type q4_0 --ctx 64 2>/dev/null \
    || bad "random-model the qwen2 draft"

# --- a draft and a target must share a vocabulary: the size, then the tokens ---
"$SPECDEC" random-model --out "$T/v280.gguf" --arch qwen2 --shape 64,2,4,2,128,280 --ctx 64 --type q8_0 2>/dev/null \
    || bad "random-model v280"
expect 1 "vocabulary of 280 tokens, .*qwen2.gguf of 300" -- \
    "$SPECDEC" decode --target "$T/qwen2.gguf" --draft "$T/v280.gguf" --prompt "t1" --max-tokens 2 --quiet
tiny_models "$T" 64 # m.gguf: a trained BPE tokenizer of 300 tokens, as many as qwen2.gguf's
expect 1 "the draft .*m.gguf and the target .*qwen2.gguf have different vocabularies: token 0 is '.*' in the draft, '<unk>' in the target" -- \
    "$SPECDEC" decode --target "$T/qwen2.gguf" --draft "$T/m.gguf" --prompt "t1" --max-tokens 2 --quiet
expect 1 "have different vocabularies: token 0" -- \
    "$SPECDEC" generate --model "$T/qwen2.gguf" --draft "$T/m.gguf" --log-logits "$T/l.safetensors" --prompt "t1" --max-tokens 2
expect 1 "have different vocabularies: token 0" -- \
    "$SPECDEC" certify --scheme sd --lm "gguf:$T/m.gguf,$T/qwen2.gguf"

# --- the speculative decoder on a qwen2 pair: greedy identity for every scheme, and the
# law of its first two tokens certified (400 runs at temperature 0.3, where the pair test
# has power >= 0.9 against the planted argmax-draft bug; at 1 the random model's law is
# too flat for 400 runs) ---
expect 0 "" -- "$SPECDEC" decode --target "$T/qwen2.gguf" --draft "$T/qwen2-d.gguf" --prompt "t1 t2 t3" \
    --max-tokens 12 --scheme all --check --quiet
S="$SPECDEC decode --target $T/qwen2.gguf --draft $T/qwen2-d.gguf --prompt {prompt} --max-tokens 2 --seed {seed} --ids --threads 1 --quiet --temperature 0.3"
expect 0 "== PASS at p >= 1e-06" -- "$SPECDEC" certify --decoder "$S --scheme spectr" --target "$T/qwen2.gguf" \
    --prompt "t1 t2" --samples 400 --temperature 0.3 --draft "$T/qwen2-d.gguf" --planted argmax-draft
# the same on a K-quant pair (rows of 256): target Q6_K, draft the same weights as Q4_K_M
KS=256,2,4,2,512,300
"$SPECDEC" random-model --out "$T/qk-t.gguf" --arch qwen2 --shape $KS --type q6_k --ctx 64 2>/dev/null || bad "random-model q6_k"
"$SPECDEC" random-model --out "$T/qk-d.gguf" --arch qwen2 --shape $KS --type q4_k_m --ctx 64 2>/dev/null || bad "random-model q4_k_m"
expect 0 "Q4_K_M; rows not of 256: Q5_0 and Q8_0" -- "$SPECDEC" random-model --out "$T/x.gguf" --shape $SHAPE --type q4_k_m
expect 1 "rows of 48 are not whole Q4_K blocks nor Q5_0" -- "$SPECDEC" random-model --out "$T/x.gguf" \
    --shape 48,2,4,2,128,300 --type q4_k_m
expect 0 "" -- "$SPECDEC" decode --target "$T/qk-t.gguf" --draft "$T/qk-d.gguf" --prompt "t1 t2 t3" \
    --max-tokens 12 --scheme all --check --quiet
S="$SPECDEC decode --target $T/qk-t.gguf --draft $T/qk-d.gguf --prompt {prompt} --max-tokens 2 --seed {seed} --ids --threads 1 --quiet --temperature 0.3"
expect 0 "== PASS at p >= 1e-06" -- "$SPECDEC" certify --decoder "$S --scheme spectr" --target "$T/qk-t.gguf" \
    --prompt "t1 t2" --samples 400 --temperature 0.3 --draft "$T/qk-d.gguf" --planted argmax-draft

# --- against llama.cpp, on files with real vocabularies ---
VOC=$ROOT/.cache/llama.cpp/models
LB=
for d in "${LLAMA_BUILD:-}" "$ROOT/.cache/llama.cpp-build" "$ROOT/out/llama.cpp-build"; do
    if [ -n "$d" ] && [ -x "$d/bin/ref_logits" ] && [ -x "$d/bin/llama-completion" ]; then LB=$d/bin; break; fi
done
PY=python3
$PY -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3
BENCH=$(dirname "$SPECDEC")/tests/bench/bench_llamacpp
why=
[ -f "$VOC/ggml-vocab-qwen2.gguf" ] && [ -f "$VOC/ggml-vocab-llama-bpe.gguf" ] || why="no llama.cpp test vocabularies in $VOC (tests/fetch-llama-cpp.sh)"
[ -z "$why" ] && [ -z "$LB" ] && why="no llama.cpp build with ref_logits and llama-completion (tests/bench/llamacpp/build.sh)"
[ -z "$why" ] && ! $PY -c 'import numpy' 2>/dev/null && why="no numpy for llama.cpp's gguf-py writer"
[ -z "$why" ] && [ ! -x "$BENCH" ] && why="no $BENCH (make test builds it)"
if [ -n "$why" ]; then
    echo "cli arch: skipped: the comparison with llama.cpp: $why"
    finish "cli arch"
    exit
fi
# the build's own libraries, wherever it was linked (its run path may name another tree)
export LD_LIBRARY_PATH="$LB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
MK="$PY $ROOT/tests/bench/llamacpp/make_random_model.py"
# 48 tokens spread over the vocabularies (positions to 47: llama3's factors and NEOX's
# halves turn visibly)
TOK=$(seq 5 997 47000 | head -48 | paste -sd, -)
# Tolerance, relative to the largest logit, by weight type: F32 1e-5 (both sum in F32 in
# different orders: 2.5e-7 to 5.8e-7 measured); Q8_0 and Q4_0 3e-2 (both round the
# activations to Q8 blocks, in integers: bit-identical or 9.5e-8 on most files, but one
# activation rounded to the other side of a Q8 step moves a logit by up to ~1/127 of its
# block: 7.3e-3 measured on a qwen2 file); F16 5e-3 (llama.cpp also rounds the
# activations to F16, 2^-11 each, specdec does not: 6.6e-4 to 8.3e-4 measured); Q4_K,
# Q5_K, Q6_K 3e-2 (both round the activations to Q8_K blocks of 256 and sum in integers;
# each kernel equals llama.cpp's vec_dot bit for bit, and a Q8_0 model with any one
# matrix kind in Q6_K gives identical logits, but whole K files differ by 2e-7 to 5e-7
# in llama.cpp's own summation somewhere, and as for Q8_0 one activation then rounded to
# the other side of a step moves a logit: 1.4e-2 on the qwen2 Q6_K file from position
# ~20 on). An argmax may differ only at a near-tie of llama.cpp's, within the tolerance.
check_logits() { # FILE TOL LABEL
    if ! "$LB/ref_logits" -m "$1" -o "$T/ref.npy" --tokens "$TOK" >"$T/ref.log" 2>&1; then
        bad "$3: ref_logits failed: $(tail -2 "$T/ref.log")"; return; fi
    out=$("$BENCH" "$1" "$T/ref.npy" "$TOK" --max-rel "$2" 2>&1) && ok || bad "$3 (tolerance $2): $out"
    echo "$3: $(printf '%s' "$out" | sed -n 2p | sed 's/^specdec one pass *//')"
}
for a in qwen2 qwen3 llama3; do
    v=$VOC/ggml-vocab-qwen2.gguf; s=64,2,4,2,128,0; base=1e6; eps=1e-6; hd=
    [ $a = llama3 ] && v=$VOC/ggml-vocab-llama-bpe.gguf base=500000 eps=1e-5
    [ $a = qwen3 ] && s=$s,32 hd="--head-dim 32"
    types="f32 q8_0"; [ $a = qwen3 ] && types="f32 q8_0 f16 q4_0"
    for ty in $types; do
        tol=3e-2; [ $ty = f32 ] && tol=1e-5; [ $ty = f16 ] && tol=5e-3
        "$SPECDEC" random-model --arch $a --vocab "$v" --type $ty --shape $s --ctx 256 --out "$T/sd-$a.gguf" \
            2>/dev/null || bad "random-model $a $ty"
        check_logits "$T/sd-$a.gguf" $tol "specdec-written $a $ty"
    done
    $MK --arch $a $hd --vocab "$v" --rope-base $base --eps $eps --ctx 256 -o "$T/py-$a.gguf" >/dev/null \
        || bad "gguf-py $a"
    check_logits "$T/py-$a.gguf" 1e-5 "gguf-py-written $a f32"
    # the K-quants (gguf-py has no K quantizer: these files are specdec's), rows of 256
    for ty in q4_k_m q5_k_m q6_k; do
        "$SPECDEC" random-model --arch $a --vocab "$v" --type $ty --shape 256,2,4,2,512,0 --ctx 256 \
            --out "$T/sdk-$a.gguf" 2>/dev/null || bad "random-model $a $ty"
        check_logits "$T/sdk-$a.gguf" 3e-2 "specdec-written $a $ty"
        [ $a = llama3 ] && [ $ty = q4_k_m ] && cp "$T/sdk-$a.gguf" "$T/sdk-greedy.gguf"
    done
done
# The types of blocks of 32 as gguf-py's own quantizers (numpy, ggml's reference
# rounding) lay them out, so that a block layout is not specdec's alone; then
# Qwen2.5-0.5B's case: Q4_K_M and Q5_K_M of rows that are not whole super-blocks (dim
# 160 here, 896 there), which llama.cpp stores as Q5_0 / Q5_1 (Q8_0 for Q6_K's). Both
# sides round the activations to Q8 blocks and sum in integers, the min terms of Q4_1 /
# Q5_1 in block order: the same tolerance as Q8_0's (0 to 8.9e-8 measured).
v=$VOC/ggml-vocab-qwen2.gguf
for ty in q8_0 q4_0 q4_1 q5_0 q5_1; do
    $MK --arch qwen2 --type $ty --vocab "$v" --rope-base 1e6 --eps 1e-6 --ctx 256 -o "$T/pyq.gguf" >/dev/null \
        || bad "gguf-py qwen2 $ty"
    check_logits "$T/pyq.gguf" 3e-2 "gguf-py-written qwen2 $ty"
done
for ty in q4_k_m q5_k_m; do
    expect 0 "Q._K_M; rows not of 256: Q5_. and Q8_0" -- "$SPECDEC" random-model --arch qwen2 --vocab "$v" \
        --type $ty --shape 160,2,5,1,512,0 --ctx 256 --out "$T/sd160.gguf"
    check_logits "$T/sd160.gguf" 3e-2 "specdec-written qwen2 $ty, rows of 160"
done
# greedy text: 20 prompts on the llama3 file and on specdec's llama3 Q4_K_M file, the
# first 5 on the qwen ones (each
# llama-completion run reads a vocabulary of 128k-152k tokens: 1.5 s on a quiet core),
# 16 tokens each, on the gguf-py files, byte for byte, against
# llama-completion with the K/V cache in F32 and flash attention off (its defaults, F16
# K/V, move the logits by ~2e-3: on random weights a near-tie then flips, as llama-simple
# did on the llama3 file at a gap of 4e-5); it prints the prompt, then the text, then
# two newlines). On the K-quant file 2 of the 20 may differ: its logits differ from
# llama.cpp's by ~1e-7 (above), and 16 greedy tokens of random weights pass near-ties.
cat > "$T/prompts.txt" <<'EOF'
Hello world
The capital of France is
Once upon a time
def fibonacci(n):
In 1492, Columbus
The quick brown fox
Speculative decoding is
int main(void) {
Water boils at
My favourite colour is
The sea was calm and
Call me Ishmael.
1, 2, 3, 4,
To be or not to be
The weather today
A draft model proposes
SELECT * FROM
Il était une fois
Photosynthesis converts
import numpy as np
EOF
for a in qwen2 qwen3 llama3 k; do
    same=0 n=5; [ $a = llama3 ] || [ $a = k ] && n=20
    f=$T/py-$a.gguf; [ $a = k ] && f=$T/sdk-greedy.gguf a="llama3 Q4_K_M"
    head -n $n "$T/prompts.txt" > "$T/pr.txt"
    while IFS= read -r p; do
        want=$(timeout 60 "$LB/llama-completion" -m "$f" -p "$p" -n 16 --temp 0 -ctk f32 -ctv f32 \
            -fa off -no-cnv -t 1 -c 256 --no-warmup </dev/null 2>/dev/null)
        got=$(timeout 60 "$SPECDEC" generate --model "$f" --prompt "$p" --max-tokens 16 --temperature 0 \
            --threads 2 2>/dev/null)
        if [ "$want" = "$p$got" ]; then same=$((same + 1)); else echo "$a '$p': llama.cpp '$want', specdec '$p$got'"; fi
    done < "$T/pr.txt"
    need=$n; [ "$a" = "llama3 Q4_K_M" ] && need=$((n - 2))
    [ $same -ge $need ] && ok || bad "$a: greedy text identical for $same of $n prompts (at least $need)"
    echo "$a: greedy text identical to llama-completion's for $same of $n prompts"
done
finish "cli arch"
