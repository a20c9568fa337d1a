#!/usr/bin/env python3
"""Writes one model twice from the same per-head matrices: as a TransformerLens HookedTransformer
state dict (safetensors or npz) and as the equivalent Hugging Face llama checkpoint, plus the
per-head factors scripts/reference.py needs. Independent of kvrank's C++ code.

TransformerLens keeps every weight as [..., d_in, d_out] per head (transformer_lens/components/
abstract_attention.py): blocks.{l}.attn.W_Q [H, d, d_h], W_K / W_V [H, d, d_h], W_O [H, d_h, d];
with grouped-query attention (n_key_value_heads) its parameters are _W_K / _W_V [H_kv, d, d_h]
(W_K is a property repeating them per query head). Biases b_Q … and the blocks' LayerNorms and MLPs
are written too (the non-attention ones NaN: kvrank must never read them).

  write_transformer_lens.py OUT_DIR REF_DIR [--heads H] [--kv-heads H_kv] [--npz] [--seed N]

OUT_DIR receives tl/model.safetensors (or tl/state_dict.npz) and hf/{config.json,model.safetensors};
REF_DIR receives qk.npz … as write_family_checkpoints.py writes them. Also importable.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import write_family_checkpoints as family  # noqa: E402


def transformer_lens_tensors(i, m):
    """Layer i's attention in TransformerLens's names and axis order; `m` holds [out, in] heads."""
    base = f"blocks.{i}.attn."
    grouped = len(m.k) < len(m.q)
    k_name, v_name = ("_W_K", "_W_V") if grouped else ("W_K", "W_V")
    d_model, head_dim = m.q[0].shape[1], m.q[0].shape[0]
    nan = lambda *shape: np.full(shape, np.nan)  # noqa: E731
    return {
        base + "W_Q": np.stack([q.T for q in m.q]),         # [H, d, d_h]
        base + k_name: np.stack([k.T for k in m.k]),        # [H_kv, d, d_h]
        base + v_name: np.stack([v.T for v in m.v]),
        base + "W_O": np.stack([o.T for o in m.o]),         # [H, d_h, d]
        base + "b_Q": np.zeros((len(m.q), head_dim)),
        base + k_name.replace("W", "b"): np.ones((len(m.k), head_dim)),
        base + "b_O": np.zeros(d_model),
        f"blocks.{i}.ln1.w": nan(d_model),
        f"blocks.{i}.mlp.W_in": nan(d_model, 4 * d_model),
        f"blocks.{i}.mlp.W_out": nan(4 * d_model, d_model),
    }


def write_pair(out_dir, ref_dir, heads=4, kv_heads=None, head_dim=8, d_model=32, layers=3,
               seed=0, npz=False):
    """Writes out_dir/tl and out_dir/hf from the same heads; returns (tl path, hf path)."""
    kv_heads = heads if kv_heads is None else kv_heads
    rng = np.random.default_rng(seed)
    per_layer = [family.Heads(rng, i, heads, kv_heads, head_dim, d_model, "F32")
                 for i in range(layers)]
    family.save_reference_factors(ref_dir, dict(enumerate(per_layer)))
    tl = {"embed.W_E": np.full((16, d_model), np.nan), "unembed.W_U": np.full((d_model, 16), np.nan)}
    hf = {"model.embed_tokens.weight": np.full((16, d_model), np.nan)}
    for i, m in enumerate(per_layer):
        tl.update(transformer_lens_tensors(i, m))
        hf.update(family.llama_tensors(i, m))
    tl_dir = os.path.join(out_dir, "tl")
    os.makedirs(tl_dir, exist_ok=True)
    if npz:
        tl_path = os.path.join(tl_dir, "state_dict.npz")
        np.savez(tl_path, **{name: value.astype(np.float32) for name, value in tl.items()})
    else:
        tl_path = os.path.join(tl_dir, "model.safetensors")
        family.write_safetensors(tl_path, tl, "F32")
    config = {"model_type": "llama", "hidden_size": d_model, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "num_hidden_layers": layers, "head_dim": head_dim}
    hf_dir = os.path.join(out_dir, "hf")
    family.write_checkpoint(hf_dir, hf, config, "F32")
    return tl_path, hf_dir


def main():
    args = family.writer_arguments(__doc__, ["out_dir", "ref_dir"], [
        ("--heads", dict(type=int, default=4)), ("--kv-heads", dict(type=int)),
        ("--npz", dict(action="store_true"))])
    write_pair(args.out_dir, args.ref_dir, args.heads, args.kv_heads, seed=args.seed, npz=args.npz)
    return 0


if __name__ == "__main__":
    sys.exit(main())
