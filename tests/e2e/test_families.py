#!/usr/bin/env python3
"""End-to-end: `kvrank analyze` on every dense checkpoint family (llama MHA/GQA/MQA and explicit
head_dim, gpt2 with and without `transformer.`, gpt_neox, falcon's three layouts, phi3, --map, K/V-only
NPY; bloom, mpt, baichuan, qwen v1, gpt_bigcode MQA/MHA, internlm2, chatglm (multi-query, MHA and
ChatGLM-6B v1), opt, phi-2, llama4 —
each found by its config's model_type — and minicpm3's MLA) in F32, BF16 and F16, checked against scripts/reference.py on the per-head matrices the
checkpoints were assembled from (tests/writers/write_family_checkpoints.py). Plus the detection errors.

Run from the repository root: python3 tests/e2e/test_families.py path/to/kvrank
"""
import json
import os
import sys
import tempfile
import unittest

import numpy as np

import harness  # puts scripts/ on sys.path
import reference  # noqa: E402  (scripts/reference.py: the naive numpy metric)
import write_family_checkpoints as writer  # noqa: E402

# name, writer family, writer arguments, representations, expected geometry, extra kvrank arguments
CASES = [
    ("llama-mha", "llama", dict(heads=4), ["qk", "ov", "k"],
     dict(family="llama", variant="mha", heads=4, kv_heads=4, head_dim=8), []),
    ("llama-gqa", "llama", dict(heads=8, kv_heads=2), ["qk", "ov", "k", "v"],
     dict(family="llama", variant="gqa", heads=8, kv_heads=2, head_dim=4), []),
    ("llama-mqa", "llama", dict(heads=4, kv_heads=1), ["qk", "k"],
     dict(family="llama", variant="mqa", heads=4, kv_heads=1, head_dim=8), []),
    ("llama-head-dim", "llama", dict(heads=4, kv_heads=2, head_dim=12), ["qk", "ov"],
     dict(family="llama", variant="gqa", heads=4, kv_heads=2, head_dim=12), []),
    ("gpt2", "gpt2", dict(heads=4), ["qk", "ov"],
     dict(family="gpt2", variant="mha", heads=4, kv_heads=4, head_dim=8), []),
    ("gpt2-no-prefix", "gpt2", dict(heads=4, prefix=False), ["qk", "v"],
     dict(family="gpt2", variant="mha", heads=4, kv_heads=4, head_dim=8), []),
    ("gpt_neox", "gpt_neox", dict(heads=4), ["qk", "ov", "v"],
     dict(family="gpt_neox", variant="mha", heads=4, kv_heads=4, head_dim=8), []),
    ("falcon-new", "falcon_new", dict(heads=8, kv_heads=2), ["qk", "ov", "k"],
     dict(family="falcon", variant="gqa", heads=8, kv_heads=2, head_dim=4), []),
    ("falcon-mq", "falcon_mq", dict(heads=4), ["qk", "ov", "k"],
     dict(family="falcon", variant="mqa", heads=4, kv_heads=1, head_dim=8), []),
    ("falcon-mha", "falcon_mha", dict(heads=4), ["qk", "ov"],
     dict(family="falcon", variant="mha", heads=4, kv_heads=4, head_dim=8), []),
    ("phi3", "phi3", dict(heads=8, kv_heads=4), ["qk", "ov", "k"],
     dict(family="phi3", variant="gqa", heads=8, kv_heads=4, head_dim=4), []),
    ("map", "map", dict(heads=4, kv_heads=2), ["qk", "ov", "v"],
     dict(family="map", variant="gqa", heads=4, kv_heads=2, head_dim=8), ["--map", "{ref}/map.json"]),
    # Read by their config's model_type: bloom's tensor names are falcon's, qwen's and gpt_bigcode's
    # are gpt2's (each with its own row order or orientation).
    ("bloom", "bloom", dict(heads=4), ["qk", "ov", "k"],
     dict(family="bloom", model_type="bloom", variant="mha", heads=4, kv_heads=4, head_dim=8), []),
    ("mpt", "mpt", dict(heads=4), ["qk", "ov", "v"],
     dict(family="mpt", variant="mha", heads=4, kv_heads=4, head_dim=8), []),
    ("baichuan", "baichuan", dict(heads=4), ["qk", "ov"],
     dict(family="baichuan", variant="mha", heads=4, kv_heads=4, head_dim=8), []),
    ("qwen-v1", "qwen", dict(heads=4), ["qk", "ov", "k"],
     dict(family="qwen", variant="mha", heads=4, kv_heads=4, head_dim=8), []),
    ("gpt_bigcode-mq", "gpt_bigcode_mq", dict(heads=4), ["qk", "ov", "k"],
     dict(family="gpt_bigcode", variant="mqa", heads=4, kv_heads=1, head_dim=8), []),
    ("gpt_bigcode-mha", "gpt_bigcode_mha", dict(heads=4), ["qk", "ov"],
     dict(family="gpt_bigcode", variant="mha", heads=4, kv_heads=4, head_dim=8), []),
    ("internlm2", "internlm2", dict(heads=8, kv_heads=2), ["qk", "ov", "k", "v"],
     dict(family="internlm2", variant="gqa", heads=8, kv_heads=2, head_dim=4), []),
    ("chatglm", "chatglm", dict(heads=8, kv_heads=2), ["qk", "ov", "k", "v"],
     dict(family="chatglm", variant="gqa", heads=8, kv_heads=2, head_dim=4), []),
    # ChatGLM2/3 without multi_query_attention and ChatGLM-6B (v1): per head q, k, v rows.
    ("chatglm-mha", "chatglm", dict(heads=4), ["qk", "ov", "k", "v"],
     dict(family="chatglm", variant="mha", heads=4, kv_heads=4, head_dim=8), []),
    ("chatglm-v1", "chatglm_v1", dict(heads=4), ["qk", "ov", "k", "v"],
     dict(family="chatglm", model_type="chatglm", variant="mha", heads=4, kv_heads=4, head_dim=8),
     []),
    ("opt", "opt", dict(heads=4), ["qk", "ov"],
     dict(family="llama", model_type="opt", variant="mha", heads=4, kv_heads=4, head_dim=8), []),
    ("phi-2", "phi", dict(heads=4, kv_heads=2), ["qk", "ov"],
     dict(family="llama", model_type="phi", variant="gqa", heads=4, kv_heads=2, head_dim=8), []),
    ("llama4", "llama4", dict(heads=4, kv_heads=2), ["qk", "ov", "k"],
     dict(family="llama", model_type="llama4", variant="gqa", heads=4, kv_heads=2, head_dim=8), []),
]

DTYPES = ["F32", "BF16", "F16"]


def run(args):
    return harness.run(*args)


def analyze_json(args):
    result = run(["analyze"] + args + ["--format", "json"])
    assert result.returncode == 0, f"kvrank {' '.join(args)} failed:\n{result.stderr}"
    return json.loads(result.stdout), result.stderr


def reference_layers(npz):
    """What `scripts/reference.py heads NPZ` prints under "layers" (called in-process: faster)."""
    return reference.cmd_heads(npz)


close = harness.close


class FamiliesAgainstReference(unittest.TestCase):
    def check_model(self, model, ref_layers, where):
        self.assertEqual(len(model["layers"]), len(ref_layers), where)
        for got, want in zip(model["layers"], ref_layers):
            at = f"{where} layer {want['layer']}"
            self.assertEqual(got["layer"], want["layer"], at)
            self.assertEqual(got["pcs_90"], want["pcs_90"], at)
            for key in ("erank", "erank_centered", "mean_similarity"):
                self.assertTrue(close(got[key], want[key]),
                                f"{at}: {key} kvrank {got[key]!r} reference {want[key]!r}")

    def test_every_family_and_dtype(self):
        checked = 0
        for name, family, kwargs, reprs, geometry, extra in CASES:
            for dtype in DTYPES:
                with self.subTest(case=name, dtype=dtype), tempfile.TemporaryDirectory() as tmp:
                    out, ref = os.path.join(tmp, "ckpt"), os.path.join(tmp, "ref")
                    writer.write_family(family, out, ref, dtype=dtype, seed=len(name) + checked,
                                        layers=3, d_model=32, **kwargs)
                    args = [a.replace("{ref}", ref) for a in extra]
                    doc, _ = analyze_json([out, "--repr", ",".join(reprs)] + args)
                    models = doc["models"]
                    self.assertEqual([m["repr"] for m in models], reprs)
                    for model in models:
                        for key, value in geometry.items():
                            self.assertEqual(model[key], value, f"{name} {dtype} {key}")
                        self.assertEqual(model["d_model"], 32)
                        self.assertEqual(model["num_layers"], 3)
                        where = f"{name} {dtype} {model['repr']}"
                        self.check_model(model, reference_layers(os.path.join(ref, model["repr"] + ".npz")),
                                         where)
                    checked += 1
        print(f"families: {checked} family × dtype checkpoints match the reference")

    def test_kv_only_npy_folder(self):
        for dtype in ("F32", "F16"):
            with self.subTest(dtype=dtype), tempfile.TemporaryDirectory() as tmp:
                out, ref = os.path.join(tmp, "kv"), os.path.join(tmp, "ref")
                writer.write_family("kvonly", out, ref, dtype=dtype, seed=7, layers=2, heads=4,
                                    d_model=32)
                doc, stderr = analyze_json([out, "--kv-heads", "4"])
                self.assertIn("only key/value", stderr)
                models = doc["models"]
                self.assertEqual([m["repr"] for m in models], ["k", "v"])
                for model in models:
                    self.assertEqual((model["heads"], model["kv_heads"], model["head_dim"]), (4, 4, 8))
                    self.check_model(model, reference_layers(os.path.join(ref, model["repr"] + ".npz")),
                                     f"kvonly {dtype} {model['repr']}")
                result = run(["analyze", out, "--kv-heads", "4", "--repr", "qk"])
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn("key/value", result.stderr)

    def test_minicpm3_is_read_as_mla(self):
        # MiniCPM3 uses DeepSeek's MLA tensor names; its config has no v_head_dim (from kv_b).
        with tempfile.TemporaryDirectory() as tmp:
            out, ref = os.path.join(tmp, "ckpt"), os.path.join(tmp, "ref")
            harness.run_writer("write_latent_checkpoints.py", "mla", out, ref, "--layers", "2",
                               "--heads", "4", "--hidden", "32", "--kv-lora-rank", "16",
                               "--q-lora-rank", "12", "--nope", "4", "--rope", "2",
                               "--v-head-dim", "6")
            with open(os.path.join(out, "config.json")) as f:
                config = json.load(f)
            config["model_type"] = "minicpm3"
            del config["v_head_dim"]
            with open(os.path.join(out, "config.json"), "w") as f:
                json.dump(config, f)
            doc, _ = analyze_json([out, "--repr", "qk,ov"])
            for model in doc["models"]:
                self.assertEqual((model["family"], model["model_type"], model["variant"]),
                                 ("deepseek_v2", "minicpm3", "mla"))
                self.check_model(model, reference_layers(os.path.join(ref, model["repr"] + ".npz")),
                                 f"minicpm3 {model['repr']}")

    def test_chatglm_identical_heads_are_one(self):
        """Two (here: four) identical heads of a ChatGLM without multi_query_attention are one
        head: erank 1. Read as [Q; K; V] blocks, the rows of different heads mixed (1.9986)."""
        for family in ("chatglm", "chatglm_v1"):
            with self.subTest(family=family), tempfile.TemporaryDirectory() as tmp:
                out, ref = os.path.join(tmp, "ckpt"), os.path.join(tmp, "ref")
                tensors, config = writer.write_family(family, out, ref, seed=4, layers=2, heads=4,
                                                      d_model=32)
                rng = np.random.default_rng(4)
                for i in range(2):
                    m = writer.Heads(rng, i, 4, 4, 8, 32, "F32")
                    for role in ("q", "k", "v", "o"):
                        setattr(m, role, [getattr(m, role)[0]] * 4)
                    tensors.update(writer.fused_tensors(family, i, m))
                writer.write_checkpoint(out, tensors, config, "F32")
                doc, _ = analyze_json([out, "--repr", "qk,ov,k,v"])
                for model in doc["models"]:
                    for layer in model["layers"]:
                        self.assertTrue(close(layer["erank"], 1.0),
                                        f"{family} {model['repr']} layer {layer['layer']}: "
                                        f"erank {layer['erank']}")

    def test_bare_safetensors_needs_heads(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, ref = os.path.join(tmp, "ckpt"), os.path.join(tmp, "ref")
            writer.write_family("llama", out, ref, seed=3, layers=2, heads=8, kv_heads=2,
                                head_dim=6, d_model=32)
            os.remove(os.path.join(out, "config.json"))
            bare = os.path.join(out, "model.safetensors")
            result = run(["analyze", bare, "--format", "json"])
            self.assertEqual(result.returncode, 2)
            self.assertIn("--heads", result.stderr)
            self.assertEqual(result.stdout, "")
            doc, _ = analyze_json([bare, "--heads", "8"])
            model = doc["models"][0]
            self.assertEqual((model["heads"], model["kv_heads"], model["head_dim"], model["d_model"]),
                             (8, 2, 6, 32))
            self.check_model(model, reference_layers(os.path.join(ref, "qk.npz")), "bare llama qk")


class DetectionErrors(unittest.TestCase):
    def write_llama(self, tmp, edit):
        out, ref = os.path.join(tmp, "ckpt"), os.path.join(tmp, "ref")
        tensors, config = writer.write_family("llama", out, ref, seed=5, layers=2, heads=8,
                                              kv_heads=8, d_model=64)
        edit(tensors, config)
        writer.write_checkpoint(out, tensors, config, "F32")
        return out

    def expect_error(self, path, *needles, args=()):
        result = run(["analyze", path, "--format", "json"] + list(args))
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(result.stdout, "")
        self.assertTrue(result.stderr.startswith("kvrank: error: "), result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        for needle in needles:
            self.assertIn(needle, result.stderr)
        return result.stderr

    def test_config_disagrees_with_tensor_shape(self):
        name = "model.layers.0.self_attn.q_proj.weight"

        def truncate_q(tensors, _):
            tensors[name] = tensors[name][:48]
        with tempfile.TemporaryDirectory() as tmp:
            stderr = self.expect_error(self.write_llama(tmp, truncate_q), "config.json", name,
                                       "[48, 64]", "8 heads × head_dim 8 = 64 rows")
            print("  shape error:", stderr.strip())

    def test_missing_tensor_is_named(self):
        name = "model.layers.1.self_attn.k_proj.weight"
        with tempfile.TemporaryDirectory() as tmp:
            stderr = self.expect_error(self.write_llama(tmp, lambda t, _: t.pop(name)), name)
            print("  missing tensor:", stderr.strip())

    def test_heads_not_multiple_of_kv_heads(self):
        def bad_kv(_, config):
            config["num_key_value_heads"] = 3
        with tempfile.TemporaryDirectory() as tmp:
            self.expect_error(self.write_llama(tmp, bad_kv), "config.json", "kv_heads 3")

    def test_unknown_layout_suggests_map(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "odd.safetensors")
            writer.write_safetensors(path, {"blocks.0.w": np.ones((4, 4))}, "F32")
            self.expect_error(path, "--map")

    def test_an_unknown_model_type_read_by_a_known_reader_is_said(self):
        def rename(_, config):
            config["model_type"] = "mystery_lm"
        with tempfile.TemporaryDirectory() as tmp:
            out = self.write_llama(tmp, rename)
            doc, stderr = analyze_json([out])
            self.assertEqual(doc["models"][0]["model_type"], "mystery_lm")
            self.assertIn('model type "mystery_lm" is not one kvrank knows: read by the llama '
                          "reader, from its tensor names", stderr)
            self.assertEqual(len([line for line in stderr.splitlines() if "mystery_lm" in line]), 1)
            _, quiet = analyze_json([out, "-q"])  # a warning: -q keeps it
            self.assertIn('model type "mystery_lm" is not one kvrank knows', quiet)
            _, verbose = analyze_json([out, "-v"])  # -v: the tensors and geometry it read
            self.assertIn("llama reader: heads ", verbose)
            _, stderr = analyze_json([out, "--family", "llama"])  # named: nothing to say
            self.assertNotIn("mystery_lm", stderr)
            known = self.write_llama(os.path.join(tmp, "known"), lambda t, c: None)
            _, stderr = analyze_json([known])
            self.assertNotIn("not one kvrank knows", stderr)

    def test_layers_out_of_range(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = self.write_llama(tmp, lambda t, c: None)
            self.expect_error(out, "layer 2", args=["--layers", "0-2"])


if __name__ == "__main__":
    harness.main_unittest()
