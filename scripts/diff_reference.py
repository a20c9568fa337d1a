#!/usr/bin/env python3
"""Independent, naive numpy reference of `kvrank diff`'s head similarity (docs/diff.md).

Builds every head's d×d form A_h in model A and B_h in model B explicitly (scripts/reference.py's
readers) and prints cos(A_h, B_h) = ⟨A_h, B_h⟩_F / (‖A_h‖_F ‖B_h‖_F) per layer and head — kvrank
itself forms no d×d matrix (cross-Grams of the projections), so agreement checks that route.

  diff_reference.py llama A B [--repr qk|ov|k|v]   two llama-layout checkpoints (file or folder)
  diff_reference.py heads A.npz B.npz              explicit factors layer{i}.L, layer{i}.R
                                                   ([H, d, k], A_h = L_h R_hᵀ; the test writers')

Prints {"layers": [{"layer": i, "head_similarity": [... null for a zero head ...]}]}.
stdlib + numpy only.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402  (the readers and the explicit forms)


def cosine(a, b):
    """cos of two explicit forms; None when either is zero (a pruned head)."""
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return None
    return float(np.clip(np.sum(a * b) / (na * nb), -1.0, 1.0))


def similarities(layers_a, layers_b):
    """layers_*: [(layer, [A_h])]; the two must hold the same layers and heads."""
    out = []
    for (i, forms_a), (j, forms_b) in zip(layers_a, layers_b, strict=True):
        assert i == j and len(forms_a) == len(forms_b), "the models differ in shape"
        out.append({"layer": i,
                    "head_similarity": [cosine(a, b) for a, b in zip(forms_a, forms_b)]})
    return out


def npz_forms(path):
    data = dict(np.load(path))
    layers = sorted(int(k[len("layer"):-len(".L")]) for k in data if k.endswith(".L"))
    for i in layers:
        left = data[f"layer{i}.L"].astype(np.float64)
        right = data[f"layer{i}.R"].astype(np.float64)
        yield i, [left[h] @ right[h].T for h in range(left.shape[0])]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    llama = sub.add_parser("llama")
    llama.add_argument("a")
    llama.add_argument("b")
    llama.add_argument("--repr", default="qk", choices=["qk", "ov", "k", "v"])
    heads = sub.add_parser("heads")
    heads.add_argument("a")
    heads.add_argument("b")
    args = parser.parse_args()
    if args.command == "llama":
        layers = similarities(reference.llama_forms(args.a, args.repr),
                              reference.llama_forms(args.b, args.repr))
    else:
        layers = similarities(npz_forms(args.a), npz_forms(args.b))
    json.dump({"layers": layers}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
