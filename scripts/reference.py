#!/usr/bin/env python3
"""Independent, deliberately naive numpy implementation of the metric of docs/metric.md.

Builds every d×d head matrix A_h explicitly and uses numpy.linalg.eigvalsh / svd — slow, but short
enough to check by eye. kvrank's C++ engine (src/metric/diversity.cpp) never forms A_h; this script is the
cross-check that it computes the same numbers.

  reference.py heads FILE.npz|DIR              layer{i}.L, layer{i}.R: [H, d, k], A_h = L_h R_hᵀ
                                               (an npz, or a folder of layer{i}.L.npy files)
  reference.py llama PATH [--repr qk|ov|k|v]   llama-layout safetensors (file or folder + config.json),
          [--fold-input-norm]                  q_norm / k_norm gains applied (Qwen3, Gemma 3, OLMo 2),
                                               with the centring of StableLM's and Cohere's QK
                                               LayerNorms, and input_layernorm's with --fold-input-norm;
                                               hybrids: the layers with q_proj, by their own numbers
                                               (Qwen3-Next: the query half of each head's q_proj rows)
  reference.py zamba2 PATH [--repr …]          Zamba 2 (folder + config.json): each hybrid layer under
                                               its own number, from its shared block's q, k, v plus
                                               its own adapters B·A, and o; A_h over the 2·d input
  reference.py encoder PATH --series "STACK KIND" [--repr …]
                                               one attention series of bert, roberta, vit, t5, whisper,
                                               clip or siglip (folder + config.json; e.g. "decoder cross")

Prints {"layers": [{"layer", "heads", "erank", ...}]} (the field names of docs/result-format.md) on stdout.
stdlib + numpy only.
"""
import argparse
import json
import os
import re
import struct
import sys

import numpy as np


def effective_rank(weights):
    w = np.clip(np.asarray(weights, dtype=np.float64), 0, None)
    if w.sum() <= 0:
        return 0.0
    p = w / w.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


def layer_metrics(layer, heads):
    """heads: list of explicit d×d matrices A_h (float64)."""
    norms = [float(np.linalg.norm(a)) for a in heads]
    head_erank = [effective_rank(np.linalg.svd(a, compute_uv=False)) if n > 0 else 0.0
                  for a, n in zip(heads, norms)]
    zero = [h for h, n in enumerate(norms) if n == 0]
    kept = [h for h, n in enumerate(norms) if n > 0]
    n = len(kept)
    s = np.ones((n, n))
    for a in range(n):
        for b in range(n):
            if a != b:
                i, j = kept[a], kept[b]
                s[a, b] = np.sum(heads[i] * heads[j]) / (norms[i] * norms[j])
    out = {"layer": layer, "heads": n, "head_erank": head_erank, "head_norm": norms,
           "zero_heads": zero}
    if n == 0:
        out.update(erank=0.0, erank_centered=0.0, erank_pct=0.0, erank_centered_pct=0.0,
                   mean_similarity=0.0, pcs_90=0, eigenvalues=[], eigenvalues_centered=[])
        return out
    lam = np.clip(np.linalg.eigvalsh(s)[::-1], 0, None)
    j = np.eye(n) - np.ones((n, n)) / n
    sc = j @ s @ j
    lam_c = np.clip(np.linalg.eigvalsh(sc)[::-1], 0, None)
    erank = effective_rank(lam)
    degenerate = np.trace(sc) <= 1e-12 * n
    erank_c = 1.0 if degenerate else effective_rank(lam_c)
    if degenerate:
        pcs = 1
    else:
        pcs = int(np.argmax(np.cumsum(lam_c) >= 0.9 * lam_c.sum())) + 1
    mean_sim = float((s.sum() - np.trace(s)) / (n * (n - 1))) if n > 1 else 1.0
    out.update(erank=erank, erank_centered=erank_c, erank_pct=100 * erank / n,
               erank_centered_pct=100 * erank_c / n, mean_similarity=mean_sim, pcs_90=pcs,
               eigenvalues=lam.tolist(), eigenvalues_centered=lam_c.tolist())
    return out


def cmd_heads(path):
    if os.path.isdir(path):  # a folder of layer{i}.L.npy / layer{i}.R.npy files
        data = {n[:-4]: np.load(os.path.join(path, n)) for n in os.listdir(path) if n.endswith(".npy")}
    else:
        data = dict(np.load(path))
    layers = sorted({int(m.group(1)) for k in data if (m := re.match(r"layer(\d+)\.L$", k))})
    result = []
    for i in layers:
        left = data[f"layer{i}.L"].astype(np.float64)
        right = data[f"layer{i}.R"].astype(np.float64)
        result.append(layer_metrics(i, [left[h] @ right[h].T for h in range(left.shape[0])]))
    return result


# --- a tiny safetensors reader -------------------------------------------------------------------

def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    base = 8 + size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        buf = raw[base + start:base + end]
        dtype = info["dtype"]
        if dtype == "BF16":
            bits = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(buf, dtype={"F32": "<f4", "F16": "<f2", "F64": "<f8"}[dtype])
        tensors[name] = array.astype(np.float64).reshape(info["shape"])
    return tensors


def load_llama(path):
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    config = {}
    if os.path.exists(os.path.join(folder, "config.json")):
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
    files = [path] if not os.path.isdir(path) else sorted(
        os.path.join(path, n) for n in os.listdir(path) if n.endswith(".safetensors"))
    tensors = {}
    for file in files:
        tensors.update(read_safetensors(file))
    return config, tensors


def qk_gains(t, base, role, count, head_dim, gemma):
    """Per-head gains [count, head_dim] of `role`'s QK norm — None when it has none.
    Qwen3 / Gemma 3: one [head_dim] weight for every head; OLMo 2: [count·head_dim] over the whole
    projection; Cohere: [count, head_dim]; StableLM: one LayerNorm per head, `{role}_layernorm.norms.{h}`;
    Gemma's RMSNorm multiplies by (1 + weight)."""
    weight = t.get(f"{base}{role}_norm.weight")
    if weight is None:  # phi's qk_layernorm: one LayerNorm [head_dim] for every head
        weight = t.get(f"{base}{role}_layernorm.weight")
    if weight is None and f"{base}{role}_layernorm.norms.0.weight" in t:
        weight = np.stack([t[f"{base}{role}_layernorm.norms.{h}.weight"] for h in range(count)])
    if weight is None:
        return None
    gain = weight + 1.0 if gemma else weight
    if gain.size == head_dim:
        return np.tile(gain, (count, 1))
    return gain.reshape(count, head_dim)


def qk_centring(config, t, head_dim):
    """The d_h × d_h matrix a QK norm applies before its gain: P = I − 11ᵀ/d_h for the LayerNorms of
    StableLM, Cohere and phi (they subtract each head's mean), I for an RMSNorm."""
    layer_norm = config.get("model_type") in ("stablelm", "cohere", "phi") or any(
        ".q_layernorm." in name for name in t)
    if not layer_norm:
        return np.eye(head_dim)
    return np.eye(head_dim) - np.ones((head_dim, head_dim)) / head_dim


def qk_norm_off(config):
    """StableLM's qk_layernorm / Cohere's use_qk_norm set to false: the model has no QK norm."""
    return config.get("qk_layernorm", config.get("use_qk_norm")) is False


def head_forms(w, repr_name, heads, group, head_dim, norms=None):
    """The explicit A_h of every query head h from one layer's [out, in] projections w["q"], w["k"],
    w["v"] and w["o"] ([d_out, H·d_h]); query head h uses KV head h // group. norms: role (q, k) →
    (gains [count, head_dim], P), applied to that role's rows as the dot product sees them."""
    norms = norms or {}

    def rows(name, head):  # head's rows of an [out, in] projection: W^h as d×d_h is its transpose
        block = w[name][head * head_dim:(head + 1) * head_dim]
        if name in norms:  # what the dot product sees: diag(γ_h) P W^h
            gain, projection = norms[name]
            block = np.diag(gain[head]) @ projection @ block
        return block.T

    a = []
    for h in range(heads):
        kv = h // group
        if repr_name == "qk":
            a.append(rows("q", h) @ rows("k", kv).T)
        elif repr_name == "ov":
            w_o = w["o"][:, h * head_dim:(h + 1) * head_dim]  # d_out × d_h (o_proj columns)
            a.append(w_o @ rows("v", kv).T)
        else:
            side = rows(repr_name, kv)
            a.append(side @ side.T)
    return a


def llama_forms(path, repr_name, fold_input_norm=False):
    """(layer, [explicit A_h of every query head]) for each attention layer of a llama-layout
    checkpoint, by the rules of cmd_llama (also scripts/diff_reference.py's)."""
    config, t = load_llama(path)
    text = config.get("text_config", config)  # multimodal (Gemma 3): the language model's config
    heads = text["num_attention_heads"]
    kv_heads = text.get("num_key_value_heads", heads)
    d_model = text["hidden_size"]
    head_dim = text.get("head_dim") or d_model // heads
    model_type = str(text.get("model_type", config.get("model_type", "")))
    gemma = model_type.startswith("gemma") or model_type == "qwen3_next"  # RMSNorms of 1 + w
    group = heads // kv_heads
    layer_pattern = r"((?:language_model\.)?model\.(?:language_model\.)?layers)\.(\d+)\.self_attn\.q_proj\.weight$"
    found = [m for k in t if (m := re.match(layer_pattern, k))]
    layers = sorted({int(m.group(2)) for m in found})
    centring = qk_centring(text, t, head_dim)
    for i in layers:
        base = f"{found[0].group(1)}.{i}.self_attn."
        w = {r: t[f"{base}{r}_proj.weight"] for r in "qkv"}
        w["o"] = t.get(f"{base}o_proj.weight", t.get(f"{base}dense.weight"))  # phi: dense
        if model_type == "qwen3_next":  # q_proj(x).view(…, H, 2·d_h): query half, then gate half
            w["q"] = w["q"].reshape(heads, 2, head_dim, -1)[:, 0].reshape(heads * head_dim, -1)
        if fold_input_norm:  # x̂ ∘ γ enters q, k and v alike: γ scales their input columns
            gamma = t[f"{found[0].group(1)}.{i}.input_layernorm.weight"] + (1.0 if gemma else 0.0)
            w.update({r: w[r] * gamma[None, :] for r in "qkv"})
        # q_norm / k_norm scale each query / key row before the dot product: fold into the rows.
        gains = {} if qk_norm_off(text) else {
            "q": qk_gains(t, base, "q", heads, head_dim, gemma),
            "k": qk_gains(t, base, "k", kv_heads, head_dim, gemma)}
        norms = {role: (gain, centring) for role, gain in gains.items() if gain is not None}
        yield i, head_forms(w, repr_name, heads, group, head_dim, norms)


def cmd_llama(path, repr_name, fold_input_norm=False):
    return [layer_metrics(i, forms) for i, forms in llama_forms(path, repr_name, fold_input_norm)]


def zamba2_projections(config, t, layer, adapters=True):
    """Hybrid layer `layer`'s q, k, v and o, by transformers' Zamba2 rules: the k-th hybrid layer (k
    its index among the "hybrid" entries of layers_block_type) uses shared block k % num_mem_blocks,
    stored under any hybrid layer using that block, and adds its own adapter k: W + B·A for q, k, v
    (when use_shared_attention_adapter and `adapters`). q, k, v act on 2·hidden_size inputs."""
    hybrid = [i for i, kind in enumerate(config["layers_block_type"]) if kind == "hybrid"]
    k, blocks = hybrid.index(layer), config.get("num_mem_blocks", 1)
    holders = [i for j, i in enumerate(hybrid) if j % blocks == k % blocks]

    def block(name):
        keys = [f"model.layers.{i}.shared_transformer.self_attn.{name}" for i in holders]
        return next(t[key] for key in keys if key in t)

    w = {r: block(f"{r}_proj.weight") for r in "qkvo"}
    if adapters and config.get("use_shared_attention_adapter"):
        for r in "qkv":
            b, a = (block(f"linear_{r}_adapter_list.{k}.{part}.weight") for part in (1, 0))
            w[r] = w[r] + b @ a
    return w


def cmd_zamba2(path, repr_name, adapters=True):
    """Zamba 2: one row per hybrid layer, under its own number; A_h over the 2·d input space."""
    config, t = load_llama(path)
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("attention_head_dim") or 2 * config["hidden_size"] // heads
    hybrid = [i for i, kind in enumerate(config["layers_block_type"]) if kind == "hybrid"]
    return [layer_metrics(i, head_forms(zamba2_projections(config, t, i, adapters), repr_name,
                                        heads, heads // kv_heads, head_dim)) for i in hybrid]


# --- encoders and encoder-decoders: (stack, kind) → key-name regex (outer prefix, layer), the q/k/v/o
# names after "<outer><layer>", and the series' config section and keys (heads, d_model, head_dim)
BERT_NAMES = (r"encoder\.layer\.", ".attention.self.{}.weight", dict(q="query", k="key", v="value"),
              ".attention.output.dense.weight")
VIT_NAMES = (r"encoder\.layer\.", ".attention.attention.{}.weight", dict(q="query", k="key", v="value"),
             ".attention.output.dense.weight")
BERT_CONFIG = (None, "num_attention_heads", "hidden_size", None)
T5_CONFIG = (None, "num_heads", "d_model", "d_kv")
ENCODER_SERIES = {
    "bert": {("encoder", "self"): (BERT_NAMES, BERT_CONFIG)},
    "roberta": {("encoder", "self"): (BERT_NAMES, BERT_CONFIG)},
    "vit": {("encoder", "self"): (VIT_NAMES, BERT_CONFIG)},
    "t5": {
        ("encoder", "self"): ((r"encoder\.block\.", ".layer.0.SelfAttention.{}.weight", {}, ".layer.0.SelfAttention.o.weight"), T5_CONFIG),
        ("decoder", "self"): ((r"decoder\.block\.", ".layer.0.SelfAttention.{}.weight", {}, ".layer.0.SelfAttention.o.weight"), T5_CONFIG),
        ("decoder", "cross"): ((r"decoder\.block\.", ".layer.1.EncDecAttention.{}.weight", {}, ".layer.1.EncDecAttention.o.weight"), T5_CONFIG),
    },
    "whisper": {
        ("encoder", "self"): ((r"encoder\.layers\.", ".self_attn.{}_proj.weight", {}, ".self_attn.out_proj.weight"),
                              (None, "encoder_attention_heads", "d_model", None)),
        ("decoder", "self"): ((r"decoder\.layers\.", ".self_attn.{}_proj.weight", {}, ".self_attn.out_proj.weight"),
                              (None, "decoder_attention_heads", "d_model", None)),
        ("decoder", "cross"): ((r"decoder\.layers\.", ".encoder_attn.{}_proj.weight", {}, ".encoder_attn.out_proj.weight"),
                               (None, "decoder_attention_heads", "d_model", None)),
    },
    "clip": {
        ("text", "self"): ((r"text_model\.encoder\.layers\.", ".self_attn.{}_proj.weight", {}, ".self_attn.out_proj.weight"),
                           ("text_config", "num_attention_heads", "hidden_size", None)),
        ("vision", "self"): ((r"vision_model\.encoder\.layers\.", ".self_attn.{}_proj.weight", {}, ".self_attn.out_proj.weight"),
                             ("vision_config", "num_attention_heads", "hidden_size", None)),
    },
}
ENCODER_SERIES["siglip"] = ENCODER_SERIES["clip"]
for _tower in ("clip_text_model", "clip_vision_model", "siglip_text_model", "siglip_vision_model"):
    ENCODER_SERIES[_tower] = ENCODER_SERIES["clip"]  # one tower: its section at the top level
ENCODER_SERIES["bart"] = ENCODER_SERIES["mbart"] = ENCODER_SERIES["whisper"]  # the same names and keys


def cmd_encoder(path, series, repr_name):
    """One attention series of an encoder (or encoder-decoder): every head has its own K and V."""
    config, t = load_llama(path)
    (stem, role_name, roles, out_name), (section, heads_key, d_key, head_dim_key) = \
        ENCODER_SERIES[config["model_type"]][tuple(series.split())]
    part = config.get(section, config) if section else config
    heads = part[heads_key]
    head_dim = part[head_dim_key] if head_dim_key else part[d_key] // heads
    key_suffix = role_name.format(roles.get("k", "k"))
    found = [m for k in t if (m := re.match(r"^(.*?)" + stem + r"(\d+)" + re.escape(key_suffix) + "$", k))]
    outer = found[0].group(1)
    blocks = {}
    for m in found:
        if m.group(1) == outer:
            blocks[int(m.group(2))] = outer + stem.replace("\\", "") + m.group(2)
    result = []
    for i in sorted(blocks):
        w = {r: t[blocks[i] + role_name.format(roles.get(r, r))] for r in "qkv"}
        w["o"] = t[blocks[i] + out_name]
        result.append(layer_metrics(i, head_forms(w, repr_name, heads, 1, head_dim)))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    heads = sub.add_parser("heads")
    heads.add_argument("npz")
    llama = sub.add_parser("llama")
    llama.add_argument("path")
    llama.add_argument("--repr", default="qk", choices=["qk", "ov", "k", "v"])
    llama.add_argument("--fold-input-norm", action="store_true",
                       help="fold input_layernorm's gain into q, k and v (as kvrank --fold-input-norm)")
    zamba2 = sub.add_parser("zamba2")
    zamba2.add_argument("path")
    zamba2.add_argument("--repr", default="qk", choices=["qk", "ov", "k", "v"])
    encoder = sub.add_parser("encoder")
    encoder.add_argument("path")
    encoder.add_argument("--series", required=True, help='"STACK KIND", e.g. "decoder cross"')
    encoder.add_argument("--repr", default="qk", choices=["qk", "ov", "k", "v"])
    args = parser.parse_args()
    if args.command == "heads":
        layers = cmd_heads(args.npz)
    elif args.command == "zamba2":
        layers = cmd_zamba2(args.path, args.repr)
    elif args.command == "encoder":
        layers = cmd_encoder(args.path, args.series, args.repr)
    else:
        layers = cmd_llama(args.path, args.repr, args.fold_input_norm)
    json.dump({"layers": layers}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
