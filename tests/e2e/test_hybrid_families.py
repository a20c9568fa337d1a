#!/usr/bin/env python3
"""End-to-end: `kvrank analyze` on hybrids whose attention heads are in some layers only — Jamba
(attn_layer_period / attn_layer_offset), Granite 4.0 hybrid (layer_types) and Qwen3-Next
(full_attention_interval, gated q_proj, q_norm / k_norm of 1 + w), Bamba (attn_layer_indices)
and Zamba 2 (shared attention
blocks with per-layer adapters, reference.py zamba2) — written in their Hugging Face names by
tests/writers/write_family_checkpoints.py (independent numpy), with NaN Mamba and linear-attention
blocks in the other layers.

The attention layers are analysed under their own layer numbers and checked against
`reference.py heads` on the writer's factors and `reference.py llama` reading the checkpoint; the
other layers are neither analysed nor selectable; a config.json that disagrees with the tensors is
an error naming the tensor.

Run from the repository root: python3 tests/e2e/test_hybrid_families.py path/to/kvrank
"""
import json
import os
import tempfile
import unittest

import numpy as np

import harness  # puts scripts/ and tests/writers/ on sys.path
import reference  # noqa: E402  (scripts/reference.py: the naive numpy metric)
import write_family_checkpoints as writer  # noqa: E402

REPRS = ["qk", "ov", "k", "v"]
GEOMETRY = dict(layers=8, heads=4, kv_heads=2, head_dim=6, d_model=32)


def write(tmp, family, dtype="F32", seed=0):
    out, ref = os.path.join(tmp, family), os.path.join(tmp, family + ".ref")
    tensors, config, attention = writer.write_hybrid(family, out, ref, dtype=dtype, seed=seed,
                                                     **GEOMETRY)
    return out, ref, tensors, config, attention


def analyze(*args):
    result = harness.run("analyze", *args, "--format", "json")
    return result, (json.loads(result.stdout)["models"] if result.returncode == 0 else None)


def assert_layers_select(test, out, layers, selected, attention_layers):
    """--layers LAYERS reads the model's own layer numbers `selected`; layer 3, a Mamba layer in
    every writer's model, is refused naming the attention layers."""
    result, models = analyze(out, "--layers", layers)
    test.assertEqual(result.returncode, 0, result.stderr)
    test.assertEqual([layer["layer"] for layer in models[0]["layers"]], selected)
    result, _ = analyze(out, "--layers", "3")
    test.assertEqual(result.returncode, 2, result.stderr)
    test.assertIn("--layers: layer 3 has no attention heads (the model's attention layers: "
                  f"{attention_layers})", result.stderr)


def assert_edit_refused(test, out, tensors, config, edit, needles):
    """Rewrites the checkpoint `out` after edit(tensors, config): analyze must exit 2 with one line
    on stderr holding every needle."""
    edit(tensors, config)
    writer.write_checkpoint(out, tensors, config, "F32")
    result, _ = analyze(out)
    test.assertEqual(result.returncode, 2, result.stderr)
    test.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
    for needle in needles:
        test.assertIn(needle, result.stderr)


class HybridFamilies(unittest.TestCase):
    def assert_layers(self, got, want, where):
        self.assertEqual([g["layer"] for g in got], [w["layer"] for w in want], where)
        for g, w in zip(got, want):
            at = f"{where} layer {w['layer']}"
            self.assertEqual(g["pcs_90"], w["pcs_90"], at)
            for key in ("erank", "erank_centered", "mean_similarity"):
                self.assertTrue(harness.close(g[key], w[key]),
                                f"{at}: {key} kvrank {g[key]!r} reference {w[key]!r}")

    def test_attention_layers_under_their_own_numbers_against_both_references(self):
        checked = 0
        for family in writer.HYBRIDS:
            for dtype in ("F32", "BF16"):
                with self.subTest(family=family, dtype=dtype), tempfile.TemporaryDirectory() as tmp:
                    out, ref, _, _, attention = write(tmp, family, dtype, seed=checked)
                    result, models = analyze(out, "--repr", ",".join(REPRS))
                    self.assertEqual(result.returncode, 0, result.stderr)
                    for model in models:
                        self.assertEqual([layer["layer"] for layer in model["layers"]], attention)
                    harness.assert_models_match_references(
                        self, models, ref, lambda r: reference.cmd_llama(out, r),
                        f"{family} {dtype}", family="llama", model_type=family, heads=4,
                        kv_heads=2, head_dim=6, num_layers=8)
                    checked += 1
        print(f"hybrids: {checked} family × dtype checkpoints match both references")

    def test_layers_selects_by_the_models_own_numbers(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, _, _, _, attention = write(tmp, "jamba", seed=3)
            self.assertEqual(attention, [2, 6])
            assert_layers_select(self, out, "6", [6], "2,6")

    def test_layer_shards_merge_without_layers(self):
        """The result names a hybrid's attention layers, so merge knows which layers the shards
        of one run must hold — and the merge is byte for byte the one run's file."""
        with tempfile.TemporaryDirectory() as tmp:
            out, _, _, _, attention = write(tmp, "granitemoehybrid", seed=6)
            one_run = harness.run("analyze", out, "--format", "json", "--threads", "1")
            self.assertEqual(one_run.returncode, 0, one_run.stderr)
            self.assertEqual(json.loads(one_run.stdout)["models"][0]["attention_layers"], attention)
            parts = []
            for index in range(3):
                parts.append(os.path.join(tmp, f"part{index}.json"))
                shard = harness.run("analyze", out, "--layer-shard", f"{index}/3", "--threads", "1",
                                    "-o", parts[-1])
                self.assertEqual(shard.returncode, 0, shard.stderr)
            merged = harness.run("merge", *parts)
            self.assertEqual(merged.returncode, 0, merged.stderr)
            self.assertEqual(merged.stdout, one_run.stdout)
            missing = harness.run("merge", *parts[:2])
            self.assertEqual(missing.returncode, 2)
            self.assertIn("in no part", missing.stderr)

    def test_the_gate_rows_of_qwen3_next_are_not_read(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, _, tensors, config, attention = write(tmp, "qwen3_next", seed=4)
            _, before = analyze(out, "--repr", "qk,ov")
            head_dim = GEOMETRY["head_dim"]
            for layer in attention:
                q = tensors[f"model.layers.{layer}.self_attn.q_proj.weight"].copy()
                for h in range(GEOMETRY["heads"]):  # the second d_h rows of each head: its gate
                    q[(2 * h + 1) * head_dim:(2 * h + 2) * head_dim] *= -3.0
                tensors[f"model.layers.{layer}.self_attn.q_proj.weight"] = q
            writer.write_checkpoint(out, tensors, config, "F32")
            result, after = analyze(out, "--repr", "qk,ov")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual([m["layers"] for m in after], [m["layers"] for m in before])

    def expect_error(self, family, edit, *needles):
        with tempfile.TemporaryDirectory() as tmp:
            out, _, tensors, config, _ = write(tmp, family, seed=5)
            assert_edit_refused(self, out, tensors, config, edit, needles)

    def test_a_config_that_disagrees_with_the_tensors_names_the_tensor(self):
        def call_layer_4_mamba(_, config):
            config["layer_types"][4] = "mamba"
        self.expect_error("granitemoehybrid", call_layer_4_mamba,
                          "model.layers.4.self_attn.k_proj.weight: layer 4 is mamba (layer_types")

        def drop_layer_6(tensors, _):
            for role in "qkvo":
                del tensors[f"model.layers.6.self_attn.{role}_proj.weight"]
        self.expect_error("jamba", drop_layer_6, "model.layers.6.self_attn.k_proj.weight: no such "
                          "tensor", "says layer 6 is attention")

        def unknown_kind(_, config):
            config["layer_types"][0] = "retention"
        self.expect_error("granitemoehybrid", unknown_kind, "layer 0 is \"retention\"")

        def no_rule(_, config):
            del config["full_attention_interval"]
        self.expect_error("qwen3_next", no_rule, "full_attention_interval")

    def test_bamba_names_its_attention_layers(self):
        """Bamba's attn_layer_indices: read as a hybrid, its Mamba layers not as llama's."""
        with tempfile.TemporaryDirectory() as tmp:
            out, _, _, _, attention = write(tmp, "bamba", seed=8)
            self.assertEqual(attention, [1, 5])
            assert_layers_select(self, out, "5", [5], "1,5")

        def out_of_range(_, config):
            config["attn_layer_indices"] = [1, 8]
        self.expect_error("bamba", out_of_range, "config.json", "attn_layer_indices",
                          "8 is not a layer number of this model (0-7")

        def negative(_, config):  # below the range as well as above it
            config["attn_layer_indices"] = [-1, 5]
        self.expect_error("bamba", negative, "config.json", "attn_layer_indices",
                          "-1 is not a layer number of this model (0-7")

    def test_a_huge_layer_count_is_refused_before_any_allocation(self):
        """2^31 − 1 layers in a rule's config (Jamba's period, Qwen3-Next's interval, Bamba's
        indices): one line naming config.json, exit 2, at once, under a 2 GB address-space limit."""
        limited = {}
        if not harness.built_with_asan(harness.KVRANK):
            import resource
            limit = 2 << 30
            limited["preexec_fn"] = lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        for family in ("jamba", "qwen3_next", "bamba"):
            with self.subTest(family=family), tempfile.TemporaryDirectory() as tmp:
                out, _, tensors, config, _ = write(tmp, family, seed=9)
                config["num_hidden_layers"] = 2**31 - 1
                writer.write_checkpoint(out, tensors, config, "F32")
                result = harness.run("analyze", out, "--format", "json", timeout=20, **limited)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertEqual(result.stdout, "")
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                for needle in ("config.json", "num_hidden_layers", "2147483647 layers is more than "
                               "kvrank reads (at most 100000)"):
                    self.assertIn(needle, result.stderr)

    def test_mamba_tensors_are_never_read(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, _, tensors, _, _ = write(tmp, "jamba", seed=6)
            self.assertTrue(np.isnan(tensors["model.layers.0.mamba.in_proj.weight"]).all())
            result, _ = analyze(out, "--repr", "qk,ov,k,v")
            self.assertEqual(result.returncode, 0, result.stderr)

    def test_inspect_names_the_attention_layers(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, _, _, _, attention = write(tmp, "jamba", seed=7)
            self.assertEqual(attention, [2, 6])
            text = harness.run("inspect", out)
            self.assertEqual(text.returncode, 0, text.stderr)
            self.assertIn("  family llama (model type jamba), variant gqa\n"
                          "  heads 4, kv_heads 2, head_dim 6, d_model 32, layers 8\n"
                          "  attention in layers 2, 6 (2 of 8)\n", text.stdout)
            checkpoint = json.loads(harness.run("inspect", out, "--format", "json").stdout)
            entry = checkpoint["checkpoints"][0]
            self.assertEqual(entry["attention_layers"], [2, 6])
            self.assertEqual([s["attention_layers"] for s in entry["series"]], [[2, 6]])


def write_zamba2(tmp, seed, dtype="F32", **options):
    out, ref = os.path.join(tmp, "zamba2"), os.path.join(tmp, "zamba2.ref")
    tensors, config, hybrid = writer.write_zamba2(out, ref, dtype=dtype, seed=seed, **options)
    return out, ref, tensors, config, hybrid


def by_layer(model):
    return {layer["layer"]: layer for layer in model["layers"]}


class Zamba2(unittest.TestCase):
    """Shared attention blocks (two, used in turn) with each hybrid layer's own adapters."""
    assert_layers = HybridFamilies.assert_layers

    def test_hybrid_layers_under_their_own_numbers_against_both_references(self):
        for seed, dtype in enumerate(("F32", "BF16")):
            with self.subTest(dtype=dtype), tempfile.TemporaryDirectory() as tmp:
                out, ref, tensors, _, hybrid = write_zamba2(tmp, seed, dtype)
                self.assertEqual(hybrid, [2, 4, 6, 7])
                self.assertTrue(np.isnan(tensors["model.layers.0.mamba.in_proj.weight"]).all())
                result, models = analyze(out, "--repr", ",".join(REPRS))
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual([model["repr"] for model in models], REPRS)
                harness.assert_models_match_references(
                    self, models, ref, lambda r: reference.cmd_zamba2(out, r), f"zamba2 {dtype}",
                    family="zamba2", model_type="zamba2", heads=4, kv_heads=4, head_dim=6,
                    d_model=24, num_layers=8)

    def test_tied_copies_under_later_layers_read_alike(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, _, tensors, _, _ = write_zamba2(tmp, 7, copies=True)
            self.assertIn("model.layers.7.shared_transformer.self_attn.q_proj.weight", tensors)
            _, with_copies = analyze(out, "--repr", "qk,ov")
            out, _, _, _, _ = write_zamba2(tmp, 7)
            _, stored_once = analyze(out, "--repr", "qk,ov")
            self.assertEqual([m["layers"] for m in with_copies], [m["layers"] for m in stored_once])

    def test_layers_selects_by_the_models_own_numbers(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, _, _, _, _ = write_zamba2(tmp, 3)
            assert_layers_select(self, out, "6-7", [6, 7], "2,4,6-7")

    def test_adapters_change_the_numbers(self):
        """Layers 2 and 6 share block 0: their numbers differ only through their adapters."""
        with tempfile.TemporaryDirectory() as tmp:
            out, _, _, _, _ = write_zamba2(tmp, 4)
            _, models = analyze(out, "--repr", ",".join(REPRS))
            for model in models:
                layers = by_layer(model)
                ignored = {w["layer"]: w for w in reference.cmd_zamba2(out, model["repr"],
                                                                       adapters=False)}
                self.assertEqual(ignored[2]["erank"], ignored[6]["erank"])
                for layer in (2, 4, 6, 7):
                    self.assertFalse(harness.close(layers[layer]["erank"], ignored[layer]["erank"]),
                                     f"{model['repr']} layer {layer}: the adapters changed nothing")
                self.assertFalse(harness.close(layers[2]["erank"], layers[6]["erank"]))

            out, _, tensors, _, _ = write_zamba2(tmp, 4, adapters=False)
            self.assertFalse([name for name in tensors if ".self_attn.linear_" in name])
            _, models = analyze(out, "--repr", ",".join(REPRS))
            for model in models:  # without adapters a block's layers are the same heads
                layers = by_layer(model)
                self.assertEqual(layers[2], dict(layers[6], layer=2))
                self.assertEqual(layers[4], dict(layers[7], layer=4))
                self.assert_layers(model["layers"], reference.cmd_zamba2(out, model["repr"]),
                                   "zamba2 without adapters " + model["repr"])

    def expect_error(self, edit, *needles):
        with tempfile.TemporaryDirectory() as tmp:
            out, _, tensors, config, _ = write_zamba2(tmp, 5)
            assert_edit_refused(self, out, tensors, config, edit, needles)

    def test_a_missing_tensor_is_named(self):
        block = "model.layers.{}.shared_transformer.self_attn."
        adapter = block.format(4) + "linear_k_adapter_list.3.1.weight"  # layer 7's, in block 1
        self.expect_error(lambda tensors, _: tensors.pop(adapter), adapter + ": no such tensor",
                          "layer 7 uses block 1 of 2, with layers 4,7")
        shared = block.format(2) + "v_proj.weight"
        self.expect_error(lambda tensors, _: tensors.pop(shared), shared + ": no such tensor",
                          "layer 2 uses block 0 of 2, with layers 2,6")

        def block_in_a_mamba_layer(tensors, _):
            tensors[block.format(3) + "q_proj.weight"] = tensors[block.format(2) + "q_proj.weight"]
        self.expect_error(block_in_a_mamba_layer, block.format(3) + "q_proj.weight: layer 3 is no "
                          "hybrid layer (layers_block_type")

        def wrong_rank(_, config):
            config["adapter_rank"] = 4
        self.expect_error(wrong_rank, "linear_", "expected shape", "adapter_rank 4")


if __name__ == "__main__":
    harness.main_unittest()
