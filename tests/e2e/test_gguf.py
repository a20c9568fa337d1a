#!/usr/bin/env python3
"""End-to-end: `kvrank analyze x.gguf` on GGUF files written by tests/writers/write_gguf.py (an
independent numpy writer: llama.cpp's Q/K row permutation, numpy quantizers for every block type)
from a llama-layout safetensors checkpoint written by tests/writers/write_family_checkpoints.py.

For every type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL,
IQ4_XS) and representation:
  1. exact: kvrank on x.gguf == scripts/reference.py on what the GGUF holds (dequantized by the
     writer in numpy, un-permuted) to 1e-6 — checks the reader, the dequantizers and that the
     permutation leaves the metric unchanged;
  2. faithful: kvrank on x.gguf ≈ kvrank on the original safetensors, within a tolerance that
     scales with the type's quantization error (see tolerance()).
Plus: inspect lists GGUF types and names; malformed GGUF files exit 2 with one line on stderr; an
attention tensor of a type kvrank cannot read blocks only the representations that read it; split
GGUFs are read from their first part; MLA's kv_b split into attn_k_b / attn_v_b reads as kv_b.

Run from the repository root: python3 tests/e2e/test_gguf.py path/to/kvrank
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

TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K",
         "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"]
REPRS = ["qk", "ov", "k", "v"]
# |kvrank(GGUF) - kvrank(original)| allowed for erank / erank_centered: H·(4ε² + ε/√d_h), with ε
# the largest relative (Frobenius) error of a stored weight, measured on the writer's own
# dequantized weights (F16 2e-4, BF16 1.7e-3, Q8_0 5.5e-3, Q6_K 2e-2, Q5_K 3.9e-2, Q4_K 7.9e-2, Q4_0
# 8.7e-2 for these Gaussian weights). Independent errors in Q and K inflate every ‖A_h‖² by about
# 2ε², so cosines of near-parallel heads shrink by ~4ε² (second order: dominant for the 4-bit
# types); to first order the error's component along another head's form averages over the
# d·d_h independent entries, ≲ ε/√d_h per cosine. erank moves by at most about H times the largest
# change of S (Weyl). Measured deviations are 5-25x below this; reading a block layout wrong gives
# errors of order 1 (and fails the exact test by far).
def tolerance(epsilon, heads=8, head_dim=32):
    return heads * (4 * epsilon**2 + epsilon / head_dim**0.5)


EXACT = 1e-6  # relative, for kvrank vs the numpy reference on the same (dequantized) weights
GEOMETRY = dict(family="llama", variant="gqa", heads=8, kv_heads=2, head_dim=32, d_model=256,
                num_layers=2)


def analyze(path, repr_name):
    return analyze_all(path, [repr_name])[repr_name]


def analyze_all(path, reprs=REPRS):
    """repr → the model's JSON (one kvrank run: --repr takes a list)."""
    result = harness.run("analyze", path, "--repr", ",".join(reprs), "--format", "json")
    assert result.returncode == 0, result.stderr
    return {model["repr"]: model for model in json.loads(result.stdout)["models"]}


def relative_error(held, original):
    """Largest ‖held - original‖_F / ‖original‖_F over the attention weights."""
    a, b = reference.load_llama(held)[1], reference.load_llama(original)[1]
    return max(float(np.linalg.norm(a[k] - b[k]) / np.linalg.norm(b[k])) for k in a)


def close(a, b, tolerance):
    return abs(a - b) <= tolerance * max(1.0, abs(b))


class GgufTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        cls.src = os.path.join(cls.dir, "src")
        family_writer.write_family("llama", cls.src, os.path.join(cls.dir, "ref"), layers=2,
                                   heads=8, kv_heads=2, head_dim=32, d_model=256)
        cls.original = analyze_all(cls.src)
        cls.gguf, cls.held, cls.results = {}, {}, {}
        for type_name in TYPES:
            cls.gguf[type_name] = os.path.join(cls.dir, f"m-{type_name}.gguf")
            cls.held[type_name] = os.path.join(cls.dir, f"held-{type_name}")
            write_gguf.convert(cls.src, cls.gguf[type_name], type_name,
                               dequantized=cls.held[type_name], vocabulary_size=500)
            cls.results[type_name] = analyze_all(cls.gguf[type_name])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_geometry_from_metadata(self):
        model = self.results["Q4_K"]["qk"]
        for key, value in GEOMETRY.items():
            self.assertEqual(model[key], value, key)

    def test_exact_against_reference_on_the_held_weights(self):
        # qk and ov read all four projections; k and v once more on one block type (the naive
        # reference builds every d×d form and is the slow part of this test).
        cases = [(t, r) for t in TYPES for r in ("qk", "ov")] + [("Q4_K", "k"), ("Q4_K", "v")]
        for type_name, repr_name in cases:
            with self.subTest(type=type_name, repr=repr_name):
                got = self.results[type_name][repr_name]["layers"]
                want = reference.cmd_llama(self.held[type_name], repr_name)
                self.assertEqual(len(got), len(want))
                for g, w in zip(got, want):
                    for key in ("erank", "erank_centered", "mean_similarity"):
                        self.assertTrue(close(g[key], w[key], EXACT),
                                        f"layer {g['layer']} {key}: {g[key]} vs {w[key]}")
                    self.assertEqual(g["pcs_90"], w["pcs_90"])
                    for a, b in zip(g["head_norm"], w["head_norm"]):
                        self.assertTrue(close(a, b, EXACT), f"head_norm {a} vs {b}")

    def test_faithful_to_the_original_checkpoint(self):
        for type_name in TYPES:
            allowed = 1e-6 if type_name == "F32" else tolerance(
                relative_error(self.held[type_name], self.src))
            for repr_name in REPRS:
                with self.subTest(type=type_name, repr=repr_name):
                    got = self.results[type_name][repr_name]["layers"]
                    for g, w in zip(got, self.original[repr_name]["layers"]):
                        for key in ("erank", "erank_centered"):
                            self.assertLessEqual(abs(g[key] - w[key]), allowed,
                                                 f"layer {g['layer']} {key}")

    def test_unpermuted_qwen2_and_alignment_64_read_the_same(self):
        path = os.path.join(self.dir, "qwen2.gguf")
        write_gguf.convert(self.src, path, "Q8_0", arch="qwen2", alignment=64, vocabulary_size=10)
        got = analyze(path, "qk")
        want = analyze(self.gguf["Q8_0"], "qk")
        self.assertEqual(got["layers"][0]["kept_heads"], 8)
        for g, w in zip(got["layers"], want["layers"]):
            self.assertTrue(close(g["erank"], w["erank"], 1e-5), f"{g['erank']} vs {w['erank']}")

    def test_qk_norm_families_match_their_safetensors(self):
        # Qwen3 / Gemma 3 (per-head-dim gains; Gemma's stored as 1 + w in GGUF) and OLMo 2 (gains
        # over the whole width): the GGUF gives the numbers of the Hugging Face checkpoint.
        for family, arch in (("qwen3", "qwen3"), ("gemma3", "gemma3"), ("olmo2", "olmo2")):
            with self.subTest(family=family):
                src = os.path.join(self.dir, family)
                family_writer.write_family(family, src, os.path.join(self.dir, family + "-ref"),
                                           layers=2, heads=4, kv_heads=2, head_dim=8, d_model=32)
                path = os.path.join(self.dir, family + ".gguf")
                write_gguf.convert(src, path, "F32", arch=arch, vocabulary_size=10)
                got_all, want_all = analyze_all(path, ["qk", "k"]), analyze_all(src, ["qk", "k"])
                for repr_name in ("qk", "k"):
                    for g, w in zip(got_all[repr_name]["layers"], want_all[repr_name]["layers"]):
                        self.assertTrue(close(g["erank"], w["erank"], EXACT),
                                        f"{repr_name} layer {g['layer']}: {g['erank']} vs {w['erank']}")

    def test_deepseek2_mla(self):
        src, ref = os.path.join(self.dir, "mla"), os.path.join(self.dir, "mla-ref")
        harness.run_writer("write_latent_checkpoints.py", "mla", src, ref, "--layers", "2",
                           "--heads", "4", "--hidden", "64", "--kv-lora-rank", "32",
                           "--q-lora-rank", "32", "--nope", "8", "--rope", "4", "--v-head-dim", "8")
        want_all = analyze_all(src)
        for type_name, allowed in (("F32", 1e-6), ("Q8_0", tolerance(6e-3, 4, 12))):
            with self.subTest(type=type_name):
                path = os.path.join(self.dir, f"mla-{type_name}.gguf")
                write_gguf.convert(src, path, type_name, arch="deepseek2", vocabulary_size=10)
                got_all = analyze_all(path)
                for repr_name in REPRS:
                    got, want = got_all[repr_name], want_all[repr_name]
                    for key in ("family", "variant", "heads", "head_dim", "mla_kv_lora_rank"):
                        self.assertEqual(got[key], want[key], key)
                    for g, w in zip(got["layers"], want["layers"]):
                        self.assertLessEqual(abs(g["erank"] - w["erank"]), allowed, repr_name)

    def test_deepseek2_mla_with_split_kv_b(self):
        # Newer llama.cpp converters write kv_b_proj only as attn_k_b [H, c, n] and attn_v_b.
        src = os.path.join(self.dir, "mla-split-src")
        harness.run_writer("write_latent_checkpoints.py", "mla", src, src + "-ref", "--layers", "2",
                           "--heads", "4", "--hidden", "64", "--kv-lora-rank", "32",
                           "--q-lora-rank", "0", "--nope", "8", "--rope", "4", "--v-head-dim", "8")
        whole, split = os.path.join(self.dir, "mla-kvb.gguf"), os.path.join(self.dir, "mla-kb-vb.gguf")
        write_gguf.convert(src, whole, "F32", arch="deepseek2", vocabulary_size=10)
        write_gguf.convert(src, split, "F32", arch="deepseek2", vocabulary_size=10,
                           split_mla_kv_b=True)
        inspect = json.loads(harness.run("inspect", split, "--format", "json").stdout)
        stored = {t.get("stored_name") for t in inspect["checkpoints"][0]["tensors"]}
        self.assertIn("blk.0.attn_k_b.weight", stored)
        self.assertNotIn("blk.0.attn_kv_b.weight", stored)
        got_all, want_all = analyze_all(split), analyze_all(whole)
        for repr_name in REPRS:
            for g, w in zip(got_all[repr_name]["layers"], want_all[repr_name]["layers"]):
                self.assertTrue(close(g["erank"], w["erank"], EXACT), repr_name)

    def test_unreadable_type_blocks_only_what_reads_it(self):
        # llama-quantize may store attn_v in a type kvrank does not read: qk and k do not need it.
        path = os.path.join(self.dir, "v-iq2.gguf")
        write_gguf.convert(self.src, path, "F32", role_types={"v_proj": "IQ2_XXS"},
                           vocabulary_size=10)
        got = analyze_all(path, ["qk", "k"])
        for repr_name in ("qk", "k"):
            for g, w in zip(got[repr_name]["layers"], self.results["F32"][repr_name]["layers"]):
                self.assertTrue(close(g["erank"], w["erank"], EXACT), repr_name)
        for repr_name in ("v", "ov"):
            result = harness.run("analyze", path, "--repr", repr_name)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertEqual(result.stdout, "")
            self.assertIn("blk.0.attn_v.weight: GGML type IQ2_XXS is not supported", result.stderr)

    def test_split_gguf_is_read_from_its_first_part(self):
        path = os.path.join(self.dir, "split.gguf")
        parts = write_gguf.convert(self.src, path, "Q8_0", vocabulary_size=10, parts=3)
        self.assertEqual(os.path.basename(parts[0]), "split-00001-of-00003.gguf")
        got = analyze_all(parts[0])
        for repr_name in REPRS:
            for g, w in zip(got[repr_name]["layers"], self.results["Q8_0"][repr_name]["layers"]):
                self.assertTrue(close(g["erank"], w["erank"], EXACT), repr_name)
        result = harness.run("analyze", parts[1])
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("this is part 2 of a GGUF split into 3 files; give the first part",
                      result.stderr)
        os.remove(parts[2])
        result = harness.run("analyze", parts[0])
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn(f"{parts[2]}: missing: part 3 of 3", result.stderr)

    def test_inspect_lists_gguf_names_and_types(self):
        result = harness.run("inspect", self.gguf["Q4_K"], "--format", "json")
        self.assertEqual(result.returncode, 0, result.stderr)
        checkpoint = json.loads(result.stdout)["checkpoints"][0]
        tensors = {t["name"]: t for t in checkpoint["tensors"]}
        q = tensors["model.layers.0.self_attn.q_proj.weight"]
        self.assertEqual(q["dtype"], "Q4_K")
        self.assertEqual(q["stored_name"], "blk.0.attn_q.weight")
        self.assertEqual(q["shape"], [256, 256])
        self.assertEqual(q["bytes"], 256 * 144)
        self.assertEqual(tensors["token_embd.weight"]["dtype"], "F32")
        norm = tensors["model.layers.0.input_layernorm.weight"]  # for --fold-input-norm
        self.assertEqual(norm["stored_name"], "blk.0.attn_norm.weight")
        self.assertEqual(norm["layer"], 0)
        self.assertEqual(checkpoint["family"], "llama")
        text = harness.run("inspect", self.gguf["Q4_K"]).stdout
        self.assertIn("blk.0.attn_q.weight", text)
        self.assertIn("Q4_K", text)

    def test_malformed_gguf_exits_2_with_one_line(self):
        with open(self.gguf["Q8_0"], "rb") as f:
            good = f.read()
        cases = {
            "truncated.gguf": (good[:-100], "runs past the end of the file"),
            "magic.gguf": (b"GGUX" + good[4:], "not a GGUF file (it does not start with \"GGUF\")"),
            "version.gguf": (good[:4] + b"\x01\0\0\0" + good[8:],
                             "GGUF version 1 is not supported (expected version 2 or 3)"),
        }
        for name, (data, message) in cases.items():
            with self.subTest(file=name):
                path = os.path.join(self.dir, name)
                with open(path, "wb") as f:
                    f.write(data)
                result = harness.run("analyze", path)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertEqual(result.stdout, "")
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertTrue(result.stderr.startswith(f"kvrank: error: {path}"), result.stderr)
                self.assertIn(message, result.stderr)


if __name__ == "__main__":
    harness.main_unittest()
