#!/usr/bin/env python3
"""The "straightforward numpy implementation" of the metric (docs/metric.md) that scripts/bench.sh times next to kvrank.

What a researcher would write first: per layer, read q_proj and k_proj (bf16/f16/f32 safetensors,
memory-mapped), form every d×d head matrix A_h = W_Q^h W_K^hᵀ in float32, S from their Frobenius inner
products (one matrix product of the flattened heads), eigvalsh of S and of J S J, and the per-head
singular values with numpy.linalg.svd. Same outputs as kvrank's qk metrics; no factor-Gram tricks.

  bench_numpy.py CHECKPOINT_DIR [--max-layers N]

Prints the seconds it took; with --max-layers it analyses only the first N layers and prints the time
extrapolated to all layers (the 2.5B/7B shapes take far too long to run in full).
stdlib + numpy only.
"""
import argparse
import json
import os
import re
import struct
import sys
import time

import numpy as np


def open_safetensors(path):
    """name → lazily converted float32 array over a memory map."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    base = 8 + size
    views = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        views[name] = (raw[base + start:base + end], info["dtype"], info["shape"])
    return views


def as_float32(view):
    buf, dtype, shape = view
    if dtype == "BF16":
        return (buf.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    return buf.view({"F32": "<f4", "F16": "<f2"}[dtype]).astype(np.float32).reshape(shape)


def effective_rank(w):
    w = np.clip(w, 0, None)
    if w.sum() <= 0:
        return 0.0
    p = w[w > 0] / w.sum()
    return float(np.exp(-(p * np.log(p)).sum()))


def analyze_layer(wq, wk, heads, kv_heads, head_dim):
    group = heads // kv_heads
    a = np.stack([wq[h * head_dim:(h + 1) * head_dim].T @
                  wk[(h // group) * head_dim:(h // group + 1) * head_dim] for h in range(heads)])
    flat = a.reshape(heads, -1).astype(np.float64)
    inner = flat @ flat.T
    norms = np.sqrt(np.diag(inner))
    s = inner / np.outer(norms, norms)
    j = np.eye(heads) - 1.0 / heads
    erank = effective_rank(np.linalg.eigvalsh(s))
    erank_c = effective_rank(np.linalg.eigvalsh(j @ s @ j))
    head_erank = [effective_rank(np.linalg.svd(a[h], compute_uv=False)) for h in range(heads)]
    return erank, erank_c, head_erank


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--max-layers", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    with open(os.path.join(args.checkpoint, "config.json")) as f:
        config = json.load(f)
    views = {}
    for name in sorted(os.listdir(args.checkpoint)):
        if name.endswith(".safetensors"):
            views.update(open_safetensors(os.path.join(args.checkpoint, name)))
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    layers = sorted({int(m.group(1)) for k in views
                     if (m := re.match(r"model\.layers\.(\d+)\.self_attn\.q_proj\.weight$", k))})
    todo = layers[:args.max_layers] if args.max_layers else layers
    for i in todo:
        wq = as_float32(views[f"model.layers.{i}.self_attn.q_proj.weight"])
        wk = as_float32(views[f"model.layers.{i}.self_attn.k_proj.weight"])
        erank, erank_c, _ = analyze_layer(wq, wk, heads, kv_heads, head_dim)
        print(f"layer {i}: erank {erank:.4f} centred {erank_c:.4f}", file=sys.stderr)
    elapsed = time.perf_counter() - start
    print(f"{elapsed * len(layers) / len(todo):.3f}")


if __name__ == "__main__":
    main()
