#!/usr/bin/env python3
"""End-to-end: `kvrank analyze` on the llama-named families of today, each written in its real
layout by tests/writers/write_family_checkpoints.py (independent numpy):

- Qwen3, Gemma 3 (text and multimodal), OLMo 2, Qwen3-MoE: q_norm / k_norm gains (per head over
  head_dim; over the whole width for OLMo 2; Gemma's 1 + weight) folded into the query / key rows;
- StableLM (q_layernorm.norms.{h}), Cohere (q_norm [H, d_h]) and phi with qk_layernorm (one
  q_layernorm [d_h] for all heads, with a bias): QK LayerNorms, whose centring P = I − 11ᵀ/d_h is
  folded with the gains; their config switches (qk_layernorm, use_qk_norm);
- Gemma 2 (head_dim ≠ d/H, no QK norm), Mixtral and Qwen2-MoE (expert tensors are NaN: they must
  never be read), attention biases (llama `attention_bias`, Qwen2-MoE's qkv biases: accepted, not
  part of W_Q W_Kᵀ).

Every number is checked twice: against `reference.py heads` on the writer's gain-scaled per-head
factors, and against `reference.py llama`, which reads the checkpoint and applies the gains itself
when it builds each d×d form. A third reference with the norms removed must differ, so the gains
are really tested. Plus the errors of malformed norms.

Run from the repository root: python3 tests/e2e/test_llama_like_families.py path/to/kvrank
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "writers"))
import reference  # noqa: E402  (scripts/reference.py: the naive numpy metric)
import write_family_checkpoints as writer  # noqa: E402

import harness  # noqa: E402  (tests/e2e is on sys.path)

KVRANK = None  # set in main
REPRS = ["qk", "ov", "k", "v"]
QK_NORM = [name for name, spec in writer.MODERN.items() if spec.get("qk_norm")]


def run(args):
    return subprocess.run([KVRANK] + args, capture_output=True, text=True, timeout=120)


def close(found, expected):
    return abs(found - expected) <= 1e-5 * abs(expected) + 1e-6


def write(tmp, family, dtype="F32", seed=0, **kwargs):
    out, ref = os.path.join(tmp, family + dtype), os.path.join(tmp, family + dtype + ".ref")
    geometry = dict(layers=3, heads=8, kv_heads=4, head_dim=12, d_model=32)
    geometry.update(kwargs)
    tensors, config = writer.write_family(family, out, ref, dtype=dtype, seed=seed, **geometry)
    return out, ref, tensors, config


class ModernFamilies(unittest.TestCase):
    def assert_layers(self, got, want, where):
        self.assertEqual(len(got), len(want), where)
        for g, w in zip(got, want):
            at = f"{where} layer {w['layer']}"
            self.assertEqual(g["pcs_90"], w["pcs_90"], at)
            for key in ("erank", "erank_centered", "mean_similarity"):
                self.assertTrue(close(g[key], w[key]), f"{at}: {key} kvrank {g[key]!r} reference {w[key]!r}")

    def test_every_family_and_dtype_against_both_references(self):
        checked = 0
        for family in writer.MODERN:
            for dtype in ("F32", "BF16", "F16"):
                with self.subTest(family=family, dtype=dtype), tempfile.TemporaryDirectory() as tmp:
                    out, ref, _, _ = write(tmp, family, dtype, seed=checked)
                    result = run(["analyze", out, "--repr", ",".join(REPRS), "--format", "json"])
                    self.assertEqual(result.returncode, 0, result.stderr)
                    models = json.loads(result.stdout)["models"]
                    self.assertEqual([m["repr"] for m in models], REPRS)
                    harness.assert_models_match_references(
                        self, models, ref, lambda r: reference.cmd_llama(out, r),
                        f"{family} {dtype}", family="llama", variant="gqa", heads=8, kv_heads=4,
                        head_dim=12, d_model=32, num_layers=3)
                    checked += 1
        print(f"modern families: {checked} family × dtype checkpoints match both references")

    def test_the_gains_change_the_numbers(self):
        """Without folding the gains the numbers would differ: this suite can fail."""
        for family in QK_NORM:
            with self.subTest(family=family), tempfile.TemporaryDirectory() as tmp:
                out, _, tensors, config = write(tmp, family, seed=3)
                plain = os.path.join(tmp, "no-norms")
                writer.write_checkpoint(plain, {n: t for n, t in tensors.items()
                                                if "_norm." not in n and "_layernorm." not in n},
                                        config, "F32")
                for repr_name in ("qk", "k"):
                    result = run(["analyze", out, "--repr", repr_name, "--format", "json"])
                    self.assertEqual(result.returncode, 0, result.stderr)
                    got = json.loads(result.stdout)["models"][0]["layers"]
                    ungained = reference.cmd_llama(plain, repr_name)
                    self.assertTrue(any(not close(g["erank"], u["erank"]) for g, u in zip(got, ungained)),
                                    f"{family} {repr_name}")

    def test_gemma_weight_is_read_as_one_plus_weight(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, _, _, _ = write(tmp, "gemma3", seed=5)
            with open(os.path.join(out, "config.json")) as f:
                config = json.load(f)
            as_qwen = dict(config, model_type="qwen3")  # the same weights read as plain gains
            with open(os.path.join(out, "config.json"), "w") as f:
                json.dump(as_qwen, f)
            result = run(["analyze", out, "--format", "json"])
            self.assertEqual(result.returncode, 0, result.stderr)
            plain = json.loads(result.stdout)["models"][0]["layers"]
            forced = run(["analyze", out, "--family", "gemma3", "--format", "json"])
            self.assertEqual(forced.returncode, 0, forced.stderr)
            self.assert_layers(json.loads(forced.stdout)["models"][0]["layers"],
                               reference.cmd_heads(os.path.join(out + ".ref", "qk.npz")), "--family gemma3")
            self.assertFalse(all(close(p["erank"], g["erank"]) for p, g in
                                 zip(plain, json.loads(forced.stdout)["models"][0]["layers"])))


    def test_head_dim_from_a_per_head_norm_when_the_config_does_not_give_it(self):
        """Gemma 3's multimodal configs may leave the text model's head counts at their defaults;
        a bare Qwen3 file has no config at all: q_norm / k_norm [head_dim] tell the geometry."""
        with tempfile.TemporaryDirectory() as tmp:
            out, ref, _, _ = write(tmp, "gemma3_mm", seed=8)
            with open(os.path.join(out, "config.json")) as f:
                config = json.load(f)
            for key in ("num_attention_heads", "num_key_value_heads", "head_dim"):
                del config["text_config"][key]
            with open(os.path.join(out, "config.json"), "w") as f:
                json.dump(config, f)
            bare, bare_ref, _, _ = write(tmp, "qwen3", seed=9)
            os.remove(os.path.join(bare, "config.json"))
            for path, reference_dir in ((out, ref), (os.path.join(bare, "model.safetensors"), bare_ref)):
                result = run(["analyze", path, "--format", "json"])
                self.assertEqual(result.returncode, 0, result.stderr)
                [model] = json.loads(result.stdout)["models"]
                self.assertEqual((model["heads"], model["kv_heads"], model["head_dim"]), (8, 4, 12), path)
                self.assert_layers(model["layers"],
                                   reference.cmd_heads(os.path.join(reference_dir, "qk.npz")), path)

    def analyze(self, path, *args):
        result = run(["analyze", path, "--repr", "qk,k", "--format", "json"] + list(args))
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)["models"]

    def test_layer_norm_centring_changes_the_numbers(self):
        """Cohere's gains folded as an RMSNorm's (no centring) give other numbers: the centring is
        really tested."""
        with tempfile.TemporaryDirectory() as tmp:
            out, _, _, config = write(tmp, "cohere", seed=11)
            as_rms = os.path.join(tmp, "as-rms")
            os.makedirs(as_rms)
            os.symlink(os.path.join(out, "model.safetensors"), os.path.join(as_rms, "model.safetensors"))
            with open(os.path.join(as_rms, "config.json"), "w") as f:
                json.dump(dict(config, model_type="qwen3"), f)
            for model in self.analyze(out):
                uncentred = reference.cmd_llama(as_rms, model["repr"])
                self.assertTrue(any(not close(g["erank"], u["erank"])
                                    for g, u in zip(model["layers"], uncentred)), model["repr"])

    def test_a_qk_norm_switched_off_is_not_read(self):
        for family, switch in (("stablelm", "qk_layernorm"), ("cohere", "use_qk_norm"),
                               ("phi_qk", "qk_layernorm")):
            with self.subTest(family=family), tempfile.TemporaryDirectory() as tmp:
                out, _, tensors, config = write(tmp, family, seed=12)
                writer.write_checkpoint(out, tensors, dict(config, **{switch: False}), "F32")
                plain = os.path.join(tmp, "no-norms")
                writer.write_checkpoint(plain, {n: t for n, t in tensors.items() if "norm" not in n},
                                        dict(config, **{switch: False}), "F32")
                for got, want in zip(self.analyze(out), self.analyze(plain)):
                    self.assertEqual(got["layers"], want["layers"])


class NormErrors(unittest.TestCase):
    def expect_error(self, family, edit, *needles):
        with tempfile.TemporaryDirectory() as tmp:
            out, _, tensors, config = write(tmp, family, layers=2, heads=4, kv_heads=2, head_dim=8)
            edit(tensors)
            writer.write_checkpoint(out, tensors, config, "F32")
            result = run(["analyze", out, "--repr", "qk,k", "--format", "json"])
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertEqual(result.stdout, "")
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            for needle in needles:
                self.assertIn(needle, result.stderr)
            return result.stderr.strip()

    def test_a_gain_of_the_wrong_shape_is_named_with_both_shapes_allowed(self):
        name = "model.layers.0.self_attn.q_norm.weight"

        def shorten(tensors):
            tensors[name] = tensors[name][:5]
        message = self.expect_error("qwen3", shorten)
        self.assertTrue(message.endswith(
            f"model.safetensors: {name}: expected shape [8] or [32] (one gain per head dimension "
            "shared by all heads, [8], or one per row of the projection, 4 heads × head_dim 8 = "
            "[32]), found [5]"), message)

    def test_a_later_layer_is_checked_too(self):
        name = "model.layers.1.self_attn.k_norm.weight"

        def widen(tensors):
            tensors[name] = np.ones(24)
        self.expect_error("olmo2", widen, name, "2 kv heads × head_dim 8 = [16]", "found [24]")

    def test_a_switched_on_layer_norm_must_be_there(self):
        def drop(tensors):
            for name in [n for n in tensors if "_layernorm." in n]:
                del tensors[name]
        self.expect_error("stablelm", drop, "config.json", "qk_layernorm", "q_norm.weight",
                          "q_layernorm.norms.0")

    def test_a_per_head_gain_of_the_wrong_shape_is_named(self):
        name = "model.layers.1.self_attn.k_layernorm.norms.1.weight"

        def shorten(tensors):
            tensors[name] = tensors[name][:5]
        self.expect_error("stablelm", shorten, name, "expected shape [8]", "found [5]")

    def test_cohere_gain_of_the_wrong_shape_lists_its_own(self):
        name = "model.layers.0.self_attn.q_norm.weight"

        def transpose(tensors):
            tensors[name] = tensors[name].T.copy()
        self.expect_error("cohere", transpose, name, "[4, 8] (per head)", "found [8, 4]")

    def test_nan_in_a_gain_names_the_tensor(self):
        name = "model.layers.1.self_attn.k_norm.weight"

        def poison(tensors):
            tensors[name] = tensors[name].copy()
            tensors[name][3] = np.nan
        self.expect_error("qwen3", poison, name, "NaN")


if __name__ == "__main__":
    harness.main_unittest(sys.modules[__name__])
