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


def gauges(layer, align):
    d = len(layer["k"][0])
    if not align:
        return ("none",), ("none",)
    return ref.make_gauge("auto", "rotate_half", d, d), ("orthogonal",)


def conversion(layer, part, align):
    """The aligned (or plain) mean-pool of every group, in MHA form: head i keeps Q_i and O_i and
    reads R_iᵀ K̄_g, R'_iᵀ V̄_g, which computes exactly what the GQA model with query R_i Q_i and
    output O_i R'_iᵀ does. Returns the new k_proj, v_proj and the criteria of the partition."""
    kg, vg = gauges(layer, align)
    n = len(layer["k"])
    keys, values, rot = [None] * n, [None] * n, [None] * n
    key_res = value_res = 0.0
    for group in part:
        rs, mean = ref.align([layer["k"][i] for i in group], kg)
        key_res += sum(float(np.sum((r @ layer["k"][i] - mean) ** 2)) for r, i in zip(rs, group))
        for r, i in zip(rs, group):
            keys[i], rot[i] = r.T @ mean, r
        rs, mean = ref.align([layer["v"][i] for i in group], vg)
        value_res += sum(float(np.sum((r @ layer["v"][i] - mean) ** 2)) for r, i in zip(rs, group))
        for r, i in zip(rs, group):
            values[i] = r.T @ mean
    forms = [q.T @ k for q, k in zip(layer["q"], layer["k"])]  # MHA: head h reads KV head h
    merged = [q.T @ k for q, k in zip(layer["q"], keys)]
    qk = sum(float(np.sum((a - b) ** 2)) for a, b in zip(forms, merged)) / sum(
        float(np.sum(a * a)) for a in forms)
    errors = key_res / sum(float(np.sum(x * x)) for x in layer["k"]) + value_res / sum(
        float(np.sum(x * x)) for x in layer["v"])
    return np.vstack(keys), np.vstack(values), {"kv_error": errors, "qk_error": qk}


def refit_weights(layer, part, pool="fit"):
    """The --refit conversion in MHA form: head i keeps its place, reads its group's K̄, V̄ (the
    same rows for every member: what the GQA model computes) with query M_i Q_i and output O_i T_i."""
    kg, _ = gauges(layer, True)
    kbar, vbar, qmap, omap = ref.refit_conversion(layer, part, kg, pool)
    n = len(layer["k"])
    return (np.vstack([qmap[i] @ layer["q"][i] for i in range(n)]), np.vstack([kbar[i] for i in range(n)]),
            np.vstack([vbar[i] for i in range(n)]), np.hstack([layer["o"][i] @ omap[i] for i in range(n)]))


def kv_weights(layer, part, align):
    k, v, _ = conversion(layer, part, align)
    return k, v


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
        """replaced: {layer: (k_proj, v_proj)} or {layer: (q_proj, k_proj, v_proj, o_proj)} float64
        arrays; the weights are put back after."""
        torch = self.torch
        replaced = replaced or {}
        first = min(replaced) if replaced else len(self.model.model.layers)
        blocks = self.model.model.layers
        saved = {}
        with torch.no_grad():
            for layer, weights in replaced.items():
                attn = blocks[layer].self_attn
                names = ("k_proj", "v_proj") if len(weights) == 2 else ("q_proj", "k_proj", "v_proj", "o_proj")
                saved[layer] = [(n, getattr(attn, n).weight.clone()) for n in names]
                for n, w in zip(names, weights):
                    getattr(attn, n).weight.copy_(torch.tensor(w, dtype=torch.float32))
            h = self.stream(first)
            for block in blocks[first:]:
                h = block(h)
            logits = self.model.model.norm(h) @ self.model.model.embed_tokens.weight.t()
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, tt.VOCAB), self.y.reshape(-1)).item()
            for layer, weights in saved.items():
                for n, w in weights:
                    getattr(blocks[layer].self_attn, n).weight.copy_(w)
        return loss


def sweep_layer(ev, layer, size, base):
    """Every partition of one layer: criteria and loss increases."""
    rows = []
    for part in ref.partitions(list(range(len(layer["k"]))), size):
        ka, va, aligned = conversion(layer, part, True)
        ku, vu, plain = conversion(layer, part, False)
        rows.append({
            "groups": part,
            "none": plain["kv_error"],
            "merge": aligned["kv_error"],
            "qk": aligned["qk_error"],
            "loss_aligned": ev.loss({layer["layer"]: (ka, va)}) - base,
            "loss_unaligned": ev.loss({layer["layer"]: (ku, vu)}) - base,
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


def gqa_state(tensors, layers, parts, align, d):
    """The converted model as a stock GQA state dict (query heads reordered group by group, as
    `kvrank plan --write-checkpoint` writes it)."""
    state = dict(tensors)
    for layer, part in zip(layers, parts):
        kg, vg = gauges(layer, align)
        base = f"model.layers.{layer['layer']}.self_attn."
        q, o = tensors[base + "q_proj.weight"], tensors[base + "o_proj.weight"]
        new_q, new_o, new_k, new_v = [], [], [], []
        for group in part:
            rk, kbar = ref.align([layer["k"][i] for i in group], kg)
            rv, vbar = ref.align([layer["v"][i] for i in group], vg)
            new_k.append(kbar)
            new_v.append(vbar)
            for r, r2, i in zip(rk, rv, group):
                new_q.append(r @ q[i * d:(i + 1) * d])
                new_o.append(o[:, i * d:(i + 1) * d] @ r2.T)
        state[base + "q_proj.weight"] = np.vstack(new_q)
        state[base + "k_proj.weight"] = np.vstack(new_k)
        state[base + "v_proj.weight"] = np.vstack(new_v)
        state[base + "o_proj.weight"] = np.hstack(new_o)
    return state


def train_further(ev, state, g, steps, seed=0, lr=1e-3, batch=32):
    """AdamW on the training split from `state` (a GQA model with g KV heads); the validation
    loss after each of `steps`."""
    torch = ev.torch
    tt.VARIANTS[f"gqa{g}"] = {"kind": "llama", "kv_heads": g}
    model = tt.build_model(f"gqa{g}", ev.context)
    model.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in state.items()})
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)  # the same batches for every model
    out = {}
    for step in range(1, max(steps) + 1):
        offsets = torch.randint(0, len(ev.train) - ev.context - 1, (batch,), generator=gen)
        x = torch.stack([ev.train[o:o + ev.context] for o in offsets.tolist()])
        y = torch.stack([ev.train[o + 1:o + ev.context + 1] for o in offsets.tolist()])
        model.train()
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, tt.VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step in steps:
            model.eval()
            with torch.no_grad():
                logits = model(ev.x)
                out[step] = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, tt.VOCAB), ev.y.reshape(-1)).item()
    return out


def whole_model(ev, layers, sweeps, size, kvh, count, seed):
    """Whole-model conversions: partitions per layer for each rule, and their losses."""
    rng = random.Random(seed)
    contiguous = [list(range(i, i + size)) for i in range(0, kvh, size)]
    pick = lambda rows, key: min(rows, key=lambda r: r[key])["groups"]  # noqa: E731
    rules = {
        "plan_merge": ([pick(r, "merge") for r in sweeps], True),
        "plan_qk": ([pick(r, "qk") for r in sweeps], True),
        "none_criterion_unaligned": ([pick(r, "none") for r in sweeps], False),
        "oracle_best_single_layer_aligned": ([pick(r, "loss_aligned") for r in sweeps], True),
        "contiguous_aligned": ([contiguous] * len(layers), True),
        "gqa_paper_init": ([contiguous] * len(layers), False),
    }
    out = {}
    for name, (parts, align) in rules.items():
        replaced = {l["layer"]: kv_weights(l, p, align) for l, p in zip(layers, parts)}
        out[name] = {"loss": ev.loss(replaced), "groups": parts, "aligned": align}
    randoms = []
    for _ in range(count):
        parts = []
        for layer in layers:
            order = list(range(kvh))
            rng.shuffle(order)
            parts.append([sorted(order[i:i + size]) for i in range(0, kvh, size)])
        randoms.append(ev.loss({l["layer"]: kv_weights(l, p, True) for l, p in zip(layers, parts)}))
    out["random_median_aligned"] = {"loss": float(np.median(randoms)), "count": count}
    return out, rules


def latent_experiment(ev, layers, energies):
    """Per layer, K and V projected onto a rank-r input subspace (a shared latent c = Pᵀx of r
    dims): the top-r right singular vectors of the stacked [W_K; W_V] (X-EcoMLA's rule) or the
    top-r eigenvectors of the forms matrix Σ A_hᵀA_h/ΣA + Σ B_hᵀB_h/ΣB (latent_rank_forms), each at
    the rank its own rule gives and both at the other's rank; one layer converted at a time."""
    out = []
    for energy in energies:
        for layer in layers:
            stacked = np.vstack(layer["k"] + layer["v"])
            _, sv, vt = np.linalg.svd(stacked, full_matrices=False)
            a = [q.T @ k for q, k in zip(layer["q"], layer["k"])]
            b = [o @ v for o, v in zip(layer["o"], layer["v"])]
            m = sum(x.T @ x for x in a) / sum(np.sum(x * x) for x in a) + sum(
                x.T @ x for x in b) / sum(np.sum(x * x) for x in b)
            w, vecs = np.linalg.eigh(m)
            vecs = vecs[:, ::-1]
            r_stack, r_forms = ref.latent_ranks(layer, energy)
            k, v = np.vstack(layer["k"]), np.vstack(layer["v"])

            def loss(basis, r):
                proj = basis[:, :r] @ basis[:, :r].T
                return ev.loss({layer["layer"]: (k @ proj, v @ proj)}) - ev.base

            entry = {"layer": layer["layer"], "energy": energy, "rank_stacked": r_stack,
                     "rank_forms": r_forms}
            for name, basis in (("stacked", vt.T), ("forms", vecs)):
                for rank_name, r in (("at_stacked_rank", r_stack), ("at_forms_rank", r_forms)):
                    entry[f"{name}_{rank_name}"] = loss(basis, r)
            out.append(entry)
            print(f"latent P={energy} layer {layer['layer']}: {entry}", flush=True)
    return out


def report(path):
    """Markdown tables of a result file (what docs/plan.md shows)."""
    with open(path) as f:
        r = json.load(f)
    print(f"Base validation loss {r['base_loss']:.4f} nats/byte on the {r['windows']} sweep windows, "
          f"{r['base_loss_final']:.4f} on the {r['final_windows']} windows of the whole-model rows.\n")
    print("| G | layer | criterion | Spearman ρ | pick's loss increase | percentile | best | median | worst |")
    print("|---|---|---|---|---|---|---|---|---|")
    for e in r["layers"]:
        for crit, name in (("none", "none (unaligned loss)"), ("none_on_aligned", "none (aligned loss)"),
                           ("merge", "merge"), ("qk", "qk")):
            c = e[crit]
            print(f"| {e['kv_heads_after']} | {e['layer']} | {name} | {c['spearman']:.2f} | "
                  f"{c['pick_loss']:+.4f} | {c['pick_percentile']:.0f} | {c['best_loss']:+.4f} | "
                  f"{c['median_loss']:+.4f} | {c['worst_loss']:+.4f} |")
        rows = e["rows"]
        la = np.array([x["loss_aligned"] for x in rows])
        lu = np.array([x["loss_unaligned"] for x in rows])
        print(f"| {e['kv_heads_after']} | {e['layer']} | contiguous | | aligned {e['contiguous']['loss_aligned']:+.4f}, "
              f"unaligned {e['contiguous']['loss_unaligned']:+.4f} | | aligned < unaligned in {int((la < lu).sum())}/{len(rows)} | "
              f"median ratio unaligned/aligned {np.median(lu / la):.2f} | |")
    if r.get("latent"):
        print("\n| P | layer | r stacked | r forms | stacked subspace at r stacked | at r forms | forms subspace at r stacked | at r forms |")
        print("|---|---|---|---|---|---|---|---|")
        for e in r["latent"]:
            print(f"| {e['energy']} | {e['layer']} | {e['rank_stacked']} | {e['rank_forms']} | "
                  f"{e['stacked_at_stacked_rank']:+.4f} | {e['stacked_at_forms_rank']:+.4f} | "
                  f"{e['forms_at_stacked_rank']:+.4f} | {e['forms_at_forms_rank']:+.4f} |")
    for g, whole in r["whole"].items():
        print(f"\nWhole model, G = {g} (loss on {r['final_windows']} windows; base {r['base_loss_final']:.4f}):\n")
        print("| conversion | loss | increase | after 50 steps | after 200 steps |")
        print("|---|---|---|---|---|")
        for name, v in whole.items():
            t = v.get("trained", {})
            print(f"| {name} | {v['loss']:.4f} | {v['loss'] - r['base_loss_final']:+.4f} | "
                  f"{t.get('50', t.get(50, float('nan'))):.4f} | {t.get('200', t.get(200, float('nan'))):.4f} |")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--report":
        return report(sys.argv[2])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="data/tiny/mha")
    p.add_argument("--windows", type=int, default=64)
    p.add_argument("--final-windows", type=int, default=256)
    p.add_argument("--random", type=int, default=20)
    p.add_argument("--steps", default="")
    p.add_argument("--groups", default="4,2", help="KV heads after, in the order run")
    p.add_argument("--latent", default="", help="energies P for the latent-rank experiment only, "
                   "added to an existing --out file")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    if args.latent:
        import torch
        torch.set_num_threads(1)
        _, layers, _, _ = ref.load_layers(args.model, None)
        ev = Evaluator(args.model, args.windows)
        ev.base = ev.loss()
        with open(args.out) as f:
            result = json.load(f)
        result["latent"] = latent_experiment(ev, layers, [float(x) for x in args.latent.split(",")])
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        return
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    started = time.time()
    _, layers, d, kvh = ref.load_layers(args.model, None)
    ev = Evaluator(args.model, args.windows)
    final = Evaluator(args.model, args.final_windows)
    result = {"model": args.model, "windows": args.windows, "final_windows": args.final_windows,
              "base_loss": ev.loss(), "base_loss_final": final.loss(), "layers": [], "whole": {}}

    def save():
        result["seconds"] = time.time() - started
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)

    for g in (int(x) for x in args.groups.split(",")):
        size = kvh // g
        sweeps = []
        for layer in layers:
            rows = sweep_layer(ev, layer, size, result["base_loss"])
            sweeps.append(rows)
            entry = {"layer": layer["layer"], "kv_heads_after": g, "partitions": len(rows), "rows": rows}
            for crit in ("none", "merge", "qk"):
                entry[crit] = criterion_summary(rows, crit, "loss_unaligned" if crit == "none" else "loss_aligned")
            entry["none_on_aligned"] = criterion_summary(rows, "none", "loss_aligned")
            entry["contiguous"] = {"loss_aligned": rows[0]["loss_aligned"], "loss_unaligned": rows[0]["loss_unaligned"]}
            result["layers"].append(entry)
            print(f"G={g} layer {layer['layer']}: " + ", ".join(
                f"{c} rho {entry[c]['spearman']:.2f} pick pct {entry[c]['pick_percentile']:.0f}"
                for c in ("none", "merge", "qk")) + f" ({time.time() - started:.0f}s)", flush=True)
            save()
        whole, rules = whole_model(final, layers, sweeps, size, kvh, args.random, seed=g)
        result["whole"][str(g)] = whole
        print(f"G={g} whole model: " + ", ".join(f"{k} {v['loss']:.4f}" for k, v in whole.items()), flush=True)
        save()
        if args.steps:
            steps = [int(x) for x in args.steps.split(",")]
            for name in ("plan_merge", "contiguous_aligned", "gqa_paper_init"):
                parts, align = rules[name]
                state = gqa_state(final.tensors, layers, parts, align, d)
                whole[name]["trained"] = train_further(final, state, g, steps)
                print(f"G={g} {name} trained: {whole[name]['trained']}", flush=True)
                save()


if __name__ == "__main__":
    main()
