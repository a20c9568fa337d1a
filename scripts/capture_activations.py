#!/usr/bin/env python3
"""Captures per-layer queries, keys and values of a Hugging Face causal LM for
`kvrank analyze --activations` (docs/activations.md).

Usage (needs torch and transformers, which kvrank itself does not):

  python3 scripts/capture_activations.py MODEL text.txt -o acts.npz [--max-tokens 512]
        [--device cpu|cuda] [--dtype float32|bfloat16|float16] [--layers 0-11]
  kvrank analyze acts.npz --activations --format json

MODEL is a Hub id or a local folder (AutoModelForCausalLM.from_pretrained). The text is tokenised,
cut to --max-tokens and run through the model once; forward hooks on the attention projections
record their outputs, which are written as float32 `layers.{i}.q` [T, H, d_h],
`layers.{i}.k` and `layers.{i}.v` [T, H_kv, d_h] into one .npz (numpy's savez).

Supported attention modules (found by name under each decoder layer):
  - llama-like (llama, mistral, qwen2/3, gemma, olmo2, phi3 with qkv_proj, ...):
    self_attn.{q,k,v}_proj or self_attn.qkv_proj;
  - gpt2: attn.c_attn (split into q, k, v);
  - DeepSeek-V2/V3 MLA: self_attn.{q_proj | q_b_proj}, kv_a_proj_with_mqa, kv_b_proj, and the
    kv_a_layernorm output: per head, k = [k_nope_h ; k_rope] (the rope key is shared by all heads)
    and v = v_h, exactly the effective per-head keys the weight analysis uses.
The captures are the projection outputs, i.e. before RoPE — the activation counterpart of the
weight metric. Use --help for all options.

The capture logic (capture()) takes any torch module and a config object, so it can be used on
models built without transformers.
"""
import argparse
import sys


def layer_list(text, count):
    if not text:
        return list(range(count))
    out = set()
    for part in text.split(","):
        if "-" in part:
            first, last = part.split("-")
            out.update(range(int(first), int(last) + 1))
        else:
            out.add(int(part))
    return sorted(i for i in out if i < count)


def config_value(config, *names, default=None):
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    return default


def find_layers(model):
    """The decoder layers (a ModuleList) of common architectures."""
    for path in ("model.layers", "transformer.h", "gpt_neox.layers", "model.decoder.layers",
                 "layers", "h"):
        obj = model
        try:
            for attr in path.split("."):
                obj = getattr(obj, attr)
        except AttributeError:
            continue
        return obj
    raise SystemExit("capture_activations: cannot find the decoder layers of this model")


class Recorder:
    """Forward hooks that keep the output of named sub-modules (last call wins)."""

    def __init__(self):
        self.outputs = {}
        self.handles = []

    def watch(self, module, key):
        def hook(_module, _inputs, output):
            self.outputs[key] = output.detach().float().cpu()
        self.handles.append(module.register_forward_hook(hook))

    def remove(self):
        for handle in self.handles:
            handle.remove()


def heads_of(tensor, heads, head_dim):
    """[B, T, heads·head_dim] → [B·T, heads, head_dim] numpy float32."""
    b, t, _ = tensor.shape
    return tensor.reshape(b * t, heads, head_dim).numpy()


def attention_kind(layer):
    attn = getattr(layer, "self_attn", None)
    if attn is not None and hasattr(attn, "kv_b_proj"):
        return "mla", attn
    if attn is not None and hasattr(attn, "qkv_proj"):
        return "fused", attn
    if attn is not None and hasattr(attn, "q_proj"):
        return "llama", attn
    attn = getattr(layer, "attn", None)
    if attn is not None and hasattr(attn, "c_attn"):
        return "gpt2", attn
    raise SystemExit(f"capture_activations: unsupported attention module {type(layer).__name__}")


def watch_layer(recorder, i, layer):
    kind, attn = attention_kind(layer)
    if kind == "llama":
        for name in ("q", "k", "v"):
            recorder.watch(getattr(attn, f"{name}_proj"), (i, name))
    elif kind == "fused":
        recorder.watch(attn.qkv_proj, (i, "qkv"))
    elif kind == "gpt2":
        recorder.watch(attn.c_attn, (i, "qkv"))
    else:  # MLA
        recorder.watch(attn.q_b_proj if getattr(attn, "q_b_proj", None) is not None
                       else attn.q_proj, (i, "q"))
        recorder.watch(attn.kv_a_proj_with_mqa, (i, "kv_a"))
        recorder.watch(attn.kv_b_proj, (i, "kv_b"))
    return kind


def layer_captures(kind, out, i, config):
    """{'q','k','v'} numpy arrays [T, heads, d] for one layer from the recorded outputs."""
    import numpy as np

    heads = config_value(config, "num_attention_heads", "n_head")
    if kind == "mla":
        nope, rope = config.qk_nope_head_dim, config.qk_rope_head_dim
        v_dim, c = config.v_head_dim, config.kv_lora_rank
        q = heads_of(out[(i, "q")], heads, nope + rope)
        kv_b = heads_of(out[(i, "kv_b")], heads, nope + v_dim)
        k_rope = out[(i, "kv_a")][..., c:].reshape(-1, 1, rope).numpy()
        k = np.concatenate([kv_b[:, :, :nope], np.repeat(k_rope, heads, axis=1)], axis=2)
        return {"q": q, "k": k, "v": kv_b[:, :, nope:]}
    kv_heads = config_value(config, "num_key_value_heads", default=heads)
    d_model = config_value(config, "hidden_size", "n_embd")
    head_dim = config_value(config, "head_dim", default=d_model // heads)
    if kind == "llama":
        return {"q": heads_of(out[(i, "q")], heads, head_dim),
                "k": heads_of(out[(i, "k")], kv_heads, head_dim),
                "v": heads_of(out[(i, "v")], kv_heads, head_dim)}
    fused = out[(i, "qkv")]
    sizes = ([d_model] * 3 if kind == "gpt2"
             else [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim])
    q, k, v = fused.split(sizes, dim=-1)
    return {"q": heads_of(q, heads, head_dim), "k": heads_of(k, kv_heads, head_dim),
            "v": heads_of(v, kv_heads, head_dim)}


def capture(model, config, input_ids, layers=None):
    """Runs `model(input_ids)` once and returns {"layers.{i}.q": array, ...} (float32)."""
    import torch

    decoder_layers = find_layers(model)
    chosen = layers if layers is not None else list(range(len(decoder_layers)))
    recorder = Recorder()
    kinds = {i: watch_layer(recorder, i, decoder_layers[i]) for i in chosen}
    try:
        with torch.no_grad():
            model(input_ids)
    finally:
        recorder.remove()
    tensors = {}
    for position, i in enumerate(chosen):
        # Renumbered from 0: kvrank expects contiguous layer indices.
        for name, array in layer_captures(kinds[i], recorder.outputs, i, config).items():
            tensors[f"layers.{position}.{name}"] = array.astype("float32")
    return tensors


def main(argv=None):
    parser = argparse.ArgumentParser(description="Capture per-layer Q/K/V for kvrank --activations")
    parser.add_argument("model", help="Hugging Face Hub id or local folder")
    parser.add_argument("text", help="a UTF-8 text file to run through the model")
    parser.add_argument("-o", "--output", required=True, help="output .npz")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--layers", default="", help="e.g. 0-11,20 (renumbered from 0 in the file)")
    parser.add_argument("--trust-remote-code", action="store_true")
    args = parser.parse_args(argv)

    try:
        import numpy as np
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as error:
        sys.exit(f"capture_activations: needs numpy, torch and transformers ({error})")

    tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=args.trust_remote_code)
    model = AutoModelForCausalLM.from_pretrained(
        args.model, torch_dtype=getattr(torch, args.dtype),
        trust_remote_code=args.trust_remote_code).to(args.device).eval()
    with open(args.text, encoding="utf-8") as f:
        ids = tokenizer(f.read(), return_tensors="pt").input_ids[:, :args.max_tokens]
    count = len(find_layers(model))
    tensors = capture(model, model.config, ids.to(args.device), layer_list(args.layers, count))
    np.savez(args.output, **tensors)
    print(f"capture_activations: {len(tensors) // 3} layers × {ids.shape[1]} tokens → {args.output}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
