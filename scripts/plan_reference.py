#!/usr/bin/env python3
"""Naive reference for `kvrank plan` (docs/plan.md), independent of the C++ code.

Builds every matrix explicitly (K_i, V_i, Q_h as d_h × d rows, A_h = Q_hᵀ K_h as d × d), aligns
each group with explicit Procrustes steps, and enumerates every partition of the KV heads into
equal groups by brute force. Prints JSON: per layer the best partition for each objective, the
contiguous partition and the scores of every partition.

    python3 scripts/plan_reference.py data/tiny/mha --kv-heads 4 [--gauge none] [--rope interleaved]
        [--layers 0,2] [--latent-energy 0.9] [--refit]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import layer_metrics, load_llama, read_safetensors  # noqa: E402,F401


def partitions(items, size):
    """Every partition of `items` into groups of `size` (the lowest item opens each group)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]

    def choose(pool, k):
        if k == 0:
            yield []
            return
        for i in range(len(pool)):
            for tail in choose(pool[i + 1:], k - 1):
                yield [pool[i]] + tail

    for others in choose(rest, size - 1):
        group = [first] + others
        remaining = [x for x in rest if x not in others]
        for tail in partitions(remaining, size):
            yield [group] + tail


def polar(m):
    """Orthogonal R maximising trace(R m)."""
    u, _, wt = np.linalg.svd(m)
    return wt.T @ u.T


def best_map(m, gauge):
    """R of the gauge maximising trace(R m): gauge = ("none",) | ("orthogonal",) |
    ("planes", planes, free)."""
    d = m.shape[0]
    if gauge[0] == "none":
        return np.eye(d)
    if gauge[0] == "orthogonal":
        return polar(m)
    _, planes, free = gauge
    r = np.zeros((d, d))
    for a, b in planes:
        # maximise c (m_aa + m_bb) + s (m_ab - m_ba) over the angle: brute check of the closed form
        theta = np.arctan2(m[a, b] - m[b, a], m[a, a] + m[b, b])
        r[a, a], r[a, b], r[b, a], r[b, b] = np.cos(theta), -np.sin(theta), np.sin(theta), np.cos(theta)
    if free:
        sub = polar(m[np.ix_(free, free)])
        r[np.ix_(free, free)] = sub
    return r


def align(xs, gauge):
    """Explicit generalised Procrustes: maps R_i and the pooled mean of R_i X_i."""
    n = len(xs)
    own = sum(float(np.sum(x * x)) for x in xs)
    rs = [np.eye(xs[0].shape[0])] + [best_map(x @ xs[0].T, gauge) for x in xs[1:]]

    def energy(rs):
        mean = sum(r @ x for r, x in zip(rs, xs)) / n
        return n * float(np.sum(mean * mean))

    e = energy(rs)
    for _ in range(50 if n > 2 and gauge[0] != "none" else 0):
        nxt = list(rs)
        for i in range(n):
            target = sum(nxt[j] @ xs[j] for j in range(n) if j != i)
            nxt[i] = best_map(xs[i] @ target.T, gauge)
        e2 = energy(nxt)
        if not e2 > e + 1e-9 * own:
            break
        rs, e = nxt, e2
    mean = sum(r @ x for r, x in zip(rs, xs)) / n
    return rs, mean


def make_gauge(kind, rope, rotary, d):
    if kind == "none":
        return ("none",)
    if rope == "none" or rotary == 0:
        return ("orthogonal",)
    half = rotary // 2
    planes = [(f, f + half) if rope == "rotate_half" else (2 * f, 2 * f + 1) for f in range(half)]
    return ("planes", planes, list(range(rotary, d)))


def score(part, layer, kgauge, vgauge, eranks=True):
    k, v, q, kv_of = layer["k"], layer["v"], layer["q"], layer["kv_of"]
    rk, rv, kbar, vbar = {}, {}, {}, {}
    key_res = value_res = 0.0
    for g, group in enumerate(part):
        rs, mean = align([k[i] for i in group], kgauge)
        key_res += sum(float(np.sum((r @ k[i] - mean) ** 2)) for r, i in zip(rs, group))
        for r, i in zip(rs, group):
            rk[i], kbar[i] = r, mean
        rs, mean = align([v[i] for i in group], vgauge)
        value_res += sum(float(np.sum((r @ v[i] - mean) ** 2)) for r, i in zip(rs, group))
        for r, i in zip(rs, group):
            rv[i], vbar[i] = r, mean
    forms = [q[h].T @ k[kv_of[h]] for h in range(len(q))]
    merged = [(rk[kv_of[h]] @ q[h]).T @ kbar[kv_of[h]] for h in range(len(q))]
    qk = sum(float(np.sum((a - b) ** 2)) for a, b in zip(forms, merged)) / sum(
        float(np.sum(a * a)) for a in forms)
    pooled = [kbar[group[0]] for group in part]
    out = {
        "groups": part,
        "key_error": key_res / sum(float(np.sum(x * x)) for x in k),
        "value_error": value_res / sum(float(np.sum(x * x)) for x in v),
        "qk_error": qk,
    }
    if eranks:
        out["erank_qk_after"] = layer_metrics(0, merged)["erank"]
        out["erank_k_after"] = layer_metrics(0, [m.T @ m for m in pooled])["erank"]
    return out


def top_rows(xs, weights, count, energy):
    """`count` orthonormal rows spanning the top eigenvectors of Σ X_iᵀ W_i X_i (explicit d × d),
    scaled so that each row holds energy / count: the shared rows minimising Σ ‖W_i^½ (X_i − T_i X̄)‖²
    over the row space of X̄ (the maps T_i free)."""
    m = sum(x.T @ w @ x for x, w in zip(xs, weights))
    _, vecs = np.linalg.eigh(m)
    return np.sqrt(energy / count) * vecs[:, ::-1][:, :count].T


def refit_pool(ks, query_grams, gauge):
    """The form-fitted shared key of a group: per RoPE plane the best complex rank-one fit of the
    members' planes weighted by their queries' norms (explicit complex SVD), scaled to the
    members' mean energy of that plane, phase set so its inner product with the first member is
    real and positive; non-rotated entries (partial rotary, or no RoPE) from top_rows."""
    d = ks[0].shape[0]
    kbar = np.zeros_like(ks[0])
    planes, free = (gauge[1], gauge[2]) if gauge[0] == "planes" else ([], list(range(d)))
    for a, b in planes:
        z = [k[a] + 1j * k[b] for k in ks]
        w = [np.sqrt(p[a, a] + p[b, b]) for p in query_grams]
        energy = np.mean([np.vdot(x, x).real for x in z])
        if energy == 0:
            continue
        row = np.linalg.svd(np.array([wi * x for wi, x in zip(w, z)]))[2][0]
        phase = np.vdot(z[0], row)  # Σ row · conj(z_0)
        row = row * (np.conj(phase) / abs(phase) if abs(phase) > 0 else 1) * np.sqrt(energy)
        kbar[a], kbar[b] = row.real, row.imag
    if free:
        kbar[free] = top_rows([k[free] for k in ks], [p[np.ix_(free, free)] for p in query_grams],
                              len(free), np.mean([np.sum(k[free] ** 2) for k in ks]))
    return kbar


def refit_query_map(k, kbar, gauge):
    """M with query M Q: per RoPE plane the scaled rotation M_p minimising ‖K_p − M_pᵀ K̄_p‖
    (explicit 2-parameter least squares); elsewhere the least-squares map Mᵀ = K K̄ᵀ (K̄K̄ᵀ)⁺."""
    d = k.shape[0]
    m = np.zeros((d, d))
    planes, free = (gauge[1], gauge[2]) if gauge[0] == "planes" else ([], list(range(d)))
    for a, b in planes:
        kb = kbar[[a, b]]
        basis = [kb, np.array([[0.0, 1.0], [-1.0, 0.0]]) @ kb]  # M_pᵀ = x I + y J
        x, y = np.linalg.lstsq(np.array([v.ravel() for v in basis]).T, k[[a, b]].ravel(), rcond=None)[0]
        mt = np.array([[x, y], [-y, x]])
        m[np.ix_([a, b], [a, b])] = mt.T
    if free:
        # M_fᵀ K̄_f ≈ K_f, transposed: K̄_fᵀ M_f ≈ K_fᵀ
        m[np.ix_(free, free)] = np.linalg.lstsq(kbar[free].T, k[free].T, rcond=None)[0]
    return m


def refit_conversion(layer, part, kgauge, pool="fit"):
    """--refit: every group's form-fitted K̄, V̄ and, per KV head, the query map M_k and the
    output map T_k (O → O T_k = least squares of V_k ≈ T_k V̄). pool="mean" keeps the aligned
    mean-pool K̄, V̄ and refits only the maps, "plain" the same without alignment (both measured in
    the validation, not offered by kvrank)."""
    k, v, q, o, kv_of = layer["k"], layer["v"], layer["q"], layer["o"], layer["kv_of"]
    d = k[0].shape[0]
    pq = [sum(q[h] @ q[h].T for h in range(len(q)) if kv_of[h] == i) for i in range(len(k))]
    po = [sum(o[h].T @ o[h] for h in range(len(q)) if kv_of[h] == i) for i in range(len(k))]
    kbar, vbar, qmap, omap = {}, {}, {}, {}
    for group in part:
        if pool in ("mean", "plain"):
            kb = align([k[i] for i in group], kgauge if pool == "mean" else ("none",))[1]
            vb = align([v[i] for i in group], ("orthogonal",) if pool == "mean" else ("none",))[1]
        else:
            kb = refit_pool([k[i] for i in group], [pq[i] for i in group], kgauge)
            vb = top_rows([v[i] for i in group], [po[i] for i in group], d,
                          np.mean([np.sum(v[i] ** 2) for i in group]))
        for i in group:
            kbar[i], vbar[i] = kb, vb
            qmap[i] = refit_query_map(k[i], kb, kgauge)
            omap[i] = np.linalg.lstsq(vb.T, v[i].T, rcond=None)[0].T
    return kbar, vbar, qmap, omap


def refit_score(part, layer, kgauge, base):
    """`base` (score()'s dict of the same partition) with qk_error, erank_qk_after and
    erank_k_after of the refit conversion (key_error and value_error keep their definitions)."""
    k, q, kv_of = layer["k"], layer["q"], layer["kv_of"]
    kbar, _, qmap, _ = refit_conversion(layer, part, kgauge)
    forms = [q[h].T @ k[kv_of[h]] for h in range(len(q))]
    merged = [(qmap[kv_of[h]] @ q[h]).T @ kbar[kv_of[h]] for h in range(len(q))]
    out = dict(base)
    out["qk_error"] = sum(float(np.sum((a - b) ** 2)) for a, b in zip(forms, merged)) / sum(
        float(np.sum(a * a)) for a in forms)
    if "erank_qk_after" in base:
        out["erank_qk_after"] = layer_metrics(0, merged)["erank"]
        out["erank_k_after"] = layer_metrics(0, [kbar[g[0]].T @ kbar[g[0]] for g in part])["erank"]
    return out


def energy_rank(values, energy):
    values = np.sort(np.clip(values, 0, None))[::-1]
    values[values <= len(values) * np.finfo(float).eps * values[0]] = 0
    return int(np.argmax(np.cumsum(values) >= energy * values.sum())) + 1


def latent_ranks(layer, energy):
    k, v, q, o, kv_of = layer["k"], layer["v"], layer["q"], layer["o"], layer["kv_of"]
    stacked = np.vstack(k + v)
    rank = energy_rank(np.linalg.svd(stacked, compute_uv=False) ** 2, energy)
    a = [q[h].T @ k[kv_of[h]] for h in range(len(q))]
    b = [o[h] @ v[kv_of[h]] for h in range(len(q))]
    m = sum(x.T @ x for x in a) / sum(np.sum(x * x) for x in a) + sum(
        x.T @ x for x in b) / sum(np.sum(x * x) for x in b)
    return rank, energy_rank(np.linalg.eigvalsh(m), energy)


def load_layers(path, layers):
    config, t = load_llama(path)
    h, kvh = config["num_attention_heads"], config.get("num_key_value_heads", config["num_attention_heads"])
    d = config.get("head_dim") or config["hidden_size"] // h
    out = []
    count = config["num_hidden_layers"]
    for i in layers if layers is not None else range(count):
        base = f"model.layers.{i}.self_attn."
        split = lambda w, n: [w[j * d:(j + 1) * d] for j in range(n)]  # noqa: E731
        o = t[base + "o_proj.weight"]
        out.append({"layer": i,
                    "q": split(t[base + "q_proj.weight"], h),
                    "k": split(t[base + "k_proj.weight"], kvh),
                    "v": split(t[base + "v_proj.weight"], kvh),
                    "o": [o[:, j * d:(j + 1) * d] for j in range(h)],
                    "kv_of": [j // (h // kvh) for j in range(h)]})
    return config, out, d, kvh


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path")
    p.add_argument("--kv-heads", type=int, required=True)
    p.add_argument("--gauge", default="auto", choices=["auto", "none"])
    p.add_argument("--rope", default="rotate_half", choices=["rotate_half", "interleaved", "none"])
    p.add_argument("--layers", default=None)
    p.add_argument("--latent-energy", type=float, default=None)
    p.add_argument("--refit", action="store_true",
                   help="score with the refit conversion; qk then picks by the refit's qk_error")
    args = p.parse_args()
    layers = [int(x) for x in args.layers.split(",")] if args.layers else None
    config, data, d, kvh = load_layers(args.path, layers)
    rotary = int(round(config.get("partial_rotary_factor", 1.0) * d)) // 2 * 2
    kgauge = make_gauge(args.gauge, args.rope, rotary, d)
    vgauge = ("none",) if args.gauge == "none" else ("orthogonal",)
    size = kvh // args.kv_heads
    result = []
    for layer in data:
        every = [score(part, layer, kgauge, vgauge, eranks=False)
                 for part in partitions(list(range(kvh)), size)]
        for s in every if args.refit else []:
            s["refit_qk"] = refit_score(s["groups"], layer, kgauge, s)["qk_error"]
        def scored(part):
            plain = score(part, layer, kgauge, vgauge)
            return refit_score(part, layer, kgauge, plain) if args.refit else plain

        best = lambda key: scored(min(every, key=key)["groups"])  # noqa: E731
        forms = [layer["q"][h].T @ layer["k"][layer["kv_of"][h]] for h in range(len(layer["q"]))]
        entry = {
            "layer": layer["layer"],
            "erank_qk_before": layer_metrics(0, forms)["erank"],
            "merge": best(lambda s: s["key_error"] + s["value_error"]),
            # with --refit, qk picks by the refit's own qk_error (merge keeps its criterion)
            "qk": best(lambda s: s["refit_qk"] if args.refit else s["qk_error"]),
            "contiguous": scored([list(range(g * size, (g + 1) * size)) for g in range(args.kv_heads)]),
            "all": every,
        }
        if args.latent_energy:
            entry["latent_rank"], entry["latent_rank_forms"] = latent_ranks(layer, args.latent_energy)
        result.append(entry)
    json.dump({"layers": result}, sys.stdout)


if __name__ == "__main__":
    main()
