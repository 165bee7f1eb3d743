#!/usr/bin/env python3
"""Writes a tiny random-weight Llama GGUF, for checking ref_logits and specdec's
decoder against llama.cpp before a trained model exists.

Uses llama.cpp's own gguf-py (.cache/llama.cpp/gguf-py) and numpy; neither is a
specdec dependency (Debian: apt-get install python3-numpy python3-yaml; run it
with the python3 that has them, e.g. /usr/bin/python3).

The tokenizer (tokenizer.* keys) is copied from a vocab-only GGUF, by default
llama.cpp's models/ggml-vocab-llama-spm.gguf (SentencePiece, 32000 tokens), so
text prompts work too. Tensor names, shapes and metadata keys are those of
llama.cpp's "llama" architecture: a weight with `rows` outputs and `cols`
inputs is a numpy (rows, cols) array, GGUF dims {cols, rows}. Q and K are taken
as already in GGUF's rotary layout (llama.cpp's converter permutes HF weights
into it; random weights need no permutation).

Weights are Gaussian with std 1/sqrt(fan_in) (the embedding: std 1; the output
head: 2/sqrt(dim), logits of order 2), norms 1 + 0.1 N(0, 1): awkward values,
not ones. Deterministic for a given --seed (default 1234).

--arch writes the other architectures specdec runs, with gguf-py's own key
writers and tensor names (gguf.MODEL_ARCH, gguf.TENSOR_NAMES), so that a key or
name specdec misreads is not written by specdec alone: qwen2 (Q/K/V biases,
std 0.3), qwen3 (attn_q_norm/attn_k_norm of --head-dim, 1 + 0.1 N(0, 1); a head
size other than dim/heads is written as {arch}.attention.key_length and
value_length), llama3 (a llama with rope_freqs.weight computed as llama.cpp's
converter does from Llama 3.1's rope_scaling: factor 8, low/high frequency
factors 1 and 4, original context 8192).

usage: make_random_model.py [-o OUT.gguf] [--arch llama|llama3|qwen2|qwen3]
         [--type f32|f16|q8_0|q4_0|q4_1|q5_0|q5_1] [--dim 64] [--layers 2] [--heads 4]
         [--kv-heads 2] [--head-dim N] [--ffn 128] [--ctx 2048] [--rope-base B]
         [--eps E] [--vocab VOCAB.gguf] [--seed 1234] [--tied]
"""
import math
import argparse
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LLAMA_SRC = os.environ.get("LLAMA_SRC", os.path.join(ROOT, ".cache", "llama.cpp"))
sys.path.insert(0, os.path.join(LLAMA_SRC, "gguf-py"))

try:
    import numpy as np
    import gguf
except ImportError as e:  # numpy, yaml, or the gguf-py sources missing
    # A pyenv or venv python3 may lack numpy that Debian's python3 has: try that one once.
    if os.path.exists("/usr/bin/python3") and sys.executable != "/usr/bin/python3" \
            and not os.environ.get("MAKE_RANDOM_MODEL_REEXEC"):
        os.environ["MAKE_RANDOM_MODEL_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit(f"make_random_model.py: {e} (apt-get install python3-numpy python3-yaml; "
             f"gguf-py is looked for in {LLAMA_SRC}/gguf-py, from tests/fetch-llama-cpp.sh)")

FILE_TYPES = {  # --type: (ggml type of the 2-D weights, general.file_type)
    "f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "q4_0": (gguf.GGMLQuantizationType.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
    "q4_1": (gguf.GGMLQuantizationType.Q4_1, gguf.LlamaFileType.MOSTLY_Q4_1),
    "q5_0": (gguf.GGMLQuantizationType.Q5_0, gguf.LlamaFileType.MOSTLY_Q5_0),
    "q5_1": (gguf.GGMLQuantizationType.Q5_1, gguf.LlamaFileType.MOSTLY_Q5_1),
}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", default=os.path.join(ROOT, ".cache", "models", "random-llama-d64-l2.gguf"))
    ap.add_argument("--type", choices=sorted(FILE_TYPES), default="f32", help="2-D weights (norms stay f32)")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--arch", choices=["llama", "llama3", "qwen2", "qwen3"], default="llama")
    ap.add_argument("--head-dim", type=int, default=0, help="qwen3 only: head size other than dim/heads")
    ap.add_argument("--ffn", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=2048, help="llama.context_length")
    ap.add_argument("--rope-base", type=float, default=10000.0)
    ap.add_argument("--eps", type=float, default=1e-5, help="RMSNorm epsilon")
    ap.add_argument("--vocab", default=os.path.join(LLAMA_SRC, "models", "ggml-vocab-llama-spm.gguf"))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--tied", action="store_true", help="no output.weight: the head is token_embd (std 1: logits of order sqrt(dim))")
    a = ap.parse_args()
    if a.head_dim and a.arch != "qwen3":
        ap.error("--head-dim is qwen3's only")
    if a.dim % a.heads and not a.head_dim or a.heads % a.kv_heads:
        ap.error("--dim must be a multiple of --heads, and --heads of --kv-heads")
    if (a.head_dim or a.dim // a.heads) % 2:
        ap.error("head size (dim / heads) must be even for RoPE")
    if a.type not in ("f32", "f16") and (a.dim % 32 or a.ffn % 32):
        ap.error("--type q8_0/q4_0/q4_1/q5_0/q5_1 needs --dim and --ffn multiples of 32 (the block size)")
    return a


def copy_tokenizer(writer, vocab_path):
    """Copies the tokenizer.* keys; returns the vocabulary size."""
    reader = gguf.GGUFReader(vocab_path)
    n_vocab = None
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
        if field.name == "tokenizer.ggml.tokens":
            n_vocab = len(field.data)
    if not n_vocab:
        sys.exit(f"make_random_model.py: {vocab_path}: no tokenizer.ggml.tokens")
    return n_vocab


def add_weight(writer, name, array, qtype):
    array = np.ascontiguousarray(array, dtype=np.float32)
    if array.ndim == 1 or qtype == gguf.GGMLQuantizationType.F32:
        writer.add_tensor(name, array)
    elif qtype == gguf.GGMLQuantizationType.F16:
        writer.add_tensor(name, array.astype(np.float16))
    else:
        writer.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)


def llama3_factors(head, base):
    """Llama 3.1's rope_scaling as llama.cpp's converter turns it into rope_freqs."""
    factor, lo, hi, old_ctx = 8.0, 1.0, 4.0, 8192
    out = []
    for i in range(0, head, 2):
        wavelen = 2 * math.pi * base ** (i / head)
        if wavelen < old_ctx / hi:
            out.append(1.0)
        elif wavelen > old_ctx / lo:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def tname(t, bid=None):
    """gguf-py's name of tensor t (gguf.MODEL_TENSOR), of block bid."""
    return gguf.TENSOR_NAMES[t].format(bid=bid) + ".weight"


def main():
    a = parse_args()
    rng = np.random.default_rng(a.seed)
    qtype, file_type = FILE_TYPES[a.type]
    head = a.head_dim or a.dim // a.heads
    arch = {"llama": gguf.MODEL_ARCH.LLAMA, "llama3": gguf.MODEL_ARCH.LLAMA,
            "qwen2": gguf.MODEL_ARCH.QWEN2, "qwen3": gguf.MODEL_ARCH.QWEN3}[a.arch]

    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    w = gguf.GGUFWriter(a.out, gguf.MODEL_ARCH_NAMES[arch])
    w.add_name(f"random-{a.arch}-d{a.dim}-l{a.layers}-seed{a.seed}")
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.dim)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_rope_dimension_count(head)
    if head * a.heads != a.dim:
        w.add_key_length(head)
        w.add_value_length(head)
    w.add_rope_freq_base(a.rope_base)
    w.add_layer_norm_rms_eps(a.eps)
    w.add_file_type(file_type)
    n_vocab = copy_tokenizer(w, a.vocab)
    w.add_vocab_size(n_vocab)

    def gauss(rows, cols, std):
        return rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(std)

    def norm():
        return 1.0 + 0.1 * rng.standard_normal(a.dim, dtype=np.float32)

    T = gguf.MODEL_TENSOR
    add_weight(w, tname(T.TOKEN_EMBD), gauss(n_vocab, a.dim, 1.0), qtype)
    if a.arch == "llama3":
        add_weight(w, tname(T.ROPE_FREQS), llama3_factors(head, a.rope_base), qtype)
    for i in range(a.layers):
        p = f"blk.{i}."
        add_weight(w, p + "attn_norm.weight", norm(), qtype)
        if a.arch == "qwen2":
            for t, n in ((T.ATTN_Q, a.heads), (T.ATTN_K, a.kv_heads), (T.ATTN_V, a.kv_heads)):
                bias = 0.3 * rng.standard_normal(n * head, dtype=np.float32)
                add_weight(w, gguf.TENSOR_NAMES[t].format(bid=i) + ".bias", bias, qtype)
        if a.arch == "qwen3":
            for t in (T.ATTN_Q_NORM, T.ATTN_K_NORM):
                add_weight(w, tname(t, i), 1.0 + 0.1 * rng.standard_normal(head, dtype=np.float32), qtype)
        add_weight(w, p + "attn_q.weight", gauss(a.heads * head, a.dim, a.dim ** -0.5), qtype)
        add_weight(w, p + "attn_k.weight", gauss(a.kv_heads * head, a.dim, a.dim ** -0.5), qtype)
        add_weight(w, p + "attn_v.weight", gauss(a.kv_heads * head, a.dim, a.dim ** -0.5), qtype)
        add_weight(w, p + "attn_output.weight", gauss(a.dim, a.heads * head, (a.heads * head) ** -0.5), qtype)
        add_weight(w, p + "ffn_norm.weight", norm(), qtype)
        add_weight(w, p + "ffn_gate.weight", gauss(a.ffn, a.dim, a.dim ** -0.5), qtype)
        add_weight(w, p + "ffn_up.weight", gauss(a.ffn, a.dim, a.dim ** -0.5), qtype)
        add_weight(w, p + "ffn_down.weight", gauss(a.dim, a.ffn, a.ffn ** -0.5), qtype)
    add_weight(w, "output_norm.weight", norm(), qtype)
    if not a.tied:
        add_weight(w, "output.weight", gauss(n_vocab, a.dim, 2.0 * a.dim ** -0.5), qtype)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{a.out}: {a.arch} dim {a.dim} layers {a.layers} heads {a.heads}/{a.kv_heads} "
          f"ffn {a.ffn} vocab {n_vocab} type {a.type} seed {a.seed}")


if __name__ == "__main__":
    main()
