#!/usr/bin/env python3
"""End-to-end: a TransformerLens state dict (blocks.{l}.attn.W_Q [H, d, d_h], W_K / W_V or, with
grouped-query attention, _W_K / _W_V [H_kv, d, d_h], W_O [H, d_h, d]) saved as safetensors or npz,
found by its names with no config.json, gives the numbers of the equivalent Hugging Face llama
checkpoint written from the same heads (tests/writers/write_transformer_lens.py) and of
`reference.py heads` on the writer's factors. The same tensors renamed are read through a --map
file with "layout": "heads_in_out"; wrong shapes are one-line errors.

Run from the repository root: python3 tests/e2e/test_transformer_lens_families.py path/to/kvrank
"""
import json
import os
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (puts scripts/ and tests/writers/ on sys.path)
import reference  # noqa: E402  (scripts/reference.py: the naive numpy metric)
import write_family_checkpoints as family  # noqa: E402
import write_transformer_lens as writer  # noqa: E402

REPRS = ["qk", "ov", "k", "v"]
KEYS = ("erank", "erank_centered", "mean_similarity")


def analyze(*args):
    return harness.analyze_json(*args, "--repr", ",".join(REPRS))["models"]


class TransformerLens(unittest.TestCase):
    def assert_same_numbers(self, got, want, where):
        self.assertEqual([g["layer"] for g in got], [w["layer"] for w in want], where)
        for g, w in zip(got, want):
            self.assertEqual(g["pcs_90"], w["pcs_90"], where)
            for key in KEYS:
                self.assertTrue(harness.close(g[key], w[key]),
                                f"{where} layer {w['layer']} {key}: {g[key]!r} vs {w[key]!r}")

    def test_mha_and_gqa_give_the_hf_numbers(self):
        cases = [("mha", 4, 4, False), ("gqa", 8, 2, False), ("mha npz", 4, 4, True),
                 ("gqa npz", 8, 2, True)]
        for seed, (name, heads, kv_heads, npz) in enumerate(cases):
            with self.subTest(case=name), tempfile.TemporaryDirectory() as tmp:
                ref = os.path.join(tmp, "ref")
                tl, hf = writer.write_pair(tmp, ref, heads=heads, kv_heads=kv_heads, seed=seed,
                                           npz=npz)
                lens, llama = analyze(tl), analyze(hf)
                for got, want in zip(lens, llama):
                    self.assertEqual(got["repr"], want["repr"])
                    self.assertEqual((got["family"], got["model_type"]), ("transformer_lens", None))
                    for key in ("variant", "heads", "kv_heads", "head_dim", "d_model", "num_layers"):
                        self.assertEqual(got[key], want[key], f"{name} {key}")
                    self.assert_same_numbers(got["layers"], want["layers"], f"{name} {got['repr']}")
                    self.assert_same_numbers(
                        got["layers"], reference.cmd_heads(os.path.join(ref, got["repr"] + ".npz")),
                        f"{name} {got['repr']} against reference.py")
                self.assertEqual((lens[0]["heads"], lens[0]["kv_heads"]), (heads, kv_heads))

    def test_a_map_reads_per_head_tensors_in_its_axis_order(self):
        with tempfile.TemporaryDirectory() as tmp:
            ref = os.path.join(tmp, "ref")
            tl, _ = writer.write_pair(tmp, ref, heads=8, kv_heads=2, seed=7)
            tensors = reference.read_safetensors(tl)
            renamed = {name.replace("blocks.", "net.").replace("attn._W_", "attention.w")
                       .replace("attn.W_", "attention.w"): value for name, value in tensors.items()}
            path = os.path.join(tmp, "renamed.safetensors")
            family.write_safetensors(path, renamed, "F32")
            map_file = os.path.join(tmp, "map.json")
            with open(map_file, "w") as f:
                json.dump({role: f"net.{{i}}.attention.w{role.upper()}" for role in "qkvo"}
                          | {"layout": "heads_in_out"}, f)
            for model in analyze(path, "--map", map_file):
                self.assertEqual((model["family"], model["heads"], model["kv_heads"]), ("map", 8, 2))
                self.assert_same_numbers(model["layers"],
                                         reference.cmd_heads(os.path.join(ref, model["repr"] + ".npz")),
                                         f"--map {model['repr']}")

    def expect_error(self, path, *needles, args=()):
        result = harness.run("analyze", path, "--format", "json", *args)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(result.stdout, "")
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        for needle in needles:
            self.assertIn(needle, result.stderr)

    def test_wrong_shapes_are_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            tl, _ = writer.write_pair(tmp, os.path.join(tmp, "ref"), heads=4, seed=3)
            map_file = os.path.join(tmp, "map.json")
            with open(map_file, "w") as f:
                json.dump({"qkv": "h.{i}.qkv", "o": "h.{i}.o", "layout": "heads_in_out"}, f)
            self.expect_error(tl, "heads_in_out", "separate", args=("--map", map_file))
            with open(map_file, "w") as f:
                json.dump({"k": "h.{i}.k", "v": "h.{i}.v", "layout": "heads"}, f)
            self.expect_error(tl, 'expected "out_in", "in_out" or "heads_in_out", found "heads"',
                              args=("--map", map_file))
            tensors = reference.read_safetensors(tl)
            name = "blocks.1.attn.W_O"
            tensors[name] = np.transpose(tensors[name], (0, 2, 1))  # [H, d, d_h]: not W_O's order
            family.write_safetensors(tl, tensors, "F32")
            self.expect_error(tl, name, "expected shape [4, 8, 32] (per head [heads, in, out]",
                              "found [4, 32, 8]", args=("--repr", "ov"))
            tensors["blocks.0.attn.W_K"] = tensors["blocks.0.attn.W_K"].reshape(4 * 32, 8)
            family.write_safetensors(tl, tensors, "F32")
            self.expect_error(tl, "blocks.0.attn.W_K", "expected a 3-D per-head tensor")

if __name__ == "__main__":
    harness.main_unittest()
