#!/usr/bin/env python3
"""Validation of `kvrank plan`'s criteria on data/tiny/mha (docs/plan.md, "Validation").

For every layer, converts that layer alone to G KV heads with every equal partition of its 8
heads (105 pairings for G=4, 35 halvings for G=2), aligned and mean-pooled as the planner does
(and unaligned, the GQA paper's pooling), and measures the validation loss of train_tiny.py's model
on a fixed, evenly spread set of validation windows. Against those losses it ranks three weight-
only criteria: none (key_error + value_error without alignment: QCQA's raw-weight criterion),
merge (the same after alignment) and qk (qk_error after alignment): Spearman rho, and the
percentile of each criterion's pick. Then whole-model conversions (the plan, contiguous aligned,
the median of random aligned partitions, the GQA paper's init = contiguous without alignment) and,
with --steps, further training of the converted GQA models.

    python3 scripts/validate_plan.py --out validation.json [--windows 64] [--steps 50,200]
        [--kvrank build/kvrank]   # also checks kvrank's picks are the reference's

Needs torch (train_tiny.py's model) and numpy; the criteria come from scripts/plan_reference.py.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plan_reference as ref  # noqa: E402
import train_tiny as tt  # noqa: E402


def spearman(x, y):
    rx = np.argsort(np.argsort(x)).astype(float)
    ry = np.argsort(np.argsort(y)).astype(float)
    return float(np.corrcoef(rx, ry)[0, 1])


def converted_heads(layer, part, align):
    """Per original head: (key, value) in MHA form — head i keeps Q_i, O_i and reads R_iᵀ K̄_g,
    R'_iᵀ V̄_g, which computes exactly what the GQA model with query R_i Q_i and output O_i R'_iᵀ
    does."""
    kg = ref.make_gauge("auto" if align else "none", "rotate_half", len(layer["k"][0]), len(layer["k"][0]))
    vg = ("orthogonal",) if align else ("none",)
    keys, values, rot_k, rot_v = {}, {}, {}, {}
    for group in part:
        rs, mean = ref.align([layer["k"][i] for i in group], kg)
        for r, i in zip(rs, group):
            keys[i], rot_k[i] = r.T @ mean, r
        rs, mean = ref.align([layer["v"][i] for i in group], vg)
        for r, i in zip(rs, group):
            values[i], rot_v[i] = r.T @ mean, r
    return keys, values, rot_k, rot_v


class Evaluator:
    """Validation loss of the model with some layers' K/V replaced, on fixed windows; the
    residual stream before the first changed layer is cached."""

    def __init__(self, model_path, windows, context=64):
        import torch
        self.torch = torch
        data, _ = tt.load_corpus(tt.CORPUS_ROOT)
        train, valid = tt.split_corpus(data)
        self.train = torch.tensor(np.frombuffer(train, dtype=np.uint8).astype(np.int64))
        valid = torch.tensor(np.frombuffer(valid, dtype=np.uint8).astype(np.int64))
        starts = np.linspace(0, len(valid) - context - 1, windows).astype(int)
        self.x = torch.stack([valid[s:s + context] for s in starts])
        self.y = torch.stack([valid[s + 1:s + context + 1] for s in starts])
        self.context = context
        self.tensors = ref.read_safetensors(os.path.join(model_path, "model.safetensors"))
        self.model = tt.build_model("mha", context)
        self.model.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in self.tensors.items()})
        self.model.eval()
        self.cache = {}

    def stream(self, layer):
        if layer not in self.cache:
            with self.torch.no_grad():
                h = self.model.model.embed_tokens(self.x)
                for block in self.model.model.layers[:layer]:
                    h = block(h)
            self.cache[layer] = h
        return self.cache[layer]

    def loss(self, replaced=None):
        """replaced: {layer: (k_proj, v_proj)} float64 arrays; the weights are put back after."""
        torch = self.torch
        replaced = replaced or {}
        first = min(replaced) if replaced else len(self.model.model.layers)
        blocks = self.model.model.layers
        saved = {}
        with torch.no_grad():
            for layer, (k, v) in replaced.items():
                attn = blocks[layer].self_attn
                saved[layer] = (attn.k_proj.weight.clone(), attn.v_proj.weight.clone())
                attn.k_proj.weight.copy_(torch.tensor(k, dtype=torch.float32))
                attn.v_proj.weight.copy_(torch.tensor(v, dtype=torch.float32))
            h = self.stream(first)
            for block in blocks[first:]:
                h = block(h)
            logits = self.model.model.norm(h) @ self.model.model.embed_tokens.weight.t()
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, tt.VOCAB), self.y.reshape(-1)).item()
            for layer, (k, v) in saved.items():
                blocks[layer].self_attn.k_proj.weight.copy_(k)
                blocks[layer].self_attn.v_proj.weight.copy_(v)
        return loss


def kv_weights(layer, part, align):
    keys, values, _, _ = converted_heads(layer, part, align)
    n = len(layer["k"])
    return np.vstack([keys[i] for i in range(n)]), np.vstack([values[i] for i in range(n)])


def sweep_layer(ev, layer, size, base):
    """Every partition of one layer: criteria and loss increases."""
    d = len(layer["k"][0])
    aligned = (ref.make_gauge("auto", "rotate_half", d, d), ("orthogonal",))
    plain = (("none",), ("none",))
    rows = []
    for part in ref.partitions(list(range(len(layer["k"]))), size):
        a = ref.score(part, layer, *aligned)
        u = ref.score(part, layer, *plain)
        rows.append({
            "groups": part,
            "none": u["key_error"] + u["value_error"],
            "merge": a["key_error"] + a["value_error"],
            "qk": a["qk_error"],
            "loss_aligned": ev.loss({layer["layer"]: kv_weights(layer, part, True)}) - base,
            "loss_unaligned": ev.loss({layer["layer"]: kv_weights(layer, part, False)}) - base,
        })
    return rows


def criterion_summary(rows, criterion, loss_key):
    losses = np.array([r[loss_key] for r in rows])
    scores = np.array([r[criterion] for r in rows])
    pick = int(np.argmin(scores))
    return {"spearman": spearman(scores, losses),
            "pick": rows[pick]["groups"],
            "pick_loss": float(losses[pick]),
            "pick_percentile": float(100.0 * np.mean(losses < losses[pick])),
            "best_loss": float(losses.min()), "median_loss": float(np.median(losses)),
            "worst_loss": float(losses.max())}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="data/tiny/mha")
    p.add_argument("--windows", type=int, default=64)
    p.add_argument("--final-windows", type=int, default=512)
    p.add_argument("--random", type=int, default=20)
    p.add_argument("--steps", default="")
    p.add_argument("--kvrank", default="")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    started = time.time()
    config, layers, d, kvh = ref.load_layers(args.model, None)
    ev = Evaluator(args.model, args.windows)
    base = ev.loss()
    result = {"model": args.model, "windows": args.windows, "base_loss": base, "layers": []}
    for size, g in ((2, 4), (4, 2)):
        for layer in layers:
            rows = sweep_layer(ev, layer, size, base)
            entry = {"layer": layer["layer"], "kv_heads_after": g, "partitions": len(rows), "rows": rows}
            for crit in ("none", "merge", "qk"):
                entry[crit] = criterion_summary(rows, crit, "loss_unaligned" if crit == "none" else "loss_aligned")
            entry["none_on_aligned"] = criterion_summary(rows, "none", "loss_aligned")
            entry["contiguous_aligned"] = rows[0]["loss_aligned"] if rows[0]["groups"] == [list(range(i, i + size)) for i in range(0, kvh, size)] else None
            result["layers"].append(entry)
            print(f"G={g} layer {layer['layer']}: " + ", ".join(
                f"{c} rho {entry[c]['spearman']:.2f} pick pct {entry[c]['pick_percentile']:.0f}"
                for c in ("none", "merge", "qk")) + f" ({time.time() - started:.0f}s)", flush=True)
    result["seconds"] = time.time() - started
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
