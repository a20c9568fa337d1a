#!/usr/bin/env python3
"""Writes an MLA (DeepSeek-V2/V3) or LRKV checkpoint in its real tensor layout from explicit
matrices, plus the explicit per-head factors scripts/reference.py needs to check kvrank on it.

Independent of kvrank's C++ code: the per-head effective projections are assembled in float64
straight from the layout definitions of docs/families.md (DeepSeek's modelling code for MLA), from the
values the file actually holds (after rounding to --dtype, or FP8 quantisation and block scaling).

  write_latent_checkpoints.py mla OUT_DIR REF_DIR [--dtype F32|BF16|F16|F8_E4M3] [--layers N]
        [--heads H] [--hidden D] [--kv-lora-rank C] [--q-lora-rank Q (0: q_proj)] [--nope N]
        [--rope R] [--v-head-dim V] [--block ROWS COLS] [--share S] [--minimal-config] [--drop NAME]...
  write_latent_checkpoints.py lrkv OUT_DIR REF_DIR [--dtype ...as above] [--layers N]
        [--heads H] [--head-dim D_H] [--hidden D] [--rank R] [--minimal-config] [--drop NAME]...

OUT_DIR receives config.json + model.safetensors. REF_DIR receives qk.npz, ov.npz, k.npz, v.npz:
layer{i}.L, layer{i}.R of shape [H, d, k] with A_h = L_h R_hᵀ (`reference.py heads FILE.npz`).

MLA, per layer (c = kv_lora_rank, n = nope, r = rope, v = v_head_dim):
  W_Q^h = q_proj[h(n+r):(h+1)(n+r)]ᵀ, or (q_b_h · diag(γ_q) · q_a)ᵀ with q_lora
  W_K^h = [kv_b_h,K · diag(γ_kv) · kv_a[:c] ; kv_a[c:]]ᵀ        (kv_b_h = rows [h(n+v), (h+1)(n+v)),
  W_V^h = (kv_b_h,V · diag(γ_kv) · kv_a[:c])ᵀ                     K = its first n rows, V the rest)
  W_O^h = o_proj[:, h·v:(h+1)·v]
With --dtype F8_E4M3 the Linear weights are stored as OCP E4M3 (encoded here with numpy bit logic)
with `<name>_scale_inv` F32 block scales ([ceil(rows/br), ceil(cols/bc)], block from --block,
written to config.json's quantization_config), RMSNorm gains as BF16 — like DeepSeek-V3.

LRKV: W_K^h = (k_shared + k_lora_b[h·d_h:(h+1)·d_h] · k_lora_a[h·r:(h+1)·r])ᵀ, V likewise.

--minimal-config leaves out every dimension kvrank can infer from tensor shapes (MLA keeps
num_attention_heads). --drop removes a tensor by name (to test the error for a missing tensor).
stdlib + numpy only.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from write_family_checkpoints import (  # noqa: E402  (dtype rounding, safetensors layout)
    bf16_bits, round_to, write_safetensors_entries)

# ---- OCP FP8 E4M3 ("fn"): decoded with bit logic, encoded to the nearest code ----------------


def e4m3_decode(codes):
    codes = np.asarray(codes, dtype=np.uint8).astype(np.int64)
    sign = np.where(codes >> 7, -1.0, 1.0)
    exponent = (codes >> 3) & 0xF
    mantissa = codes & 0x7
    value = np.where(exponent == 0, mantissa / 8.0 * 2.0 ** -6,
                     (1.0 + mantissa / 8.0) * np.exp2(exponent - 7.0))
    value = np.where((exponent == 0xF) & (mantissa == 0x7), np.nan, value)
    return sign * value


_E4M3_POSITIVE = e4m3_decode(np.arange(0x7F))  # codes 0..126: every finite non-negative value


def e4m3_encode(values):
    """Nearest E4M3 code (ties to the even code), saturating at ±448."""
    values = np.asarray(values, dtype=np.float64)
    magnitude = np.minimum(np.abs(values), 448.0)
    upper = np.clip(np.searchsorted(_E4M3_POSITIVE, magnitude), 1, len(_E4M3_POSITIVE) - 1)
    lower = upper - 1
    below = magnitude - _E4M3_POSITIVE[lower]
    above = _E4M3_POSITIVE[upper] - magnitude
    pick_lower = (below < above) | ((below == above) & (lower % 2 == 0))
    code = np.where(pick_lower, lower, upper).astype(np.uint8)
    return np.where(values < 0, code | 0x80, code).astype(np.uint8)


def fp8_block_quantize(weight, block):
    """(codes, scale_inv, dequantized float64) of a 2-D weight, one scale per block."""
    br, bc = block
    rows, cols = weight.shape
    scales = np.ones((math.ceil(rows / br), math.ceil(cols / bc)), dtype=np.float32)
    codes = np.zeros(weight.shape, dtype=np.uint8)
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            tile = weight[i * br:(i + 1) * br, j * bc:(j + 1) * bc]
            amax = float(np.abs(tile).max())
            scales[i, j] = np.float32(amax / 448.0) if amax > 0 else np.float32(1.0)
            codes[i * br:(i + 1) * br, j * bc:(j + 1) * bc] = e4m3_encode(tile / scales[i, j])
    expanded = np.repeat(np.repeat(scales, br, axis=0), bc, axis=1)[:rows, :cols]
    # The reader multiplies in float32; so does the reference.
    dequantized = (e4m3_decode(codes).astype(np.float32) * expanded).astype(np.float64)
    return codes, scales, dequantized


# ---- safetensors with a dtype per tensor ------------------------------------------------------


class TensorStore:
    """Collects tensors as the file will hold them, and the float64 values the reader will see."""

    def __init__(self, dtype, block):
        self.dtype = dtype
        self.block = block
        self.entries = {}  # name → (dtype, shape, bytes)

    def _put(self, name, dtype, shape, blob):
        self.entries[name] = (dtype, list(shape), blob)

    def _put_float(self, name, values, dtype):
        values = np.asarray(values, dtype=np.float64)
        if dtype == "F32":
            blob = values.astype("<f4").tobytes()
        elif dtype == "F16":
            blob = values.astype("<f2").tobytes()
        else:
            blob = bf16_bits(values).astype("<u2").tobytes()
        self._put(name, dtype, values.shape, blob)
        return round_to(values, dtype)

    def linear(self, name, values):
        """A Linear weight; returns the values as stored (dequantized for FP8)."""
        if self.dtype != "F8_E4M3":
            return self._put_float(name, values, self.dtype)
        codes, scales, dequantized = fp8_block_quantize(values, self.block)
        self._put(name, "F8_E4M3", values.shape, codes.tobytes())
        self._put(name + "_scale_inv", "F32", scales.shape, scales.astype("<f4").tobytes())
        return dequantized

    def gain(self, name, values):
        """An RMSNorm gain (BF16 next to FP8 weights, like DeepSeek-V3)."""
        return self._put_float(name, values, "BF16" if self.dtype == "F8_E4M3" else self.dtype)

    def write(self, path, drop=()):
        write_safetensors_entries(
            path, {name: entry for name, entry in self.entries.items() if name not in drop})


def mixed_heads(rng, count, rows, cols, share):
    """count [rows, cols] matrices: (1 - share)·own + share·common, so heads are partly alike."""
    common = rng.standard_normal((rows, cols))
    return [(1 - share) * rng.standard_normal((rows, cols)) + share * common for _ in range(count)]


def layer_share(layer):
    return [0.0, 0.6, 0.3, 0.85][layer % 4]


# ---- MLA ----------------------------------------------------------------------------------------


def mla_layer(store, rng, i, a):
    H, d, c, n, r, v, ql = (a.heads, a.hidden, a.kv_lora_rank, a.nope, a.rope, a.v_head_dim,
                            a.q_lora_rank)
    p = f"model.layers.{i}.self_attn."
    scale = 1.0 / math.sqrt(d)
    share = layer_share(i) if a.share is None else a.share
    kv_a = store.linear(p + "kv_a_proj_with_mqa.weight", rng.standard_normal((c + r, d)) * scale)
    g_kv = store.gain(p + "kv_a_layernorm.weight", 0.5 + rng.random(c))
    kv_b_heads = mixed_heads(rng, H, n + v, c, share)
    kv_b = store.linear(p + "kv_b_proj.weight", np.concatenate(kv_b_heads) / math.sqrt(c))
    q_heads = mixed_heads(rng, H, n + r, ql if ql else d, share)
    if ql:
        q_a = store.linear(p + "q_a_proj.weight", rng.standard_normal((ql, d)) * scale)
        g_q = store.gain(p + "q_a_layernorm.weight", 0.5 + rng.random(ql))
        q_b = store.linear(p + "q_b_proj.weight", np.concatenate(q_heads) / math.sqrt(ql))
        q_rows = q_b @ np.diag(g_q) @ q_a
    else:
        q_rows = store.linear(p + "q_proj.weight", np.concatenate(q_heads) * scale)
    o = store.linear(p + "o_proj.weight", rng.standard_normal((d, H * v)) * scale)

    latent = np.diag(g_kv) @ kv_a[:c]
    wq, wk, wv, wo = [], [], [], []
    for h in range(H):
        block = kv_b[h * (n + v):(h + 1) * (n + v)]
        wq.append(q_rows[h * (n + r):(h + 1) * (n + r)].T)
        wk.append(np.concatenate([block[:n] @ latent, kv_a[c:]]).T)
        wv.append((block[n:] @ latent).T)
        wo.append(o[:, h * v:(h + 1) * v])
    return wq, wk, wv, wo


def mla_config(a):
    config = {"model_type": "deepseek_v3" if a.dtype == "F8_E4M3" else "deepseek_v2",
              "architectures": ["DeepseekV3ForCausalLM"], "num_attention_heads": a.heads}
    if not a.minimal_config:
        config.update(num_hidden_layers=a.layers, hidden_size=a.hidden,
                      num_key_value_heads=a.heads, kv_lora_rank=a.kv_lora_rank,
                      q_lora_rank=a.q_lora_rank or None, qk_nope_head_dim=a.nope,
                      qk_rope_head_dim=a.rope, v_head_dim=a.v_head_dim)
    if a.dtype == "F8_E4M3":
        config["quantization_config"] = fp8_quantization_config(a)
    return config


def fp8_quantization_config(a):
    return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
            "weight_block_size": list(a.block)}


# ---- LRKV ---------------------------------------------------------------------------------------


def lrkv_layer(store, rng, i, a):
    H, d, dh, r = a.heads, a.hidden, a.head_dim, a.rank
    p = f"model.layers.{i}.self_attn."
    scale = 1.0 / math.sqrt(d)
    lora_scale = 0.3 * (i + 1) / math.sqrt(max(r, 1))
    q = store.linear(p + "q_proj.weight",
                     np.concatenate(mixed_heads(rng, H, dh, d, layer_share(i))) * scale)
    o = store.linear(p + "o_proj.weight", rng.standard_normal((d, H * dh)) * scale)
    effective = {}
    for which in ("k", "v"):
        shared = store.linear(p + f"{which}_shared_proj.weight",
                              rng.standard_normal((dh, d)) * scale)
        lora_a = store.linear(p + f"{which}_lora_a.weight", rng.standard_normal((H * r, d)) * scale)
        lora_b = store.linear(p + f"{which}_lora_b.weight",
                              rng.standard_normal((H * dh, r)) * lora_scale)
        effective[which] = [(shared + lora_b[h * dh:(h + 1) * dh] @ lora_a[h * r:(h + 1) * r]).T
                            for h in range(H)]
    wq = [q[h * dh:(h + 1) * dh].T for h in range(H)]
    wo = [o[:, h * dh:(h + 1) * dh] for h in range(H)]
    return wq, effective["k"], effective["v"], wo


def lrkv_config(a):
    config = {"model_type": "llama", "attention_variant": "lrkv",
              "architectures": ["LlamaForCausalLM"]}
    if not a.minimal_config:
        config.update(num_hidden_layers=a.layers, hidden_size=a.hidden,
                      num_attention_heads=a.heads, num_key_value_heads=a.heads,
                      head_dim=a.head_dim, lrkv_rank=a.rank)
    if a.dtype == "F8_E4M3":
        config["quantization_config"] = fp8_quantization_config(a)
    return config


# ---- driver -------------------------------------------------------------------------------------


def write_latent(a):
    rng = np.random.default_rng(a.seed)
    store = TensorStore(a.dtype, a.block)
    build, config = (mla_layer, mla_config(a)) if a.family == "mla" else (lrkv_layer, lrkv_config(a))
    refs = {"qk": {}, "ov": {}, "k": {}, "v": {}}
    for i in range(a.layers):
        wq, wk, wv, wo = build(store, rng, i, a)
        for name, (left, right) in {"qk": (wq, wk), "ov": (wo, wv), "k": (wk, wk),
                                    "v": (wv, wv)}.items():
            refs[name][f"layer{i}.L"] = np.stack(left)
            refs[name][f"layer{i}.R"] = np.stack(right)
    os.makedirs(a.out_dir, exist_ok=True)
    os.makedirs(a.ref_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    store.write(os.path.join(a.out_dir, "model.safetensors"), set(a.drop))
    for name, arrays in refs.items():
        np.savez(os.path.join(a.ref_dir, name + ".npz"), **arrays)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("family", choices=["mla", "lrkv"])
    parser.add_argument("out_dir")
    parser.add_argument("ref_dir")
    parser.add_argument("--dtype", default="F32", choices=["F32", "BF16", "F16", "F8_E4M3"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=48)
    parser.add_argument("--kv-lora-rank", type=int, default=12)
    parser.add_argument("--q-lora-rank", type=int, default=0)
    parser.add_argument("--nope", type=int, default=6)
    parser.add_argument("--rope", type=int, default=4)
    parser.add_argument("--v-head-dim", type=int, default=5)
    parser.add_argument("--head-dim", type=int, default=8)
    parser.add_argument("--rank", type=int, default=2)
    parser.add_argument("--block", type=int, nargs=2, default=[128, 128], metavar=("ROWS", "COLS"))
    parser.add_argument("--share", type=float, default=None,
                        help="the common part of every head's kv_b and q rows (default by layer)")
    parser.add_argument("--minimal-config", action="store_true")
    parser.add_argument("--drop", action="append", default=[])
    return parser.parse_args(argv)


if __name__ == "__main__":
    write_latent(parse_args())
