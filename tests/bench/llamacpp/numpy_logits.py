#!/usr/bin/env python3
"""The Llama forward pass in float64 numpy, straight from a GGUF file: a third
implementation beside llama.cpp (ref_logits) and specdec, small enough to read,
that states the conventions a GGUF "llama" file implies:

  - a weight with numpy shape (rows, cols) = GGUF dims {cols, rows} maps x -> W @ x;
  - RMSNorm: x / sqrt(mean(x^2) + eps) * w, eps from llama.attention.layer_norm_rms_epsilon;
  - RoPE (llama.cpp's "normal" mode, the one for arch llama): rotates ADJACENT pairs
    (x[2i], x[2i+1]) of each head by pos * base^(-2i/head_size); llama.cpp's
    converter permutes HF's q/k weights so that this equals HF's half-split rotation;
  - grouped-query attention: query head h reads kv head h // (heads / kv_heads),
    scores scaled by 1/sqrt(head_size), causal;
  - FFN: down(silu(gate(x)) * up(x)); residual around attention and FFN;
  - head: output.weight, or token_embd.weight when the file has no output.weight.

Quantized weights (Q8_0, Q4_0, ...) are dequantized with gguf-py; the activations
are not quantized, unlike llama.cpp's CPU kernels, so expect ~1e-2 differences on
such files and ~1e-6 on F32 ones.

usage: numpy_logits.py MODEL.gguf (--tokens 1,15043,3186 | --from-json REF.json)
                       [-o OUT.npy] [--check A.npy [B.npy ...]]
  --from-json  reads the token ids from ref_logits --json output
  --check      prints max |difference| and argmax agreement against each file
Needs numpy and llama.cpp's gguf-py (.cache/llama.cpp/gguf-py); not a specdec dependency.
"""
import argparse
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LLAMA_SRC = os.environ.get("LLAMA_SRC", os.path.join(ROOT, ".cache", "llama.cpp"))
sys.path.insert(0, os.path.join(LLAMA_SRC, "gguf-py"))
try:
    import numpy as np
    import gguf
except ImportError as e:
    if os.path.exists("/usr/bin/python3") and sys.executable != "/usr/bin/python3" \
            and not os.environ.get("NUMPY_LOGITS_REEXEC"):
        os.environ["NUMPY_LOGITS_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit(f"numpy_logits.py: {e} (apt-get install python3-numpy python3-yaml)")


def load(path):
    r = gguf.GGUFReader(path)
    meta = {k: f.contents() for k, f in r.fields.items() if not k.startswith("tokenizer.")}
    if meta.get("general.architecture") != "llama":
        sys.exit(f"numpy_logits.py: {path}: architecture {meta.get('general.architecture')!r}, not 'llama'")
    weights = {}
    for t in r.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type) if t.tensor_type not in (
            gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16) else np.asarray(t.data)
        weights[t.name] = w.astype(np.float64).reshape(tuple(int(d) for d in reversed(t.shape)))
    return meta, weights


def forward(meta, W, tokens):
    dim = meta["llama.embedding_length"]
    n_layer = meta["llama.block_count"]
    n_head = meta["llama.attention.head_count"]
    n_kv = meta.get("llama.attention.head_count_kv", n_head)
    eps = meta["llama.attention.layer_norm_rms_epsilon"]
    base = meta.get("llama.rope.freq_base", 10000.0)
    hd = dim // n_head
    n = len(tokens)

    def rmsnorm(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    angle = np.arange(n)[:, None] * base ** (-np.arange(0, hd, 2) / hd)[None, :]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]

    def rope(v):  # (n, heads, hd): adjacent pairs
        even, odd = v[..., 0::2], v[..., 1::2]
        out = np.empty_like(v)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    causal = np.triu(np.full((n, n), -np.inf), 1)
    x = W["token_embd.weight"][tokens]
    for layer in range(n_layer):
        p = f"blk.{layer}."
        h = rmsnorm(x, W[p + "attn_norm.weight"])
        q = rope((h @ W[p + "attn_q.weight"].T).reshape(n, n_head, hd))
        k = rope((h @ W[p + "attn_k.weight"].T).reshape(n, n_kv, hd))
        v = (h @ W[p + "attn_v.weight"].T).reshape(n, n_kv, hd)
        att = np.empty((n, n_head, hd))
        for head in range(n_head):
            kv = head // (n_head // n_kv)
            s = q[:, head] @ k[:, kv].T / np.sqrt(hd) + causal
            s = np.exp(s - s.max(1, keepdims=True))
            att[:, head] = (s / s.sum(1, keepdims=True)) @ v[:, kv]
        x = x + att.reshape(n, dim) @ W[p + "attn_output.weight"].T
        h = rmsnorm(x, W[p + "ffn_norm.weight"])
        gate = h @ W[p + "ffn_gate.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * (h @ W[p + "ffn_up.weight"].T)) @ W[p + "ffn_down.weight"].T
    head_w = W.get("output.weight", W["token_embd.weight"])
    return rmsnorm(x, W["output_norm.weight"]) @ head_w.T


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokens", help="comma- or space-separated token ids")
    src.add_argument("--from-json", help="ref_logits --json output holding 'tokens'")
    ap.add_argument("-o", "--out", help="write the logits as float32 .npy")
    ap.add_argument("--check", nargs="+", default=[], help=".npy files of shape (n_tokens, n_vocab)")
    a = ap.parse_args()
    if a.tokens is not None:
        tokens = [int(t) for t in a.tokens.replace(",", " ").split()]
    else:
        with open(a.from_json) as f:
            tokens = json.load(f)["tokens"]
    meta, W = load(a.model)
    logits = forward(meta, W, tokens)
    if a.out:
        np.save(a.out, logits.astype(np.float32))
    print(f"numpy: n_tokens {len(tokens)} n_vocab {logits.shape[1]} max_abs {np.abs(logits).max():.6g}")
    worst = 0.0
    for path in a.check:
        other = np.load(path).astype(np.float64)
        if other.shape != logits.shape:
            sys.exit(f"numpy_logits.py: {path}: shape {other.shape}, expected {logits.shape}")
        d = np.abs(other - logits).max()
        worst = max(worst, d)
        agree = (other.argmax(1) == logits.argmax(1)).mean()
        print(f"{path}: max |diff| {d:.3g}, argmax agrees at {agree:.1%} of positions")


if __name__ == "__main__":
    main()
