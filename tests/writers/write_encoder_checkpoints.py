#!/usr/bin/env python3
"""Writes a small encoder or encoder-decoder checkpoint in its Hugging Face tensor names and config
keys: bert, roberta, vit, t5, whisper, bart, mbart, clip, siglip, and one tower of clip or siglip
alone (clip_text_model, clip_vision_model, siglip_text_model, siglip_vision_model). Every projection is random (seeded), with
biases where the model has them (t5 has none) and NaN non-attention tensors (MLPs, norms,
embeddings, siglip's pooling head): kvrank must never read those. Independent of kvrank's C++
code; scripts/reference.py (`encoder`) reads the same names itself.

  write_encoder_checkpoints.py MODEL_TYPE OUT_DIR [--seed N] [--dtype F32|BF16|F16]

stdlib + numpy only; also importable (write_encoder()).
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from write_family_checkpoints import (  # noqa: E402
    DTYPE_OPTION, write_safetensors, writer_arguments)

# Per model type: its stacks (outer prefix, layer stem, layers, heads, d_model, head_dim) and how a
# block names its attention projections: (q, k, v, o) names after "<stem><i>".
BERT = (".attention.self.query", ".attention.self.key", ".attention.self.value",
        ".attention.output.dense")
VIT = (".attention.attention.query", ".attention.attention.key", ".attention.attention.value",
       ".attention.output.dense")
T5_SELF = tuple(f".layer.0.SelfAttention.{r}" for r in "qkvo")
T5_CROSS = tuple(f".layer.1.EncDecAttention.{r}" for r in "qkvo")
SELF_ATTN = tuple(f".self_attn.{r}_proj" for r in "qkv") + (".self_attn.out_proj",)
ENCODER_ATTN = tuple(f".encoder_attn.{r}_proj" for r in "qkv") + (".encoder_attn.out_proj",)


def geometry(model_type):
    """(config, [(stem, names, layers, heads, d_model, head_dim, bias)]) of a small model."""
    if model_type in ("bert", "roberta", "vit"):
        outer = {"bert": "bert.", "roberta": "roberta.", "vit": "vit."}[model_type]
        names = VIT if model_type == "vit" else BERT
        config = dict(model_type=model_type, hidden_size=24, num_attention_heads=4,
                      num_hidden_layers=3, intermediate_size=32)
        return config, [(outer + "encoder.layer.", names, 3, 4, 24, 6, True)]
    if model_type == "t5":  # inner dim heads · d_kv (5 · 4 = 20) ≠ d_model (16): T5 allows it
        config = dict(model_type="t5", d_model=16, d_kv=4, num_heads=5, num_layers=3,
                      num_decoder_layers=2, d_ff=32)
        return config, [("encoder.block.", T5_SELF, 3, 5, 16, 4, False),
                        ("decoder.block.", T5_SELF, 2, 5, 16, 4, False),
                        ("decoder.block.", T5_CROSS, 2, 5, 16, 4, False)]
    if model_type in ("whisper", "bart", "mbart"):  # bart and mbart: whisper's names and keys
        config = dict(model_type=model_type, d_model=24, encoder_attention_heads=4,
                      decoder_attention_heads=6, encoder_layers=2, decoder_layers=3,
                      num_hidden_layers=2)
        return config, [("model.encoder.layers.", SELF_ATTN, 2, 4, 24, 6, True),
                        ("model.decoder.layers.", SELF_ATTN, 3, 6, 24, 4, True),
                        ("model.decoder.layers.", ENCODER_ATTN, 3, 6, 24, 4, True)]
    if model_type in ("clip", "siglip"):
        config = dict(model_type=model_type,
                      text_config=dict(hidden_size=16, num_attention_heads=4, num_hidden_layers=2),
                      vision_config=dict(hidden_size=24, num_attention_heads=3, num_hidden_layers=3))
        return config, [("text_model.encoder.layers.", SELF_ATTN, 2, 4, 16, 4, True),
                        ("vision_model.encoder.layers.", SELF_ATTN, 3, 3, 24, 8, True)]
    if model_type.endswith(("_text_model", "_vision_model")):  # one tower alone (CLIPTextModel
        # of Stable Diffusion's text_encoder/): its section's keys at the top level, its own names
        tower = "text" if model_type.endswith("_text_model") else "vision"
        both, stacks = geometry(model_type.split("_")[0])
        config = dict(both[tower + "_config"], model_type=model_type)
        return config, [stack for stack in stacks if stack[0].startswith(tower + "_model.")]
    raise ValueError(model_type)


def write_encoder(model_type, out_dir, seed=0, dtype="F32"):
    """Writes OUT_DIR/config.json and model.safetensors; returns (tensors, config)."""
    rng = np.random.default_rng(seed)
    config, stacks = geometry(model_type)
    tensors = {}
    nan = np.full((4,), np.nan)
    for stem, names, layers, heads, d_model, head_dim, bias in stacks:
        inner = heads * head_dim
        for i in range(layers):
            block = f"{stem}{i}"
            for role, name in zip("qkvo", names):
                shape = (d_model, inner) if role == "o" else (inner, d_model)
                tensors[block + name + ".weight"] = rng.standard_normal(shape)
                if bias:
                    tensors[block + name + ".bias"] = rng.standard_normal(shape[0])
            tensors[block + ".mlp.fc1.weight"] = np.full((8, d_model), np.nan)
            tensors[block + ".layer_norm.weight"] = nan
    if model_type == "siglip":  # SiglipMultiheadAttentionPoolingHead: never read
        tensors["vision_model.head.attention.in_proj_weight"] = np.full((72, 24), np.nan)
    os.makedirs(out_dir, exist_ok=True)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, dtype)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f)
    return tensors, config


def main():
    args = writer_arguments(__doc__, ["model_type", "out_dir"], [DTYPE_OPTION])
    write_encoder(args.model_type, args.out_dir, args.seed, args.dtype)


if __name__ == "__main__":
    main()
