#!/usr/bin/env python3
"""Writes a checkpoint of one attention family from explicit per-head matrices, plus the per-head
factors scripts/reference.py needs to check kvrank on it. Independent of kvrank's C++ code: each
family's tensors are assembled the way its Hugging Face modelling code slices them.

  write_family_checkpoints.py FAMILY OUT_DIR REF_DIR [--dtype F32|BF16|F16] [--seed N]
        [--layers N] [--heads H] [--kv-heads H_kv] [--head-dim D_H] [--d-model D] [--no-prefix]

FAMILY: llama, gpt2, gpt_neox, falcon_new, falcon_mq, falcon_mha, phi3, map, kvonly, the llama-
named families of MODERN (QK-norm gains, MoE experts, attention biases, Gemma 3's multimodal layout),
and bloom, mpt, baichuan, qwen (v1), gpt_bigcode_mq/_mha, internlm2, chatglm, opt, phi (phi-2) and
llama4 in their Hugging Face tensor names and config keys (fused_tensors, fused_config); the
hybrids jamba, granitemoehybrid and qwen3_next (HYBRIDS: at least 8 layers, attention in some)
and zamba2 (ZAMBA2_LAYERS: shared attention blocks with per-layer adapters; --heads and --d-model
only, d_model being hidden_size: its attention acts on 2·d_model, head_dim = 2·d_model / H).
OUT_DIR receives config.json + model.safetensors (or, for kvonly, layers.{i}.{k,v}_proj.npy);
REF_DIR receives qk.npz, ov.npz, k.npz, v.npz (layer{i}.L / layer{i}.R, [H, d, k], A_h = L_h R_hᵀ,
computed from the per-head matrices AFTER rounding to --dtype, with the QK-norm gains applied to
the query and key rows) and, for FAMILY map, map.json.
stdlib + numpy only; also importable (write_family()).
"""
import argparse
import copy
import json
import os
import struct
import sys

import numpy as np

# Llama-named families of today: how each differs from llama in its Hugging Face modelling code.
#   qk_norm: "head" = one RMSNorm gain [d_h] shared by all heads (Qwen3Attention, Gemma3Attention:
#            RMSNorm(head_dim) on q.view(..., heads, head_dim)); "width" = a gain over the whole
#            projection, q_norm [H·d_h], k_norm [H_kv·d_h] (Olmo2Attention: RMSNorm(H·head_dim)).
#            "heads" = a LayerNorm per head with its own gain [H, d_h] (CohereAttention: CohereLayerNorm
#            ((heads, head_dim)) as q_norm / k_norm); "per_head" = one torch LayerNorm per head, its
#            gain [d_h] stored as q_layernorm.norms.{h} (StableLmAttention: StableLmLayerNormPerHead).
#            "layernorm" = one torch LayerNorm [d_h] shared by all heads, q_layernorm.weight and
#            .bias (PhiAttention with qk_layernorm: nn.LayerNorm(head_dim) on q.view(…, H, d_h)).
#            The LayerNorms also subtract the mean of each head's d_h entries before the gain.
#   offset:  Gemma's RMSNorm multiplies by (1 + weight): the stored weight is the gain minus 1.
#   experts: MoE MLP tensors (filled with NaN: kvrank must never read them).
#   bias:    q/k/v (and o) projection biases (llama `attention_bias`, qwen2's qkv biases).
#   prefix:  the text model's layer prefix; Gemma 3's multimodal checkpoints nest it, add a SigLIP
#            vision tower (NaN, never read) and put the text geometry under config "text_config".
MODERN = {
    "qwen3": dict(model_type="qwen3", qk_norm="head"),
    "gemma2": dict(model_type="gemma2"),
    "gemma3": dict(model_type="gemma3_text", qk_norm="head", offset=1.0),
    "gemma3_mm": dict(model_type="gemma3", qk_norm="head", offset=1.0,
                      prefix="language_model.model.layers"),
    "olmo2": dict(model_type="olmo2", qk_norm="width"),
    "stablelm": dict(model_type="stablelm", qk_norm="per_head"),
    "cohere": dict(model_type="cohere", qk_norm="heads"),
    "mixtral": dict(model_type="mixtral", experts="mixtral"),
    "qwen2_moe": dict(model_type="qwen2_moe", experts="qwen2_moe", bias=True),
    "qwen3_moe": dict(model_type="qwen3_moe", qk_norm="head", experts="qwen3_moe"),
    "llama_bias": dict(model_type="llama", bias=True),
    "phi_qk": dict(model_type="phi", qk_norm="layernorm"),
}

FAMILIES = ["llama", "gpt2", "gpt_neox", "falcon_new", "falcon_mq", "falcon_mha", "phi3", "map",
            "kvonly"] + list(MODERN) + ["bloom", "mpt", "baichuan", "qwen", "gpt_bigcode_mq",
                                        "gpt_bigcode_mha", "internlm2", "chatglm", "chatglm_v1",
                                        "opt", "phi", "llama4"]
MHA_ONLY = {"gpt2", "gpt_neox", "falcon_mha", "bloom", "mpt", "baichuan", "qwen", "gpt_bigcode_mha",
            "opt", "chatglm_v1"}


# ---- dtype rounding and safetensors writing --------------------------------------------------

def bf16_bits(values):
    """float32 → bfloat16 bit patterns, round to nearest even."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def round_to(values, dtype):
    """The float64 values a tensor of `dtype` actually holds."""
    if dtype == "F32":
        return values.astype(np.float32).astype(np.float64)
    if dtype == "F16":
        return values.astype(np.float16).astype(np.float64)
    if dtype == "BF16":
        bits = bf16_bits(values).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64)
    raise ValueError(dtype)


def tensor_bytes(values, dtype):
    if dtype == "F32":
        return np.ascontiguousarray(values, dtype="<f4").tobytes()
    if dtype == "F16":
        return np.ascontiguousarray(values, dtype="<f2").tobytes()
    if dtype == "BF16":
        return bf16_bits(values).astype("<u2").tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors, dtype):
    """tensors: name → float64 array (already rounded to dtype)."""
    write_safetensors_entries(path, {name: (dtype, list(values.shape), tensor_bytes(values, dtype))
                                     for name, values in tensors.items()})


def write_safetensors_entries(path, entries):
    """entries: name → (dtype, shape, raw little-endian bytes); names sorted, header padded to 8."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(entries):
        dtype, shape, blob = entries[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


# ---- per-head matrices ---------------------------------------------------------------------------

def save_reference_factors(ref_dir, layers):
    """ref_dir/{qk,ov,k,v}.npz: each layer's per-head factors ("layer{i}.L", "layer{i}.R") as the
    writer built them, for reference.py heads; `layers` maps a layer number to its matrices."""
    os.makedirs(ref_dir, exist_ok=True)
    for repr_name in ("qk", "ov", "k", "v"):
        arrays = {}
        for i, m in layers.items():
            arrays[f"layer{i}.L"], arrays[f"layer{i}.R"] = m.factors(repr_name)
        np.savez(os.path.join(ref_dir, f"{repr_name}.npz"), **arrays)


def make_heads(rng, count, rows, cols, layer):
    """count matrices [rows, cols]; in layer l the first (l % 3) + 1 heads after head 0 are made
    close to head 0 (one of them an exact multiple), so erank is well below the head count."""
    heads = rng.standard_normal((count, rows, cols)) / np.sqrt(cols)
    similar = min(count - 1, layer % 3 + 1)
    for h in range(1, similar + 1):
        if h == 1:
            heads[h] = 2.0 * heads[0]
        else:
            heads[h] = heads[0] + 0.3 * heads[h]
    return heads


class Heads:
    """Per-head [out, in] matrices of one layer, rounded to the checkpoint dtype.
    q[h], k[g], v[g]: [d_h, d]; o[h]: [d, d_h]."""

    def __init__(self, rng, layer, heads, kv_heads, head_dim, d_model, dtype):
        self.q = round_to(make_heads(rng, heads, head_dim, d_model, layer), dtype)
        self.k = round_to(make_heads(rng, kv_heads, head_dim, d_model, layer + 1), dtype)
        self.v = round_to(make_heads(rng, kv_heads, head_dim, d_model, layer + 2), dtype)
        self.o = round_to(make_heads(rng, heads, d_model, head_dim, layer), dtype)
        self.group = heads // kv_heads

    def with_gains(self, q_gain, k_gain, centred=False):
        """The heads as the dot product sees them: row j of query head h scaled by q_gain[h][j]
        (likewise keys), i.e. diag(γ) W applied before q·k; with `centred` (a LayerNorm) each head's
        mean row is subtracted first. Returns a copy."""
        def seen(gain, head):
            return gain[:, None] * (head - head.mean(axis=0) if centred else head)
        scaled = copy.copy(self)
        scaled.q = [seen(q_gain[h], self.q[h]) for h in range(len(self.q))]
        scaled.k = [seen(k_gain[g], self.k[g]) for g in range(len(self.k))]
        return scaled

    def factors(self, repr_name):
        """L, R [H, d, k] of A_h = L_h R_hᵀ for the query head h, using KV head h // group."""
        heads = len(self.q)
        kv = [h // self.group for h in range(heads)]
        if repr_name == "qk":
            left = [self.q[h].T for h in range(heads)]
            right = [self.k[kv[h]].T for h in range(heads)]
        elif repr_name == "ov":
            left = [self.o[h] for h in range(heads)]
            right = [self.v[kv[h]].T for h in range(heads)]
        else:
            side = self.k if repr_name == "k" else self.v
            left = right = [side[kv[h]].T for h in range(heads)]
        return np.stack(left), np.stack(right)


# ---- layouts: per-head matrices → the family's tensors -----------------------------------------

def llama_tensors(i, m, prefix="model.layers"):
    base = f"{prefix}.{i}.self_attn."
    return {base + "q_proj.weight": np.concatenate(m.q), base + "k_proj.weight": np.concatenate(m.k),
            base + "v_proj.weight": np.concatenate(m.v), base + "o_proj.weight": np.concatenate(m.o, 1)}


def gpt2_tensors(i, m, prefix):
    # Conv1D stores [in, out]: y = x @ W, so the q/k/v output columns are the rows transposed.
    base = f"{prefix}h.{i}.attn."
    qkv = np.concatenate([np.concatenate(m.q), np.concatenate(m.k), np.concatenate(m.v)])
    return {base + "c_attn.weight": qkv.T.copy(), base + "c_proj.weight": np.concatenate(m.o, 1).T.copy()}


def neox_tensors(i, m):
    # GPTNeoXAttention: qkv.view(..., heads, 3 * head_size) → per head [q; k; v].
    rows = [block for h in range(len(m.q)) for block in (m.q[h], m.k[h], m.v[h])]
    base = f"gpt_neox.layers.{i}.attention."
    return {base + "query_key_value.weight": np.concatenate(rows),
            base + "dense.weight": np.concatenate(m.o, 1)}


def falcon_tensors(i, m, kind):
    heads, kv_heads = len(m.q), len(m.k)
    if kind == "new":  # view(..., kv_heads, heads/kv_heads + 2, head_dim)
        rows = []
        for g in range(kv_heads):
            rows += [m.q[g * m.group + j] for j in range(m.group)] + [m.k[g], m.v[g]]
    elif kind == "mq":  # view(..., heads + 2, head_dim): all q, one k, one v
        rows = list(m.q) + [m.k[0], m.v[0]]
    else:  # view(..., heads, 3, head_dim)
        rows = [block for h in range(heads) for block in (m.q[h], m.k[h], m.v[h])]
    base = f"transformer.h.{i}.self_attention."
    return {base + "query_key_value.weight": np.concatenate(rows),
            base + "dense.weight": np.concatenate(m.o, 1)}


def phi3_tensors(i, m):
    base = f"model.layers.{i}.self_attn."
    return {base + "qkv_proj.weight": np.concatenate([np.concatenate(m.q), np.concatenate(m.k),
                                                     np.concatenate(m.v)]),
            base + "o_proj.weight": np.concatenate(m.o, 1)}


def map_tensors(i, m):
    # A made-up naming, stored [in, out] (transposed) to exercise the map's "layout": "in_out".
    base = f"blocks.{i}.mix."
    return {base + "wq": np.concatenate(m.q).T.copy(), base + "wk": np.concatenate(m.k).T.copy(),
            base + "wv": np.concatenate(m.v).T.copy(), base + "wo": np.concatenate(m.o, 1).T.copy()}


def per_head_qkv(m):
    """Rows [q_h; k_h; v_h] per head (MHA): bloom, gpt_bigcode without multi_query."""
    return np.concatenate([block for h in range(len(m.q)) for block in (m.q[h], m.k[h], m.v[h])])


def stacked_qkv(m):
    """All query rows, then all key rows, then all value rows."""
    return np.concatenate([np.concatenate(m.q), np.concatenate(m.k), np.concatenate(m.v)])


def grouped_qkv(m):
    """Per KV head g: its query heads, then k_g, then v_g (InternLM2's wqkv)."""
    rows = []
    for g in range(len(m.k)):
        rows += [m.q[g * m.group + j] for j in range(m.group)] + [m.k[g], m.v[g]]
    return np.concatenate(rows)


def fused_tensors(family, i, m):
    out = np.concatenate(m.o, 1)
    if family == "bloom":  # BloomAttention: view(…, heads, 3, head_dim)
        base = f"transformer.h.{i}.self_attention."
        return {base + "query_key_value.weight": per_head_qkv(m), base + "dense.weight": out}
    if family == "mpt":  # MptAttention: Wqkv(x).chunk(3, dim=2)
        base = f"transformer.blocks.{i}.attn."
        return {base + "Wqkv.weight": stacked_qkv(m), base + "out_proj.weight": out}
    if family == "baichuan":  # W_pack(x).unflatten(-1, (3, hidden))
        base = f"model.layers.{i}.self_attn."
        return {base + "W_pack.weight": stacked_qkv(m), base + "o_proj.weight": out}
    if family == "qwen":  # QWenAttention: nn.Linear c_attn, split(split_size) into q, k, v
        base = f"transformer.h.{i}.attn."
        return {base + "c_attn.weight": stacked_qkv(m), base + "c_proj.weight": out}
    if family.startswith("gpt_bigcode"):  # nn.Linear c_attn: MQA q | k | v, MHA per head
        base = f"transformer.h.{i}.attn."
        qkv = stacked_qkv(m) if family.endswith("_mq") else per_head_qkv(m)
        return {base + "c_attn.weight": qkv, base + "c_proj.weight": out}
    if family == "internlm2":  # rearrange 'b q (h gs d) -> b q h gs d', gs = group + 2
        base = f"model.layers.{i}.attention."
        return {base + "wqkv.weight": grouped_qkv(m), base + "wo.weight": out}
    if family == "chatglm":  # multi_query_attention: split([heads·d_h, groups·d_h, groups·d_h]);
        # without: mixed_x_layer.view(…, heads, 3·d_h), then split into q, k, v per head
        base = f"transformer.encoder.layers.{i}.self_attention."
        qkv = stacked_qkv(m) if m.group > 1 else per_head_qkv(m)
        return {base + "query_key_value.weight": qkv, base + "dense.weight": out}
    if family == "chatglm_v1":  # ChatGLM-6B: view(…, heads, 3·d_h) under transformer.layers
        base = f"transformer.layers.{i}.attention."
        return {base + "query_key_value.weight": per_head_qkv(m), base + "dense.weight": out}
    if family == "opt":  # OPTAttention: q/k/v/out_proj under model.decoder.layers
        return {k.replace("o_proj", "out_proj"): v
                for k, v in llama_tensors(i, m, "model.decoder.layers").items()}
    if family == "phi":  # PhiAttention (phi-2): q/k/v_proj and dense
        return {k.replace("o_proj", "dense"): v for k, v in llama_tensors(i, m).items()}
    if family == "llama4":  # Llama4ForConditionalGeneration: the text model nested
        return llama_tensors(i, m, "language_model.model.layers")
    raise ValueError(family)


def fused_config(family, layers, heads, kv_heads, head_dim, d_model):
    if family == "bloom":
        return {"model_type": "bloom", "hidden_size": d_model, "n_head": heads, "n_layer": layers}
    if family == "mpt":
        return {"model_type": "mpt", "d_model": d_model, "n_heads": heads, "n_layers": layers,
                "attn_config": {"attn_type": "multihead_attention"}}
    if family == "qwen":
        return {"model_type": "qwen", "hidden_size": d_model, "num_attention_heads": heads,
                "num_hidden_layers": layers, "kv_channels": head_dim}
    if family.startswith("gpt_bigcode"):
        return {"model_type": "gpt_bigcode", "n_embd": d_model, "n_head": heads, "n_layer": layers,
                "multi_query": family.endswith("_mq")}
    if family == "chatglm_v1":  # ChatGLMConfig of ChatGLM-6B: no kv_channels, no multi-query
        return {"model_type": "chatglm", "hidden_size": d_model, "num_attention_heads": heads,
                "num_layers": layers, "position_encoding_2d": True}
    if family == "chatglm":
        return {"model_type": "chatglm", "hidden_size": d_model, "num_attention_heads": heads,
                "num_layers": layers, "kv_channels": head_dim,
                "multi_query_attention": kv_heads < heads, "multi_query_group_num": kv_heads}
    config = {"model_type": family, "hidden_size": d_model, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "num_hidden_layers": layers}
    if head_dim * heads != d_model:
        config["head_dim"] = head_dim
    if family == "llama4":
        text = dict(config, model_type="llama4_text", use_qk_norm=True)
        return {"model_type": "llama4", "text_config": text}
    return config  # baichuan, internlm2, opt, phi


MAP_FILE = {"q": "blocks.{i}.mix.wq", "k": "blocks.{i}.mix.wk", "v": "blocks.{i}.mix.wv",
            "o": "blocks.{i}.mix.wo", "layout": "in_out"}


# ---- the llama-named families of today (MODERN) ----------------------------------------------

def qk_norm_gains(rng, spec, heads, kv_heads, head_dim, dtype):
    """The stored q_norm / k_norm weights (rounded to dtype) and, per head, the gain the dot
    product sees: stored + offset (Gemma's 1 + weight)."""
    offset = spec.get("offset", 0.0)

    def one(count):
        shared = spec["qk_norm"] in ("head", "layernorm")
        width = head_dim if shared else count * head_dim
        stored = round_to(np.exp(rng.standard_normal(width)) - offset, dtype)
        effective = stored + offset
        if shared:
            return stored, [effective] * count
        per_head = list(effective.reshape(count, head_dim))
        if spec["qk_norm"] == "heads":  # Cohere: one 2-D weight
            return stored.reshape(count, head_dim), per_head
        if spec["qk_norm"] == "per_head":  # StableLM: one tensor per head
            return list(stored.reshape(count, head_dim)), per_head
        return stored, per_head

    q_stored, q_gain = one(heads)
    k_stored, k_gain = one(kv_heads)
    return q_stored, k_stored, q_gain, k_gain


def expert_tensors(kind, base, d_model, ffn=16, experts=2):
    """MoE MLP tensors of one layer, all NaN: analysing attention must never read them."""
    nan = lambda *shape: np.full(shape, np.nan)  # noqa: E731
    tensors = {}
    if kind == "mixtral":  # MixtralSparseMoeBlock: gate + experts.{e}.w1/w2/w3
        tensors[base + "block_sparse_moe.gate.weight"] = nan(experts, d_model)
        for e in range(experts):
            for name, shape in (("w1", (ffn, d_model)), ("w2", (d_model, ffn)), ("w3", (ffn, d_model))):
                tensors[f"{base}block_sparse_moe.experts.{e}.{name}.weight"] = nan(*shape)
        return tensors
    tensors[base + "mlp.gate.weight"] = nan(experts, d_model)  # Qwen2/3-MoE: mlp.experts.{e}.*
    mlps = [f"mlp.experts.{e}." for e in range(experts)]
    if kind == "qwen2_moe":
        mlps.append("mlp.shared_expert.")
        tensors[base + "mlp.shared_expert_gate.weight"] = nan(1, d_model)
    for mlp in mlps:
        for name, shape in (("gate_proj", (ffn, d_model)), ("up_proj", (ffn, d_model)),
                            ("down_proj", (d_model, ffn))):
            tensors[f"{base}{mlp}{name}.weight"] = nan(*shape)
    return tensors


def modern_tensors(family, i, m, norms, rng, dtype):
    spec = MODERN[family]
    prefix = spec.get("prefix", "model.layers")
    tensors = llama_tensors(i, m, prefix)
    base = f"{prefix}.{i}."
    if norms is not None and spec["qk_norm"] == "per_head":
        for role, stored in zip("qk", norms):
            for h, gain in enumerate(stored):
                tensors[f"{base}self_attn.{role}_layernorm.norms.{h}.weight"] = gain
    elif norms is not None and spec["qk_norm"] == "layernorm":  # a bias too: no part of the form
        for role, stored in zip("qk", norms):
            tensors[f"{base}self_attn.{role}_layernorm.weight"] = stored
            tensors[f"{base}self_attn.{role}_layernorm.bias"] = round_to(
                rng.standard_normal(stored.shape), dtype)
    elif norms is not None:
        tensors[base + "self_attn.q_norm.weight"], tensors[base + "self_attn.k_norm.weight"] = norms
    if spec.get("bias"):  # present, and not part of the bilinear form W_Q W_Kᵀ
        for role, rows in (("q", len(m.q)), ("k", len(m.k)), ("v", len(m.v))):
            tensors[f"{base}self_attn.{role}_proj.bias"] = round_to(
                rng.standard_normal(rows * m.q[0].shape[0]), dtype)
        if family == "llama_bias":
            tensors[base + "self_attn.o_proj.bias"] = round_to(rng.standard_normal(m.o[0].shape[0]), dtype)
    if spec.get("experts"):
        tensors.update(expert_tensors(spec["experts"], base, m.q[0].shape[1]))
    if spec["model_type"] == "phi":  # PhiAttention's output projection is `dense`
        tensors = {k.replace("o_proj", "dense"): v for k, v in tensors.items()}
    if family == "gemma3_mm":  # the SigLIP vision tower: attention-named, NaN, never read
        vision = f"vision_tower.vision_model.encoder.layers.{i}.self_attn."
        for role in ("q", "k", "v", "out"):
            tensors[vision + role + "_proj.weight"] = np.full((16, 16), np.nan)
    return tensors


def modern_config(family, layers, heads, kv_heads, head_dim, d_model):
    spec = MODERN[family]
    config = {"model_type": spec["model_type"], "hidden_size": d_model, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "num_hidden_layers": layers, "rms_norm_eps": 1e-6}
    if family not in ("olmo2", "stablelm") or head_dim * heads != d_model:  # theirs have none
        config["head_dim"] = head_dim
    if spec.get("qk_norm") in ("heads", "per_head", "layernorm"):  # LayerNorms: no RMSNorm epsilon
        del config["rms_norm_eps"]
    if family == "phi_qk":
        config.update(qk_layernorm=True, layer_norm_eps=1e-5, partial_rotary_factor=0.5)
    if family == "stablelm":
        config.update(qk_layernorm=True, layer_norm_eps=1e-5, partial_rotary_factor=0.25)
    if family == "cohere":
        config.update(use_qk_norm=True, layer_norm_eps=1e-5, logit_scale=0.0625)
    if family.startswith("gemma"):
        config["query_pre_attn_scalar"] = head_dim
    if family == "gemma2":
        config["attn_logit_softcapping"] = 50.0
    if spec.get("experts") == "mixtral":
        config.update(num_local_experts=2, num_experts_per_tok=1)
    elif spec.get("experts"):
        config.update(num_experts=2, num_experts_per_tok=1, moe_intermediate_size=16)
    if family == "llama_bias":
        config["attention_bias"] = True
    if family == "gemma3_mm":  # Gemma3ForConditionalGeneration: text geometry nested
        config["model_type"] = "gemma3_text"
        vision = {"model_type": "siglip_vision_model", "hidden_size": 16, "num_attention_heads": 2,
                  "num_hidden_layers": layers + 2, "head_dim": 8}
        return {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
                "text_config": config, "vision_config": vision}
    return config


def config_for(family, layers, heads, kv_heads, head_dim, d_model):
    if family in FAMILIES[FAMILIES.index("bloom"):]:
        return fused_config(family, layers, heads, kv_heads, head_dim, d_model)
    if family in MODERN:
        return modern_config(family, layers, heads, kv_heads, head_dim, d_model)
    if family == "llama":
        config = {"model_type": "llama", "hidden_size": d_model, "num_attention_heads": heads,
                  "num_key_value_heads": kv_heads, "num_hidden_layers": layers}
        if head_dim * heads != d_model:
            config["head_dim"] = head_dim
        return config
    if family == "phi3":
        return {"model_type": "phi3", "hidden_size": d_model, "num_attention_heads": heads,
                "num_key_value_heads": kv_heads, "num_hidden_layers": layers}
    if family == "gpt2":
        return {"model_type": "gpt2", "n_embd": d_model, "n_head": heads, "n_layer": layers}
    if family == "gpt_neox":
        return {"model_type": "gpt_neox", "hidden_size": d_model, "num_attention_heads": heads,
                "num_hidden_layers": layers}
    if family.startswith("falcon"):
        config = {"model_type": "falcon", "hidden_size": d_model, "num_attention_heads": heads,
                  "num_hidden_layers": layers, "new_decoder_architecture": family == "falcon_new",
                  "multi_query": family == "falcon_mq"}
        if family == "falcon_new":
            config["num_kv_heads"] = kv_heads
        return config
    return None  # map, kvonly: no config.json


def layer_tensors(family, i, m, prefix):
    if family == "llama":
        return llama_tensors(i, m)
    if family == "gpt2":
        return gpt2_tensors(i, m, prefix)
    if family == "gpt_neox":
        return neox_tensors(i, m)
    if family.startswith("falcon"):
        return falcon_tensors(i, m, family.split("_")[1])
    if family == "phi3":
        return phi3_tensors(i, m)
    if family == "map":
        return map_tensors(i, m)
    return fused_tensors(family, i, m)


def write_family(family, out_dir, ref_dir, dtype="F32", seed=0, layers=3, heads=8, kv_heads=None,
                 head_dim=None, d_model=32, prefix=True):
    """Writes the checkpoint and reference factors; returns (tensors dict, config or None)."""
    kv_heads = heads if kv_heads is None else kv_heads
    head_dim = d_model // heads if head_dim is None else head_dim
    if family in MHA_ONLY:
        kv_heads = heads
    if family in ("falcon_mq", "gpt_bigcode_mq"):
        kv_heads = 1
    assert heads % kv_heads == 0
    rng = np.random.default_rng(seed)
    os.makedirs(out_dir, exist_ok=True)
    os.makedirs(ref_dir, exist_ok=True)
    per_layer = [Heads(rng, i, heads, kv_heads, head_dim, d_model, dtype) for i in range(layers)]
    norms, seen = [None] * layers, list(per_layer)  # seen: the heads as the dot product sees them
    if MODERN.get(family, {}).get("qk_norm"):
        for i, m in enumerate(per_layer):
            q_stored, k_stored, q_gain, k_gain = qk_norm_gains(rng, MODERN[family], heads, kv_heads,
                                                               head_dim, dtype)
            centred = MODERN[family]["qk_norm"] in ("heads", "per_head", "layernorm")  # LayerNorms
            norms[i], seen[i] = (q_stored, k_stored), m.with_gains(q_gain, k_gain, centred)
    save_reference_factors(ref_dir, dict(enumerate(seen)))

    if family == "kvonly":  # NPY files of k_proj / v_proj only; no config, no queries
        for i, m in enumerate(per_layer):
            np_dtype = {"F32": "<f4", "F16": "<f2"}[dtype]
            np.save(os.path.join(out_dir, f"layers.{i}.k_proj.npy"), np.concatenate(m.k).astype(np_dtype))
            np.save(os.path.join(out_dir, f"layers.{i}.v_proj.npy"), np.concatenate(m.v).astype(np_dtype))
        return None, None

    tensors = {}
    for i, m in enumerate(per_layer):
        if family in MODERN:
            tensors.update(modern_tensors(family, i, m, norms[i], rng, dtype))
        else:
            tensors.update(layer_tensors(family, i, m, "transformer." if prefix else ""))
    # Non-attention tensors that detection must ignore.
    tensors["embed.weight" if family == "map" else "model.embed_tokens.weight"] = round_to(
        rng.standard_normal((16, d_model)), dtype)
    config = config_for(family, layers, heads, kv_heads, head_dim, d_model)
    write_checkpoint(out_dir, tensors, config, dtype)
    if family == "map":
        with open(os.path.join(ref_dir, "map.json"), "w") as f:
            json.dump(dict(MAP_FILE, heads=heads, kv_heads=kv_heads, head_dim=head_dim), f, indent=2)
    return tensors, config


# ---- hybrids: attention in some layers, Mamba or linear attention in the others ---------------
#   jamba:            JambaAttentionDecoderLayer where i % attn_layer_period == attn_layer_offset,
#                     JambaMambaDecoderLayer (mamba.*) elsewhere;
#   granitemoehybrid: layer_types "attention" / "mamba" (GraniteMoeHybridDecoderLayer: self_attn
#                     or mamba);
#   qwen3_next:       full_attention_interval n: layer i is "full_attention" when (i + 1) % n == 0,
#                     else "linear_attention" (Qwen3NextGatedDeltaNet, linear_attn.*). Its q_proj is
#                     [H·2·d_h, d]: per head d_h query rows, then d_h gate rows (torch.chunk of
#                     q_proj(x).view(…, H, 2·d_h)); q_norm / k_norm are RMSNorms with gain 1 + w;
#   bamba:            attn_layer_indices [i, …]: the attention layers, Mamba 2 (mamba.*) elsewhere.
HYBRIDS = {
    "jamba": dict(attention=lambda i: i % 4 == 2, config=dict(attn_layer_period=4,
                                                              attn_layer_offset=2),
                  other="mamba"),
    "granitemoehybrid": dict(attention=lambda i: i % 3 == 1, other="mamba"),
    "qwen3_next": dict(attention=lambda i: (i + 1) % 4 == 0, config=dict(full_attention_interval=4),
                       other="linear_attn"),
    # BambaConfig: attn_layer_indices lists the BambaAttentionDecoderLayers, Mamba 2 elsewhere.
    "bamba": dict(attention=lambda i: i in (1, 5), config=dict(attn_layer_indices=[1, 5]),
                  other="mamba"),
}

def other_layer_tensors(kind, base, d_model):
    """A Mamba or linear-attention block's tensors, all NaN: they have no attention heads."""
    names = {"mamba": ("mamba.in_proj.weight", "mamba.out_proj.weight", "mamba.A_log"),
             "linear_attn": ("linear_attn.in_proj_qkvz.weight", "linear_attn.in_proj_ba.weight",
                             "linear_attn.out_proj.weight")}[kind]
    return {base + name: np.full((2 * d_model, d_model), np.nan) for name in names}


def write_hybrid(family, out_dir, ref_dir, dtype="F32", seed=0, layers=8, heads=8, kv_heads=None,
                 head_dim=None, d_model=32):
    """A hybrid checkpoint: reference factors (layer{i}: i the model's own layer number) for its
    attention layers only. Returns (tensors, config, attention layer numbers)."""
    spec = HYBRIDS[family]
    kv_heads = heads if kv_heads is None else kv_heads
    head_dim = d_model // heads if head_dim is None else head_dim
    rng = np.random.default_rng(seed)
    attention = [i for i in range(layers) if spec["attention"](i)]
    tensors, seen = {}, {}
    for i in range(layers):
        base = f"model.layers.{i}."
        if i not in attention:
            tensors.update(other_layer_tensors(spec["other"], base, d_model))
            continue
        m = Heads(rng, i, heads, kv_heads, head_dim, d_model, dtype)
        tensors.update(llama_tensors(i, m))
        seen[i] = m
        if family != "qwen3_next":
            continue
        gates = round_to(rng.standard_normal((heads, head_dim, d_model)), dtype)
        tensors[base + "self_attn.q_proj.weight"] = np.concatenate(
            [block for h in range(heads) for block in (m.q[h], gates[h])])
        norm_spec = dict(qk_norm="head", offset=1.0)
        q_stored, k_stored, q_gain, k_gain = qk_norm_gains(rng, norm_spec, heads, kv_heads,
                                                           head_dim, dtype)
        tensors[base + "self_attn.q_norm.weight"] = q_stored
        tensors[base + "self_attn.k_norm.weight"] = k_stored
        seen[i] = m.with_gains(q_gain, k_gain)
    tensors["model.embed_tokens.weight"] = round_to(rng.standard_normal((16, d_model)), dtype)
    config = {"model_type": family, "hidden_size": d_model, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "num_hidden_layers": layers, "head_dim": head_dim}
    config.update(spec.get("config", {}))
    if family == "granitemoehybrid":
        config["layer_types"] = ["attention" if i in attention else "mamba" for i in range(layers)]
    save_reference_factors(ref_dir, seen)
    write_checkpoint(out_dir, tensors, config, dtype)
    return tensors, config, attention


# ---- zamba2: shared attention blocks with per-layer adapters, before some Mamba layers -----------
# Zamba2Model (transformers' modeling_zamba2.py): layers_block_type "hybrid" / "mamba"; a hybrid
# layer i is Zamba2HybridLayer(shared_transformer, linear, mamba_decoder), a mamba layer
# Zamba2MambaDecoderLayer (mamba.*, input_layernorm). The num_mem_blocks Zamba2AttentionDecoderLayer
# blocks are cycled over the hybrid layers: the k-th hybrid layer (k = its index in
# hybrid_layer_ids, Zamba2Attention.layer_dic) uses block k % num_mem_blocks and, with
# use_shared_attention_adapter, that block's linear_{q,k,v}_adapter_list[k] = Sequential(A [r, 2d],
# B [2d, r]): query = q_proj(x) + B(A(x)), x = [hidden; embeddings] of width 2d; o_proj
# [d, H·d_h] has no adapter. head_dim = attention_head_dim = 2d / H, and H_kv = H (the adapters'
# 2d outputs are added to k and v). A saved checkpoint holds a block once, under its first hybrid
# layer (module order; vLLM's Zamba2 load_weights looks q_proj up only there), with every adapter
# of that block; `copies` also writes the tied copies under its later layers.
ZAMBA2_LAYERS = ["mamba", "mamba", "hybrid", "mamba", "hybrid", "mamba", "hybrid", "hybrid"]


def zamba2_block_tensors(base, m, adapters, d, rank):
    """One block's tensors under `base` (…layers.{i}.shared_transformer.), with the adapters of
    every hybrid layer k that uses it; NaN where kvrank must not read (MLP, norms)."""
    attn = base + "self_attn."
    tensors = {attn + f"{role}_proj.weight": np.concatenate(getattr(m, role)) for role in "qkv"}
    tensors[attn + "o_proj.weight"] = np.concatenate(m.o, 1)
    for k, (a, b) in adapters.items():
        for role in "qkv":
            tensors[f"{attn}linear_{role}_adapter_list.{k}.0.weight"] = a[role]
            tensors[f"{attn}linear_{role}_adapter_list.{k}.1.weight"] = b[role]
        for part, shape in ((0, (rank, d)), (1, (8 * d, rank))):
            mlp_adapter = f"{base}feed_forward.gate_up_proj_adapter_list.{k}.{part}.weight"
            tensors[mlp_adapter] = np.full(shape, np.nan)
    tensors.update({base + "feed_forward.gate_up_proj.weight": np.full((8 * d, d), np.nan),
                    base + "feed_forward.down_proj.weight": np.full((d, 4 * d), np.nan),
                    base + "input_layernorm.weight": np.full(2 * d, np.nan),
                    base + "pre_ff_layernorm.weight": np.full(d, np.nan)})
    return tensors


def zamba2_mamba_tensors(base, d):
    """A Zamba2MambaDecoderLayer's tensors, all NaN: no attention heads."""
    return {base + name: np.full(shape, np.nan) for name, shape in (
        ("mamba.in_proj.weight", (4 * d, d)), ("mamba.conv1d.weight", (2 * d, 1, 4)),
        ("mamba.A_log", (2,)), ("mamba.D", (2,)), ("mamba.dt_bias", (2,)),
        ("mamba.norm.weight", (2 * d,)), ("mamba.out_proj.weight", (d, 2 * d)),
        ("input_layernorm.weight", (d,)))}


def write_zamba2(out_dir, ref_dir, dtype="F32", seed=0, heads=4, hidden=12, rank=3, blocks=2,
                 adapters=True, copies=False):
    """A Zamba 2 checkpoint over ZAMBA2_LAYERS; reference factors (layer{i}: i the model's own layer
    number) of each hybrid layer's effective projections W + B·A. Returns (tensors, config, hybrid
    layer numbers)."""
    rng = np.random.default_rng(seed)
    d_in, head_dim = 2 * hidden, 2 * hidden // heads
    hybrid = [i for i, kind in enumerate(ZAMBA2_LAYERS) if kind == "hybrid"]
    shared = []
    for block in range(blocks):  # q, k, v act on [hidden; embeddings]; o_proj writes `hidden`
        m = Heads(rng, block, heads, heads, head_dim, d_in, dtype)
        m.o = round_to(make_heads(rng, heads, hidden, head_dim, block), dtype)
        shared.append(m)
    tensors = {"model.embed_tokens.weight": round_to(rng.standard_normal((16, hidden)), dtype),
               "model.final_layernorm.weight": np.full(hidden, np.nan)}
    seen = {}
    owned = {block: {} for block in range(blocks)}  # block → {k: (A by role, B by role)}
    for k, i in enumerate(hybrid):
        m = copy.copy(shared[k % blocks])
        if adapters:  # small next to the shared weights, as a LoRA is
            a = {r: round_to(rng.standard_normal((rank, d_in)) / np.sqrt(d_in), dtype)
                 for r in "qkv"}
            b = {r: round_to(0.5 * rng.standard_normal((d_in, rank)) / np.sqrt(rank), dtype)
                 for r in "qkv"}
            owned[k % blocks][k] = (a, b)
            for r in "qkv":
                effective = np.concatenate(getattr(m, r)) + b[r] @ a[r]
                setattr(m, r, list(effective.reshape(heads, head_dim, d_in)))
        seen[i] = m
    for k, i in enumerate(hybrid):
        base = f"model.layers.{i}."
        tensors.update(zamba2_mamba_tensors(base + "mamba_decoder.", hidden))
        tensors[base + "linear.weight"] = np.full((hidden, hidden), np.nan)
        if k < blocks or copies:
            tensors.update(zamba2_block_tensors(base + "shared_transformer.", shared[k % blocks],
                                                owned[k % blocks], hidden, rank))
    for i, kind in enumerate(ZAMBA2_LAYERS):
        if kind == "mamba":
            tensors.update(zamba2_mamba_tensors(f"model.layers.{i}.", hidden))
    config = {"model_type": "zamba2", "architectures": ["Zamba2ForCausalLM"], "hidden_size": hidden,
              "num_attention_heads": heads, "num_key_value_heads": heads,
              "num_hidden_layers": len(ZAMBA2_LAYERS), "layers_block_type": ZAMBA2_LAYERS,
              "hybrid_layer_ids": hybrid, "attention_hidden_size": d_in,
              "attention_head_dim": head_dim, "num_mem_blocks": blocks,
              "use_shared_attention_adapter": adapters, "use_shared_mlp_adapter": True,
              "adapter_rank": rank, "use_mem_rope": True, "intermediate_size": 4 * hidden,
              "mamba_expand": 2, "n_mamba_heads": 2}
    save_reference_factors(ref_dir, seen)
    write_checkpoint(out_dir, tensors, config, dtype)
    return tensors, config, hybrid


def write_checkpoint(out_dir, tensors, config, dtype):
    os.makedirs(out_dir, exist_ok=True)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, dtype)
    if config is not None:
        with open(os.path.join(out_dir, "config.json"), "w") as f:
            json.dump(config, f, indent=2)


# --dtype as every writer takes it.
DTYPE_OPTION = ("--dtype", dict(default="F32", choices=["F32", "BF16", "F16"]))


def writer_arguments(doc, positional, options=()):
    """A writer's command line, parsed from sys.argv: the `positional` arguments by name,
    --seed N (default 0), then `options`, each a (flag, argparse keywords) pair; the usage line
    is the first line of the writer's `doc`."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name in positional:
        parser.add_argument(name)
    parser.add_argument("--seed", type=int, default=0)
    for flag, keywords in options:
        parser.add_argument(flag, **keywords)
    return parser.parse_args()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("family", choices=FAMILIES + list(HYBRIDS) + ["zamba2"])
    parser.add_argument("out_dir")
    parser.add_argument("ref_dir")
    parser.add_argument("--dtype", default="F32", choices=["F32", "BF16", "F16"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int)
    parser.add_argument("--head-dim", type=int)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--no-prefix", action="store_true", help="gpt2 without 'transformer.'")
    args = parser.parse_args()
    if args.family == "zamba2":  # its own geometry: H_kv = H, head_dim = 2·d / H
        write_zamba2(args.out_dir, args.ref_dir, args.dtype, args.seed, args.heads, args.d_model)
        return 0
    if args.family in HYBRIDS:
        write_hybrid(args.family, args.out_dir, args.ref_dir, args.dtype, args.seed,
                     max(args.layers, 8), args.heads, args.kv_heads, args.head_dim, args.d_model)
        return 0
    write_family(args.family, args.out_dir, args.ref_dir, args.dtype, args.seed, args.layers,
                 args.heads, args.kv_heads, args.head_dim, args.d_model, not args.no_prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main())
