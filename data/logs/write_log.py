#!/usr/bin/env python3
"""Write draft/target logits in the formats `specdec replay` reads.

Needs only numpy. Call `write_npy_log` or `write_safetensors_log` from your own
generation loop (PyTorch: `logits.float().cpu().numpy()`), or run this file to
write a small random example:

    python3 write_log.py example            -> example.draft.npy, example.target.npy, example.tokens.npy
    python3 write_log.py example.safetensors

Shapes: [positions, V] or [sequences, positions, V]; row i holds the logits that
predicted the token at position i (before any temperature: specdec applies
--temperature/--top-k/--top-p at replay time). tokens (optional) holds the token
emitted at each position.
"""
import json
import struct
import sys

import numpy as np

_DTYPES = {np.float16: "F16", np.float32: "F32", np.float64: "F64", np.int64: "I64"}


def write_npy_log(prefix, draft_logits, target_logits, tokens=None):
    """prefix.draft.npy, prefix.target.npy (and prefix.tokens.npy)."""
    np.save(prefix + ".draft.npy", np.ascontiguousarray(draft_logits))
    np.save(prefix + ".target.npy", np.ascontiguousarray(target_logits))
    if tokens is not None:
        np.save(prefix + ".tokens.npy", np.ascontiguousarray(tokens, dtype=np.int64).astype(np.float64))


def write_safetensors_log(path, draft_logits, target_logits, tokens=None, metadata=None):
    """One .safetensors file: draft_logits, target_logits, tokens, and string metadata."""
    tensors = {"draft_logits": draft_logits, "target_logits": target_logits}
    if tokens is not None:
        tensors["tokens"] = np.asarray(tokens, dtype=np.int64)
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        dtype = _DTYPES[array.dtype.type]
        blob = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "example"
    rng = np.random.default_rng(2385)
    positions, vocab = 64, 100
    target = rng.normal(size=(positions, vocab)).astype(np.float32) * 2
    draft = (target + rng.normal(size=(positions, vocab)).astype(np.float32)) * 0.8
    tokens = rng.integers(0, vocab, size=positions)
    if out.endswith(".safetensors"):
        write_safetensors_log(out, draft, target, tokens, {"draft": "example", "target": "example"})
    else:
        write_npy_log(out, draft, target, tokens)
