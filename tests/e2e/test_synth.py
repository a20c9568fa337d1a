#!/usr/bin/env python3
"""End-to-end tests of `kvrank synth`, against the real binary.

Run from the repository root:  python3 tests/e2e/test_synth.py /path/to/kvrank

The checkpoints `kvrank synth` writes are read back here with an independent numpy safetensors
reader (format rules checked on the way), sliced per head by the layouts of docs/families.md written out
again in this file, and their effective rank computed with a direct numpy version of docs/metric.md
(A_h = W_Q^h (W_K^h)^T built explicitly). Then the same checkpoints go through `kvrank inspect` and
`kvrank analyze`, whose answers must agree.
"""
import json
import math
import os
import struct
import tempfile
import unittest

import numpy as np

import harness
from harness import run

REDUNDANCY = [0.0, 0.5, 0.9, 1.0]  # one per layer: erank must fall layer by layer, to exactly 1


def synth(out, **flags):
    args = ["synth", "-o", out]
    for key, value in flags.items():
        args += ["--" + key.replace("_", "-"), value]
    result = run(*args)
    if result.returncode != 0:
        raise AssertionError(f"kvrank {' '.join(map(str, args))} failed ({result.returncode}): "
                             f"{result.stderr.strip()}")
    return out


# ---- an independent safetensors reader ---------------------------------------------------------

def decode(dtype, raw, shape):
    if dtype == "F32":
        values = np.frombuffer(raw, "<f4")
    elif dtype == "F16":
        values = np.frombuffer(raw, "<f2").astype(np.float32)
    elif dtype == "BF16":
        values = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        raise AssertionError(f"unexpected dtype {dtype}")
    assert values.size == math.prod(shape), (dtype, shape, values.size)
    return values.reshape(shape)


def read_safetensors(path):
    """{name: (dtype, shape, float32 array, raw bytes)}, checking the file format on the way."""
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    assert (8 + size) % 8 == 0, f"{path}: data not 8-byte aligned (header {size})"
    text = data[8:8 + size].decode("utf-8")
    body = text.rstrip(" ")
    assert body.endswith("}"), f"{path}: header padding is not spaces"
    pairs = json.loads(body, object_pairs_hook=lambda items: items)
    names = [name for name, _ in pairs if name != "__metadata__"]
    assert names == sorted(names), f"{path}: header names not sorted"
    header = dict(pairs)
    assert dict(header["__metadata__"]) == {"format": "pt"}
    buffer = data[8 + size:]
    position = 0
    for begin, end in sorted(dict(header[name])["data_offsets"] for name in names):
        assert begin == position, f"{path}: gap or overlap at {begin}"
        position = end
    assert position == len(buffer), f"{path}: buffer not fully used"
    tensors = {}
    for name in names:
        info = dict(header[name])
        begin, end = info["data_offsets"]
        raw = buffer[begin:end]
        tensors[name] = (info["dtype"], list(info["shape"]),
                         decode(info["dtype"], raw, info["shape"]), raw)
    return tensors


def read_checkpoint(folder):
    """(config, tensors) of a synth folder: one file, or shards listed by an index."""
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        assert not os.path.exists(single + ".index.json")
        return config, read_safetensors(single)
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        index = json.load(f)
    tensors, total = {}, 0
    for shard in sorted(set(index["weight_map"].values())):
        for name, tensor in read_safetensors(os.path.join(folder, shard)).items():
            assert name not in tensors and index["weight_map"][name] == shard, name
            tensors[name] = tensor
            total += len(tensor[3])
    assert set(tensors) == set(index["weight_map"])
    assert index["metadata"]["total_size"] == total
    return config, tensors


# ---- docs/families.md per-head slicing, and the effective rank of docs/metric.md ----------------------------------------

def query_key_heads(config, tensors, layer):
    """[(W_Q^h, W_K^h)] as [rows, d] arrays (PyTorch [out, in] row blocks) for each query head."""
    t = lambda name: tensors[name][2].astype(np.float64)
    model_type = config["model_type"]
    if model_type == "gpt2":
        d, heads = config["n_embd"], config["n_head"]
        dh = d // heads
        w = t(f"h.{layer}.attn.c_attn.weight").T  # Conv1D [in, out] → [out, in]
        return [(w[h * dh:(h + 1) * dh], w[d + h * dh:d + (h + 1) * dh]) for h in range(heads)]
    if model_type == "gpt_neox":
        d, heads = config["hidden_size"], config["num_attention_heads"]
        dh = d // heads
        w = t(f"gpt_neox.layers.{layer}.attention.query_key_value.weight").reshape(heads, 3, dh, d)
        return [(w[h, 0], w[h, 1]) for h in range(heads)]
    if model_type == "falcon":
        d, heads = config["hidden_size"], config["num_attention_heads"]
        dh = d // heads
        w = t(f"transformer.h.{layer}.self_attention.query_key_value.weight")
        if config["new_decoder_architecture"]:
            kv = config["num_kv_heads"]
            group = heads // kv
            w = w.reshape(kv, group + 2, dh, d)
            return [(w[h // group, h % group], w[h // group, group]) for h in range(heads)]
        if config["multi_query"]:
            return [(w[h * dh:(h + 1) * dh], w[heads * dh:(heads + 1) * dh]) for h in range(heads)]
        w = w.reshape(heads, 3, dh, d)
        return [(w[h, 0], w[h, 1]) for h in range(heads)]
    if model_type == "deepseek_v2":
        heads, latent = config["num_attention_heads"], config["kv_lora_rank"]
        nope, rope, v = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
        p = f"model.layers.{layer}.self_attn."
        if config["q_lora_rank"]:  # q rows of head h: q_b_h · diag(γ_q) · q_a
            q = t(p + "q_b_proj.weight") @ np.diag(t(p + "q_a_layernorm.weight")) @ t(
                p + "q_a_proj.weight")
        else:
            q = t(p + "q_proj.weight")
        kv_a = t(p + "kv_a_proj_with_mqa.weight")
        gain = t(p + "kv_a_layernorm.weight")
        kv_b = t(p + "kv_b_proj.weight")
        pairs = []
        for h in range(heads):
            k_nope = kv_b[h * (nope + v):h * (nope + v) + nope] @ np.diag(gain) @ kv_a[:latent]
            pairs.append((q[h * (nope + rope):(h + 1) * (nope + rope)],
                          np.vstack([k_nope, kv_a[latent:]])))
        return pairs
    p = f"model.layers.{layer}.self_attn."
    heads = config["num_attention_heads"]
    if config.get("attention_variant") == "lrkv":
        dh, r = config["head_dim"], config["lrkv_rank"]
        q, shared = t(p + "q_proj.weight"), t(p + "k_shared_proj.weight")
        a, b = t(p + "k_lora_a.weight"), t(p + "k_lora_b.weight")
        return [(q[h * dh:(h + 1) * dh], shared + b[h * dh:(h + 1) * dh] @ a[h * r:(h + 1) * r])
                for h in range(heads)]
    kv = config["num_key_value_heads"]
    dh = config.get("head_dim") or config["hidden_size"] // heads
    if model_type == "phi3":
        w = t(p + "qkv_proj.weight")
        q, k = w[:heads * dh], w[heads * dh:(heads + kv) * dh]
    else:
        q, k = t(p + "q_proj.weight"), t(p + "k_proj.weight")
    group = heads // kv
    return [(q[h * dh:(h + 1) * dh], k[(h // group) * dh:(h // group + 1) * dh])
            for h in range(heads)]


def erank_reference(pairs):
    """docs/metric.md, the direct way: A_h = W_Q^h (W_K^h)^T in the paper's [d, d_h] orientation."""
    forms = np.stack([(q.T @ k).ravel() for q, k in pairs])
    norms = np.linalg.norm(forms, axis=1)
    similarity = (forms @ forms.T) / np.outer(norms, norms)
    eigenvalues = np.clip(np.linalg.eigvalsh(similarity), 0, None)
    p = eigenvalues / eigenvalues.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


# ---- the cases ---------------------------------------------------------------------------------

# (flags, expected config fields, expected attention tensor shapes of layer {i}, family, variant)
# d = 48, H = 6, d_h = 8 unless a case says otherwise.
BASE = {"layers": len(REDUNDANCY), "heads": 6, "head_dim": 8}
CASES = [
    ({"family": "llama"},
     {"model_type": "llama", "hidden_size": 48, "num_attention_heads": 6, "num_key_value_heads": 6,
      "head_dim": 8, "num_hidden_layers": 4},
     {"model.layers.{i}.self_attn.q_proj.weight": [48, 48],
      "model.layers.{i}.self_attn.k_proj.weight": [48, 48],
      "model.layers.{i}.self_attn.v_proj.weight": [48, 48],
      "model.layers.{i}.self_attn.o_proj.weight": [48, 48]}, "llama", "mha"),
    ({"family": "llama", "kv_heads": 2, "d_model": 40},
     {"model_type": "llama", "hidden_size": 40, "num_key_value_heads": 2, "head_dim": 8},
     {"model.layers.{i}.self_attn.q_proj.weight": [48, 40],
      "model.layers.{i}.self_attn.k_proj.weight": [16, 40],
      "model.layers.{i}.self_attn.v_proj.weight": [16, 40],
      "model.layers.{i}.self_attn.o_proj.weight": [40, 48]}, "llama", "gqa"),
    ({"family": "llama", "variant": "mqa"},
     {"model_type": "llama", "num_key_value_heads": 1},
     {"model.layers.{i}.self_attn.k_proj.weight": [8, 48]}, "llama", "mqa"),
    ({"family": "gpt2"},
     {"model_type": "gpt2", "n_embd": 48, "n_head": 6, "n_layer": 4},
     {"h.{i}.attn.c_attn.weight": [48, 144], "h.{i}.attn.c_proj.weight": [48, 48]}, "gpt2", "mha"),
    ({"family": "gpt_neox"},
     {"model_type": "gpt_neox", "hidden_size": 48, "num_attention_heads": 6, "num_hidden_layers": 4},
     {"gpt_neox.layers.{i}.attention.query_key_value.weight": [144, 48],
      "gpt_neox.layers.{i}.attention.dense.weight": [48, 48]}, "gpt_neox", "mha"),
    ({"family": "falcon"},
     {"model_type": "falcon", "new_decoder_architecture": False, "multi_query": False},
     {"transformer.h.{i}.self_attention.query_key_value.weight": [144, 48],
      "transformer.h.{i}.self_attention.dense.weight": [48, 48]}, "falcon", "mha"),
    ({"family": "falcon", "variant": "mqa"},
     {"model_type": "falcon", "new_decoder_architecture": False, "multi_query": True},
     {"transformer.h.{i}.self_attention.query_key_value.weight": [64, 48]}, "falcon", "mqa"),
    ({"family": "falcon", "kv_heads": 3},
     {"model_type": "falcon", "new_decoder_architecture": True, "num_kv_heads": 3},
     {"transformer.h.{i}.self_attention.query_key_value.weight": [96, 48]}, "falcon", "gqa"),
    ({"family": "phi3", "kv_heads": 2},
     {"model_type": "phi3", "hidden_size": 48, "num_attention_heads": 6, "num_key_value_heads": 2},
     {"model.layers.{i}.self_attn.qkv_proj.weight": [80, 48],
      "model.layers.{i}.self_attn.o_proj.weight": [48, 48]}, "phi3", "gqa"),
    ({"family": "deepseek_v2", "kv_lora_rank": 16, "d_model": 40},
     {"model_type": "deepseek_v2", "hidden_size": 40, "kv_lora_rank": 16, "q_lora_rank": None,
      "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "num_attention_heads": 6},
     {"model.layers.{i}.self_attn.q_proj.weight": [72, 40],
      "model.layers.{i}.self_attn.kv_a_proj_with_mqa.weight": [20, 40],
      "model.layers.{i}.self_attn.kv_a_layernorm.weight": [16],
      "model.layers.{i}.self_attn.kv_b_proj.weight": [96, 16],
      "model.layers.{i}.self_attn.o_proj.weight": [40, 48]}, "deepseek_v2", "mla"),
    ({"family": "deepseek_v2", "kv_lora_rank": 12, "d_model": 40, "q_lora_rank": 10,
      "nope_dim": 6, "rope_dim": 2, "v_head_dim": 5},
     {"model_type": "deepseek_v2", "kv_lora_rank": 12, "q_lora_rank": 10, "qk_nope_head_dim": 6,
      "qk_rope_head_dim": 2, "v_head_dim": 5},
     {"model.layers.{i}.self_attn.q_a_proj.weight": [10, 40],
      "model.layers.{i}.self_attn.q_a_layernorm.weight": [10],
      "model.layers.{i}.self_attn.q_b_proj.weight": [48, 10],
      "model.layers.{i}.self_attn.kv_a_proj_with_mqa.weight": [14, 40],
      "model.layers.{i}.self_attn.kv_b_proj.weight": [66, 12],
      "model.layers.{i}.self_attn.o_proj.weight": [40, 30]}, "deepseek_v2", "mla"),
    ({"family": "lrkv", "rank": 2},
     {"model_type": "llama", "attention_variant": "lrkv", "lrkv_rank": 2},
     {"model.layers.{i}.self_attn.q_proj.weight": [48, 48],
      "model.layers.{i}.self_attn.k_shared_proj.weight": [8, 48],
      "model.layers.{i}.self_attn.k_lora_a.weight": [12, 48],
      "model.layers.{i}.self_attn.k_lora_b.weight": [48, 2],
      "model.layers.{i}.self_attn.v_shared_proj.weight": [8, 48],
      "model.layers.{i}.self_attn.v_lora_a.weight": [12, 48],
      "model.layers.{i}.self_attn.v_lora_b.weight": [48, 2],
      "model.layers.{i}.self_attn.o_proj.weight": [48, 48]}, "lrkv", "lrkv"),
]


class SynthTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="kvrank-synth-")
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def test_every_family_layout_config_and_redundancy(self):
        for case, (flags, fields, shapes, family, variant) in enumerate(CASES):
            with self.subTest(**flags):
                out = synth(self.path(f"{case}-{family}-{variant}"), **BASE, **flags, seed=11,
                            redundancy=",".join(map(str, REDUNDANCY)))
                config, tensors = read_checkpoint(out)
                for key, value in fields.items():
                    self.assertEqual(config[key], value, key)
                self.assertEqual(config["torch_dtype"], "float32")
                for layer in range(len(REDUNDANCY)):
                    for pattern, shape in shapes.items():
                        name = pattern.format(i=layer)
                        self.assertIn(name, tensors)
                        self.assertEqual(tensors[name][:2], ("F32", shape), name)
                eranks = [erank_reference(query_key_heads(config, tensors, layer))
                          for layer in range(len(REDUNDANCY))]
                for before, after in zip(eranks, eranks[1:]):
                    self.assertGreater(before, after + 1e-3, eranks)
                self.assertAlmostEqual(eranks[-1], 1.0, places=5)
                self.assertGreater(eranks[0], 2.0, eranks)
                self.check_inspect(out, family, variant, config)
                self.check_analyze(out, eranks)

    def check_inspect(self, out, family, variant, config):
        result = run("inspect", out, "--format", "json")
        self.assertEqual(result.returncode, 0, result.stderr)
        models = json.loads(result.stdout)["checkpoints"]
        self.assertEqual(len(models), 1, result.stdout[:500])
        self.assertEqual(len(models[0]["series"]), 1, result.stdout[:500])  # decoder-only
        self.assertEqual(models[0]["family"], family)
        self.assertEqual(models[0]["variant"], variant)
        self.assertEqual(models[0]["heads"], 6)
        if "num_key_value_heads" in config and variant in ("mha", "gqa", "mqa"):
            self.assertEqual(models[0]["kv_heads"], config["num_key_value_heads"])

    def check_analyze(self, out, eranks):
        result = run("analyze", out, "--format", "json")
        self.assertEqual(result.returncode, 0, result.stderr)
        layers = json.loads(result.stdout)["models"][0]["layers"]
        self.assertEqual([layer["layer"] for layer in layers], list(range(len(REDUNDANCY))))
        for layer, expected in zip(layers, eranks):
            self.assertAlmostEqual(layer["erank"], expected, delta=1e-3 * expected)

    def test_dtypes_round_to_nearest_even(self):
        common = dict(family="llama", layers=2, heads=4, head_dim=8, seed=5, redundancy="0.3")
        _, f32 = read_checkpoint(synth(self.path("f32"), **common))
        for dtype, torch_dtype in (("bf16", "bfloat16"), ("f16", "float16")):
            config, half = read_checkpoint(synth(self.path(dtype), **common, dtype=dtype))
            self.assertEqual(config["torch_dtype"], torch_dtype)
            self.assertEqual(set(half), set(f32))
            for name, (_, shape, values, _) in f32.items():
                stored, half_shape, _, raw = half[name]
                self.assertEqual((stored, half_shape), (dtype.upper(), shape))
                bits = np.frombuffer(raw, "<u2")
                if dtype == "f16":
                    expected = values.astype(np.float16).view(np.uint16).ravel()
                else:
                    expected = bf16_nearest_even(values.ravel())
                np.testing.assert_array_equal(bits, expected, name)

    def test_same_seed_same_bytes(self):
        flags = dict(family="phi3", layers=3, heads=4, kv_heads=2, head_dim=8, dtype="bf16",
                     shards=2, redundancy="0,0.5,1", seed=7)
        first, second = synth(self.path("a"), **flags), synth(self.path("b"), **flags)
        other = synth(self.path("c"), **{**flags, "seed": 8})
        names = sorted(os.listdir(first))
        self.assertEqual(names, ["config.json", "model-00001-of-00002.safetensors",
                                 "model-00002-of-00002.safetensors", "model.safetensors.index.json"])
        self.assertEqual(sorted(os.listdir(second)), names)
        for name in names:
            with open(os.path.join(first, name), "rb") as a, open(os.path.join(second, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)
        _, tensors = read_checkpoint(first)
        _, others = read_checkpoint(other)
        q = "model.layers.0.self_attn.qkv_proj.weight"
        self.assertFalse(np.array_equal(tensors[q][2], others[q][2]))

    def test_shards_hold_the_same_tensors(self):
        flags = dict(family="gpt_neox", layers=4, heads=4, head_dim=8, seed=2, redundancy="0.2")
        _, whole = read_checkpoint(synth(self.path("one"), **flags))
        _, sharded = read_checkpoint(synth(self.path("three"), **flags, shards=3))
        self.assertEqual(set(whole), set(sharded))
        for name in whole:
            self.assertEqual(whole[name][3], sharded[name][3], name)
        with open(self.path("three/model.safetensors.index.json")) as f:
            weight_map = json.load(f)["weight_map"]
        for layer in range(4):  # a layer is never split across files
            files = {file for name, file in weight_map.items() if f".layers.{layer}." in name}
            self.assertEqual(len(files), 1, (layer, files))

    def test_invalid_options_exit_2_with_one_line(self):
        cases = [
            (["--heads", "6", "--kv-heads", "4"], "--heads 6 is not a multiple of --kv-heads 4"),
            (["--redundancy", "1.5"], "--redundancy 1.5 is outside [0, 1]"),
            (["--layers", "3", "--redundancy", "0,1"],
             "--redundancy has 2 values; expected 1 or one per layer (--layers 3)"),
            (["--family", "gpt2", "--variant", "mla"],
             "--variant mla needs --family deepseek_v2 (found gpt2)"),
            (["--dtype", "f64"], "--dtype f64 is not one of f32, bf16, f16"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                out = self.path("bad")
                result = run("synth", *args, "-o", out)
                self.assertEqual(result.returncode, 2)
                self.assertEqual(result.stdout, "")
                self.assertEqual(result.stderr, f"kvrank: error: {message}\n")
                self.assertFalse(os.path.exists(out))


def bf16_nearest_even(values):
    """float32 → bf16 bits: of the two bf16 neighbours, the nearer; on a tie the even one."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    down = bits & 0xFFFF0000
    up = down + 0x10000
    as_float = lambda b: b.astype(np.uint32).view(np.float32).astype(np.float64)
    error_down = np.abs(values.astype(np.float64) - as_float(down))
    error_up = np.abs(values.astype(np.float64) - as_float(up))
    pick_up = (error_up < error_down) | ((error_up == error_down) & (((down >> 16) & 1) == 1))
    return (np.where(pick_up, up, down) >> 16).astype(np.uint16)


if __name__ == "__main__":
    harness.main_unittest()
