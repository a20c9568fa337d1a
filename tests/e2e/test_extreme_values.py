"""End-to-end: values at the edges of what kvrank reads give the right numbers or one bounded error.

Usage: python3 tests/e2e/test_extreme_values.py path/to/kvrank   (run from the repository root)

- RMSNorm gains folded into projection rows (QK norm of Qwen3, MLA's latent norms) near float32's
  maximum, or large weights times a large gain: the same numbers as unit-scale gains (×2^±100
  exactly, other factors against the float64 reference), never every head "all zero" with exit 0.
- Counts a result file claims (num_layers, heads with empty similarity rows) are checked before
  anything is allocated from them, in merge, check and plot.
- Empty option values (an unset scheduler variable) are refused, not read as "no option".
- A long wrong value is quoted as a short excerpt, never whole.

Checkpoints are written with numpy (tests/writers/write_family_checkpoints.py,
tests/writers/write_latent_checkpoints.py); nothing is written by kvrank's own synth.
"""
import json
import os
import shutil

import numpy as np

import harness  # puts scripts/ on sys.path
import reference
import write_family_checkpoints as writer

MB = 1 << 20


def f32_entries(tensors):
    return {name: ("F32", list(values.shape), np.ascontiguousarray(values, "<f4").tobytes())
            for name, values in tensors.items()}


def rewrite(source, target, factors):
    """Copies checkpoint folder `source` to `target` as float32, each tensor whose name ends with
    a key of `factors` multiplied by its value (in float64, then rounded once)."""
    os.makedirs(target)
    shutil.copy(os.path.join(source, "config.json"), target)
    tensors = reference.read_safetensors(os.path.join(source, "model.safetensors"))
    for name in tensors:
        for suffix, factor in factors.items():
            if name.endswith(suffix):
                tensors[name] = tensors[name] * factor
    with np.errstate(over="raise"):
        writer.write_safetensors_entries(os.path.join(target, "model.safetensors"),
                                         f32_entries(tensors))
    return target


class Case(harness.TestCase):
    def analyze(self, model, repr_name):
        return harness.analyze_json(model, "--repr", repr_name, "-q")["models"][0]["layers"]

    def assert_same_metrics(self, got, want, where, rel=1e-9, norm_ratio=None):
        """Every scale-invariant number equal; head_norm scaled by `norm_ratio` when given."""
        self.assertEqual(len(got), len(want), where)
        for g, w in zip(got, want):
            at = f"{where} layer {w['layer']}"
            self.assertEqual(g["zero_heads"], w["zero_heads"], at)
            self.assertEqual(g["pcs_90"], w["pcs_90"], at)
            for key in ("erank", "erank_centered", "mean_similarity"):
                self.assertTrue(harness.close(g[key], w[key], rel=rel),
                                f"{at}: {key} {g[key]!r}, expected {w[key]!r}")
            for a, b in zip(g["head_erank"], w["head_erank"]):
                self.assertTrue(harness.close(a, b, rel=rel), f"{at}: head_erank {a} vs {b}")
            if norm_ratio is not None:
                for a, b in zip(g["head_norm"], w["head_norm"]):
                    self.assertTrue(harness.close(a, b * norm_ratio, rel=1e-6),
                                    f"{at}: head_norm {a} vs {b} × {norm_ratio}")


class FoldedGains(Case):
    def write_qwen3(self):
        out = self.path("qwen3")
        writer.write_family("qwen3", out, self.path("qwen3.ref"), dtype="F32", seed=5, layers=2,
                            heads=4, kv_heads=2, head_dim=12, d_model=32)
        return rewrite(out, self.path("unit"), {})

    def test_qk_norm_gains_times_two_to_the_100_give_the_same_numbers(self):
        unit = self.write_qwen3()
        up, down = 2.0 ** 100, 2.0 ** -100
        cases = {  # name: (factors, head_norm ratio of qk, of k)
            "up": ({"q_norm.weight": up, "k_norm.weight": up}, up * up, up * up),
            "down": ({"q_norm.weight": down, "k_norm.weight": down}, down * down, down * down),
            "apart": ({"q_norm.weight": up, "k_norm.weight": down}, 1.0, down * down),
            # weights ×2^±30 times gains ×2^±100: the float32 product leaves float's range
            "beyond": ({"q_proj.weight": 2.0 ** 30, "q_norm.weight": up,
                        "k_proj.weight": 2.0 ** -30, "k_norm.weight": down}, 1.0, 2.0 ** -260),
        }
        for name, (factors, qk_ratio, k_ratio) in cases.items():
            scaled = rewrite(unit, self.path(name), factors)
            for repr_name, ratio in (("qk", qk_ratio), ("k", k_ratio)):
                with self.subTest(gains=name, repr=repr_name):
                    self.assert_same_metrics(self.analyze(scaled, repr_name),
                                             self.analyze(unit, repr_name),
                                             f"{name} {repr_name}", norm_ratio=ratio)

    def test_qk_norm_gain_near_float_max_matches_the_reference(self):
        unit = self.write_qwen3()
        k_norm = reference.read_safetensors(os.path.join(unit, "model.safetensors"))[
            "model.layers.0.self_attn.k_norm.weight"]
        cases = {
            # a gain near float32's maximum (times weights above 1)
            "max_gain": {"k_norm.weight": 3e38 / np.abs(k_norm).max(), "k_proj.weight": 16.0},
            # weights and gain each far inside float32's range, their product outside it
            "product": {"k_proj.weight": 1e20, "k_norm.weight": 1e20, "q_norm.weight": 1e-30},
        }
        for name, factors in cases.items():
            model = rewrite(unit, self.path(name), factors)
            for repr_name in ("qk", "k"):
                with self.subTest(case=name, repr=repr_name):
                    got = self.analyze(model, repr_name)
                    want = reference.cmd_llama(model, repr_name)
                    self.assert_same_metrics(got, want, f"{name} {repr_name}", rel=1e-5,
                                             norm_ratio=1.0)

    def test_mla_latent_norm_gains_times_two_to_the_100_give_the_same_numbers(self):
        out = self.path("mla")
        harness.run_writer("write_latent_checkpoints.py", "mla", out, self.path("mla.ref"),
                           "--q-lora-rank", "8", "--layers", "2")
        unit = rewrite(out, self.path("unit"), {})
        for scale in (2.0 ** 100, 2.0 ** -100):
            # q_a_layernorm scales the whole query basis: every qk form by the same factor. With
            # q_a_proj ×2^±30 the float32 product would leave float's range.
            weights = 2.0 ** 30 if scale > 1 else 2.0 ** -30
            scaled = rewrite(unit, self.path(f"q{scale}"),
                             {"q_a_layernorm.weight": scale, "q_a_proj.weight": weights})
            with self.subTest(gain="q_a_layernorm", scale=scale):
                self.assert_same_metrics(self.analyze(scaled, "qk"), self.analyze(unit, "qk"),
                                         f"q_a ×{scale}", norm_ratio=scale * weights)
            # kv_a_layernorm scales the latent rows values live in (the rope rows carry none).
            scaled = rewrite(unit, self.path(f"kv{scale}"), {"kv_a_layernorm.weight": scale})
            for repr_name, ratio in (("v", scale * scale), ("ov", scale)):
                with self.subTest(gain="kv_a_layernorm", scale=scale, repr=repr_name):
                    self.assert_same_metrics(self.analyze(scaled, repr_name),
                                             self.analyze(unit, repr_name),
                                             f"kv_a ×{scale} {repr_name}", norm_ratio=ratio)

    def test_mla_latent_norm_gain_near_float_max_is_not_all_zero(self):
        out = self.path("mla")
        harness.run_writer("write_latent_checkpoints.py", "mla", out, self.path("mla.ref"),
                           "--layers", "2")
        unit = rewrite(out, self.path("unit"), {})
        gain = reference.read_safetensors(os.path.join(unit, "model.safetensors"))[
            "model.layers.0.self_attn.kv_a_layernorm.weight"]
        factor = 3e38 / np.abs(gain).max()
        model = rewrite(unit, self.path("max"),
                        {"kv_a_layernorm.weight": factor, "kv_a_proj_with_mqa.weight": 16.0})
        self.assert_same_metrics(self.analyze(model, "v"), self.analyze(unit, "v"), "kv_a max",
                                 rel=1e-5, norm_ratio=(16 * factor) ** 2)


def analyze_part(model, *args):
    run = harness.run("analyze", model, "--format", "json", "-q", *args)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


class ClaimedCounts(Case):
    def assert_refused(self, run, file, fragment):
        self.assertEqual(run.returncode, 2, run.stderr[:2000])
        self.assertEqual(run.stdout, "")
        lines = run.stderr.splitlines()
        self.assertEqual(len(lines), 1, run.stderr[:2000])
        self.assertTrue(lines[0].startswith("kvrank: error: " + file), lines[0][:500])
        self.assertIn(fragment, lines[0])
        self.assertLess(len(lines[0]), 1000)

    def write_json(self, name, document):
        path = self.path(name)
        with open(path, "w") as out:
            json.dump(document, out)
        return path

    def test_merge_refuses_a_huge_num_layers_before_listing_the_layers(self):
        document = analyze_part(os.path.join(harness.TINY, sorted(os.listdir(harness.TINY))[0]))
        document["models"][0]["num_layers"] = 2 ** 31 - 1
        part = self.write_json("part.json", document)
        self.assert_refused(harness.run("merge", part, timeout=20), part,
                            "num_layers 2147483647 is out of range (kvrank reads 0 to 100000")

    def test_empty_similarity_rows_are_refused_before_heads_squared_is_allocated(self):
        tiny = os.path.join(harness.TINY, sorted(os.listdir(harness.TINY))[0])
        document = analyze_part(tiny, "--similarity")
        layer = document["models"][0]["layers"][0]
        layer["kept_heads"] = 100_000  # schema_version 2: the kept heads
        layer["similarity"] = [[] for _ in range(100_000)]
        bad = self.write_json("bad.json", document)
        good = self.write_json("good.json", analyze_part(tiny, "--similarity"))
        for args in (("merge", bad), ("check", bad, "--baseline", good),
                     ("plot", bad, "-o", self.path("out.svg"))):
            with self.subTest(command=args[0]):
                self.assert_refused(harness.run(*args, timeout=20), bad,
                                    "similarity[0]: expected an array of 100000 numbers")


class EmptyAndLongValues(Case):
    def test_empty_layer_shard_and_other_empty_values_are_refused(self):
        tiny = os.path.join(harness.TINY, sorted(os.listdir(harness.TINY))[0])
        for option in ("--layer-shard", "--layers", "--repr", "--family", "--map", "--label",
                       "-o"):
            with self.subTest(option=option):
                run = harness.run("analyze", tiny, option, "", timeout=20)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertEqual(run.stdout, "")
                self.assertIn("empty value", run.stderr)
        run = harness.run("merge", "", timeout=20)
        self.assertEqual(run.returncode, 2, run.stderr)

    def test_long_values_are_quoted_as_excerpts(self):
        tiny = os.path.join(harness.TINY, sorted(os.listdir(harness.TINY))[0])
        long_value = "7" * 100_000  # one argument may hold at most 128 KiB
        for args in (("analyze", tiny, "--layer-shard", long_value),
                     ("analyze", tiny, "--layers", "x" + long_value),
                     ("analyze", tiny, "--format", long_value),
                     ("analyze", tiny, "--repr", "qk," + long_value),
                     ("analyze", tiny, "--attention", long_value)):
            with self.subTest(option=args[2]):
                run = harness.run(*args, timeout=20)
                self.assertEqual(run.returncode, 2, run.stderr[:500])
                self.assertLess(len(run.stderr), 1000)
                self.assertIn("...", run.stderr)

    def test_long_enumerated_values_are_quoted_as_excerpts(self):
        tiny = os.path.join(harness.TINY, sorted(os.listdir(harness.TINY))[0])
        result = self.path("tiny.json")
        made = harness.run("analyze", tiny, "-q", "-o", result, timeout=60)
        self.assertEqual(made.returncode, 0, made.stderr)
        long_value = "7" * 100_000
        found = f', found "{"7" * 60}... (100000 bytes)"\n'
        for option, args in (
                ("--family", ("analyze", tiny)),
                ("--rope", ("plan", tiny, "--kv-heads", "1")),
                ("--direction", ("check", result, "--baseline", result)),
                ("--over-steps", ("plot", result, "-o", self.path("steps.svg"))),
                ("--head-order", ("plot", result, "--heatmap", "0", "-o", self.path("steps.svg"))),
                ("--format", ("inspect", tiny)),
                ("--format", ("check", result, "--baseline", result)),
                ("--progress", ("analyze", tiny)),
                ("--npy-dtype", ("analyze", tiny))):
            with self.subTest(option=option, command=args[0]):
                run = harness.run(*args, option, long_value, timeout=20)
                self.assertEqual(run.returncode, 2, run.stderr[:500])
                self.assertTrue(run.stderr.startswith(f"kvrank: error: {option}: expected "),
                                run.stderr[:500])
                self.assertTrue(run.stderr.endswith(found), run.stderr[-500:])
                self.assertEqual(run.stderr.count("\n"), 1, run.stderr[:500])
                self.assertEqual(run.stdout, "")
        self.assertFalse(os.path.exists(self.path("steps.svg")))

    def test_merge_quotes_a_long_version_and_label_as_excerpts(self):
        tiny = os.path.join(harness.TINY, sorted(os.listdir(harness.TINY))[0])
        first = analyze_part(tiny)
        second = analyze_part(tiny)
        second["tool"]["version"] = "9" * MB
        paths = []
        for name, document in (("a.json", first), ("b.json", second)):
            path = self.path(name)
            with open(path, "w") as out:
                json.dump(document, out)
            paths.append(path)
        run = harness.run("merge", *paths, timeout=20)
        self.assertEqual(run.returncode, 2, run.stderr[:500])
        self.assertLess(len(run.stderr), 1000)
        self.assertIn("... (1048576 bytes)", run.stderr)


if __name__ == "__main__":
    harness.main_unittest()
