#!/usr/bin/env python3
"""Measures how much each GGUF type kvrank reads moves erank, for docs/quantization.md.

  measure_quantization.py KVRANK [--demo mha gqa mqa]

For each model — the trained demo models data/tiny/{mha,gqa,mqa} (d = 128; --demo picks) and a Gaussian
llama-layout model with d = 256 written by write_family_checkpoints.py (K-quants and IQ4_XS need
rows of whole 256-value blocks; on d = 128 llama-quantize, and tests/writers/write_gguf.py, fall back to
F16) — and each type, writes the GGUF with tests/writers/write_gguf.py, runs `kvrank analyze --repr
qk,ov` on it and on the original, and prints a markdown table: ε (the largest relative Frobenius
error of a stored attention weight) and the largest |Δ erank| over layers and representations.
stdlib + numpy only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "writers"))
import reference  # noqa: E402
import write_family_checkpoints  # noqa: E402
import write_gguf  # noqa: E402

TYPES = ["F16", "BF16", "Q8_0", "Q6_K", "Q5_K", "Q5_1", "Q5_0", "Q4_K", "Q4_1", "Q4_0", "IQ4_NL",
         "IQ4_XS", "Q3_K", "Q2_K"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def erank(kvrank, path):
    out = subprocess.run([kvrank, "-q", "analyze", path, "--repr", "qk,ov", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    return {(m["repr"], layer["layer"]): layer["erank"]
            for m in json.loads(out)["models"] for layer in m["layers"]}


def epsilon(held, original):
    a, b = reference.load_llama(held)[1], reference.load_llama(original)[1]
    return max(float(np.linalg.norm(a[k] - b[k]) / np.linalg.norm(b[k])) for k in a
               if k.endswith("_proj.weight"))


def measure(kvrank, name, src, work):
    base = erank(kvrank, src)
    config = reference.load_llama(src)[0]
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    widths = {config["hidden_size"], heads * head_dim}
    rows = []
    for type_name in TYPES:
        if any(width % write_gguf.BLOCK[type_name] for width in widths):
            rows.append((None, 0.0, 0.0))  # the writer would fall back to F16, as llama-quantize
            continue
        path, held = os.path.join(work, f"{name}-{type_name}.gguf"), os.path.join(work, f"{name}-{type_name}")
        write_gguf.convert(src, path, type_name, dequantized=held, vocabulary_size=10)
        got = erank(kvrank, path)
        moved = max(abs(got[key] - base[key]) for key in base)
        rows.append((type_name, epsilon(held, src), moved))
        print(name, type_name, rows[-1], file=sys.stderr)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kvrank")
    parser.add_argument("--demo", nargs="*", default=["mha", "gqa", "mqa"],
                        help="demo models under data/tiny to measure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        gaussian = os.path.join(work, "gaussian")
        write_family_checkpoints.write_family("llama", gaussian, gaussian + "-ref", layers=2, heads=8,
                                              kv_heads=2, head_dim=32, d_model=256)
        models = [(f"data/tiny/{v}", os.path.join(ROOT, "data", "tiny", v)) for v in args.demo]
        models.append(("Gaussian d=256, H=8, H_kv=2", gaussian))
        results = {name: measure(args.kvrank, name.replace("/", "_").split(",")[0].replace(" ", "_"),
                                 src, work) for name, src in models}
    names = list(results)
    print("| type | " + " | ".join(f"{n}: ε, max \\|Δ erank\\|" for n in names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for i, type_name in enumerate(TYPES):
        cells = []
        for n in names:
            stored, eps, moved = results[n][i]
            cells.append(f"{eps:.2g}, {moved:.2g}" if stored == type_name else "—")
        print(f"| {type_name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
