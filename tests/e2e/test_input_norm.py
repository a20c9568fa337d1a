#!/usr/bin/env python3
"""End-to-end: the norm conventions kvrank states (docs/metric.md), against scripts/reference.py.

  - `--fold-input-norm` folds the pre-attention RMSNorm gain (input_layernorm) into q, k and v:
    kvrank == reference.py --fold-input-norm, for a plain gain (qwen3) and Gemma's 1 + w (gemma3),
    from safetensors and from GGUF (where llama.cpp stores Gemma's gains as 1 + w);
  - without the flag the input gain is left out (the default), and it moves erank;
  - folded gains are said once on stderr; the model type is reported beside the family;
  - a Gemma checkpoint without config.json is refused (its gain rule is unknown) unless --family
    says it.

Run from the repository root: python3 tests/e2e/test_input_norm.py path/to/kvrank
"""
import json
import os
import tempfile
import unittest

import numpy as np

import harness  # puts scripts/ on sys.path
import reference
import write_family_checkpoints as family_writer
import write_gguf

EXACT = 1e-6


def analyze(path, *flags, reprs=("qk", "ov", "k", "v")):
    result = harness.run("analyze", path, "--repr", ",".join(reprs), "--format", "json", *flags)
    assert result.returncode == 0, result.stderr
    return {m["repr"]: m for m in json.loads(result.stdout)["models"]}, result.stderr


def with_input_norm(folder, seed):
    """Adds input_layernorm gains (far from 1, so folding them matters) to a llama-named folder."""
    path = os.path.join(folder, "model.safetensors")
    tensors = reference.read_safetensors(path)
    rng = np.random.default_rng(seed)
    layers = sorted({int(n.split(".")[2]) for n in tensors if n.startswith("model.layers.")})
    d = tensors["model.embed_tokens.weight"].shape[1]
    for i in layers:
        tensors[f"model.layers.{i}.input_layernorm.weight"] = rng.uniform(0.2, 3.0, d).astype(
            np.float32).astype(np.float64)
    family_writer.write_safetensors(path, tensors, "F32")


class InputNormTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        cls.src = {}
        for seed, family in enumerate(("qwen3", "gemma3")):
            src = os.path.join(cls.dir, family)
            family_writer.write_family(family, src, src + "-ref", layers=2, heads=4, kv_heads=2,
                                       head_dim=8, d_model=32)
            with_input_norm(src, seed)
            cls.src[family] = src

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check_against_reference(self, got, src, fold):
        for repr_name, model in got.items():
            want = reference.cmd_llama(src, repr_name, fold_input_norm=fold)
            for g, w in zip(model["layers"], want):
                for key in ("erank", "erank_centered", "mean_similarity"):
                    self.assertTrue(harness.close(g[key], w[key], EXACT, 1e-9),
                                    f"{repr_name} layer {g['layer']} {key}: {g[key]} vs {w[key]}")

    def test_fold_input_norm_matches_the_reference(self):
        for family, src in self.src.items():
            with self.subTest(family=family):
                folded, stderr = analyze(src, "--fold-input-norm")
                self.check_against_reference(folded, src, fold=True)
                rule = "1 + w" if family == "gemma3" else "w"
                self.assertEqual(stderr.count("folded the q_norm and k_norm and input norm gains ("
                                              + rule + ")"), 1, stderr)
                rule_name = "1+weight" if family == "gemma3" else "weight"
                options = folded["qk"]["options"]  # the result says what shaped its numbers
                self.assertEqual((options["qk_norm_gain"], options["input_norm_gain"]),
                                 (rule_name, rule_name))
                plain, stderr = analyze(src)
                self.assertEqual(plain["qk"]["options"]["input_norm_gain"], None)
                self.check_against_reference(plain, src, fold=False)
                self.assertEqual(stderr.count("folded the q_norm and k_norm gains"), 1, stderr)
                moved = abs(folded["qk"]["layers"][0]["erank"] - plain["qk"]["layers"][0]["erank"])
                self.assertGreater(moved, 1e-3)  # the input gain matters, hence the flag

    def test_gemma2_input_norm_is_one_plus_w_and_it_has_no_qk_norm(self):
        """Gemma 2 is its own model type: RMSNorm gains of 1 + w, no q_norm / k_norm."""
        src = os.path.join(self.dir, "gemma2")
        family_writer.write_family("gemma2", src, src + "-ref", layers=2, heads=4, kv_heads=2,
                                   head_dim=8, d_model=32)
        with_input_norm(src, 7)
        folded, stderr = analyze(src, "--fold-input-norm")
        self.check_against_reference(folded, src, fold=True)
        self.assertEqual(stderr.count("folded the input norm gains (1 + w)"), 1, stderr)
        self.assertEqual(folded["qk"]["model_type"], "gemma2")

    def test_model_type_is_reported_beside_the_family(self):
        got, _ = analyze(self.src["gemma3"], reprs=("qk",))
        self.assertEqual(got["qk"]["family"], "llama")
        self.assertEqual(got["qk"]["model_type"], "gemma3_text")

    def test_gguf_input_norm_of_gemma_is_stored_as_one_plus_w(self):
        for family, arch in (("qwen3", "qwen3"), ("gemma3", "gemma3")):
            with self.subTest(family=family):
                path = os.path.join(self.dir, family + ".gguf")
                write_gguf.convert(self.src[family], path, "F32", arch=arch, vocabulary_size=10)
                got, _ = analyze(path, "--fold-input-norm")
                want, _ = analyze(self.src[family], "--fold-input-norm")
                for repr_name in got:
                    for g, w in zip(got[repr_name]["layers"], want[repr_name]["layers"]):
                        self.assertTrue(harness.close(g["erank"], w["erank"], EXACT, 1e-9),
                                        f"{repr_name}: {g['erank']} vs {w['erank']}")

    def test_gemma_without_config_is_refused_unless_the_family_says(self):
        src = os.path.join(self.dir, "gemma-no-config")
        family_writer.write_family("gemma3", src, src + "-ref", layers=1, heads=4, kv_heads=2,
                                   head_dim=8, d_model=32)
        path = os.path.join(src, "model.safetensors")
        tensors = reference.read_safetensors(path)
        tensors["model.layers.0.pre_feedforward_layernorm.weight"] = np.zeros(32)
        family_writer.write_safetensors(path, tensors, "F32")
        with open(os.path.join(src, "config.json")) as f:
            config = json.load(f)
        os.remove(os.path.join(src, "config.json"))
        flags = ("--heads", str(config["num_attention_heads"]), "--head-dim", "8")
        result = harness.run("analyze", src, *flags)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("--family gemma3", result.stderr)
        self.assertEqual(result.stdout, "")
        forced = harness.run("analyze", src, *flags, "--family", "gemma3", "--format", "json")
        self.assertEqual(forced.returncode, 0, forced.stderr)
        with open(os.path.join(src, "config.json"), "w") as f:
            json.dump(config, f)
        with_config, _ = analyze(src, reprs=("qk",))
        for g, w in zip(json.loads(forced.stdout)["models"][0]["layers"], with_config["qk"]["layers"]):
            self.assertTrue(harness.close(g["erank"], w["erank"], EXACT, 1e-9))

    def test_fold_input_norm_is_refused_where_there_is_none(self):
        src = os.path.join(self.dir, "mla")
        harness.run_writer("write_latent_checkpoints.py", "mla", src, src + "-ref", "--layers", "1",
                           "--heads", "2", "--hidden", "16", "--kv-lora-rank", "8", "--nope", "4",
                           "--rope", "2", "--v-head-dim", "4")
        result = harness.run("analyze", src, "--fold-input-norm")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("--fold-input-norm is supported for the dense layouts", result.stderr)

    def test_fold_input_norm_is_refused_with_a_map(self):
        """A --map file names no norm gain: refused, where it used to be ignored silently."""
        src = os.path.join(self.dir, "mapped")
        family_writer.write_family("map", src, src, layers=1, heads=4, kv_heads=2, head_dim=8)
        map_file = os.path.join(src, "map.json")
        self.assertEqual(harness.run("analyze", src, "--map", map_file).returncode, 0)
        result = harness.run("analyze", src, "--map", map_file, "--fold-input-norm")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("--fold-input-norm is supported for the dense layouts, not for map",
                      result.stderr)
        self.assertEqual(result.stdout, "")


if __name__ == "__main__":
    harness.main_unittest()
