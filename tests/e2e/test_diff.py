#!/usr/bin/env python3
"""End-to-end: `kvrank diff A B` (docs/diff.md) against the naive numpy reference.

scripts/diff_reference.py forms every head's d×d form in both models and takes their cosine; kvrank
never forms one (cross-Grams of the projections). Checked on the two steps of one training run in
data/tiny-steps (qk and ov), on synthetic MLA/LRKV checkpoints of two seeds (the latent bases), and
for the properties: a model against itself gives exactly 1 for every head, a gauge transform of B
leaves every similarity at 1, a permutation of B's heads leaves the layer metrics but not the head
similarities. Also the refusals (other geometry, bad options: one line, exit 2, no file), result
files (per-layer changes only), the CSV, the figure and the JSON schema; and `analyze --pairs K`
(redundant heads, named) against S formed from the reference's explicit forms.

  python3 tests/e2e/test_diff.py build/kvrank
"""
import json
import os
import shutil

import numpy as np

import harness
import reference
from harness import ROOT, TINY, close
from write_family_checkpoints import write_safetensors

STEPS = os.path.join(ROOT, "data", "tiny-steps", "mha")
BASE, LATER = os.path.join(STEPS, "checkpoint-0"), os.path.join(STEPS, "checkpoint-60")


def diff_json(*args):
    proc = harness.run("diff", *args, "--format", "json")
    if proc.returncode != 0:
        raise AssertionError(f"kvrank diff {args} exited {proc.returncode}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def reference_similarity(*args):
    proc = harness.run_script("diff_reference.py", *args)
    return json.loads(proc.stdout)["layers"]


def similarities(document, repr_name):
    series = next(s for s in document["series"] if s["repr"] == repr_name)
    return [layer["head_similarity"] for layer in series["layers"]]


def transformed_copy(source, target, change):
    """A F32 copy of the llama checkpoint `source` with change(tensors, config) applied."""
    config, tensors = reference.load_llama(source)
    change(tensors, config)
    os.makedirs(target)
    shutil.copy(os.path.join(source, "config.json"), target)
    write_safetensors(os.path.join(target, "model.safetensors"), tensors, "F32")
    return target


def attention(tensors, layer, role):
    return f"model.layers.{layer}.self_attn.{role}_proj.weight"


class DiffTest(harness.TestCase):
    def assert_matches_reference(self, got, want, where):
        self.assertEqual(len(got), len(want), where)
        for layer, (g, w) in enumerate(zip(got, want)):
            for head, (x, y) in enumerate(zip(g, w["head_similarity"], strict=True)):
                self.assertTrue(close(x, y), f"{where} layer {layer} head {head}: {x} vs {y}")

    def test_two_steps_of_a_run_match_the_reference(self):
        document = diff_json(BASE, LATER)
        self.assertEqual(document["kind"], "diff")
        self.assertTrue(document["heads_compared"])
        for repr_name in ("qk", "ov"):
            want = reference_similarity("llama", BASE, LATER, "--repr", repr_name)
            self.assert_matches_reference(similarities(document, repr_name), want, repr_name)

    def test_layer_metrics_are_those_of_analyze(self):
        document = diff_json(BASE, LATER, "--repr", "qk")
        a = harness.analyze_json(BASE)["models"][0]["layers"]
        b = harness.analyze_json(LATER)["models"][0]["layers"]
        for layer, x, y in zip(document["series"][0]["layers"], a, b, strict=True):
            for key in ("erank", "erank_centered", "mean_similarity"):
                self.assertEqual(layer["a"][key], x[key])
                self.assertEqual(layer["b"][key], y[key])
                self.assertTrue(close(layer["change"][key], y[key] - x[key]))

    def test_the_heads_that_moved_most_come_first(self):
        document = diff_json(BASE, LATER, "--top", "5")
        moved = document["moved_heads"]
        self.assertEqual(len(moved), 5)
        values = [head["similarity"] for head in moved]
        self.assertEqual(values, sorted(values))
        everything = [v for s in document["series"] for layer in s["layers"]
                      for v in layer["head_similarity"]]
        self.assertEqual(values[0], min(everything))
        table = harness.run("diff", BASE, LATER).stdout
        self.assertIn("heads that moved most", table)

    def test_a_model_against_itself_is_exactly_one(self):
        for name in ("mha", "gqa", "mla", "lrkv-r2"):
            model = os.path.join(TINY, name)
            document = diff_json(model, model)
            for series in document["series"]:
                for layer in series["layers"]:
                    self.assertEqual(set(layer["head_similarity"]), {1.0}, name)
                    self.assertEqual(set(layer["change"].values()), {0}, name)

    def test_a_gauge_transform_of_b_changes_no_head(self):
        rng = np.random.default_rng(4)

        def gauge(tensors, config):
            d_h, heads = config["head_dim"], config["num_attention_heads"]
            for layer in range(config["num_hidden_layers"]):
                q, k = attention(tensors, layer, "q"), attention(tensors, layer, "k")
                v, o = attention(tensors, layer, "v"), attention(tensors, layer, "o")
                for h in range(heads):
                    rows = slice(h * d_h, (h + 1) * d_h)
                    m = np.eye(d_h) + 0.3 * rng.standard_normal((d_h, d_h))
                    n = np.eye(d_h) + 0.3 * rng.standard_normal((d_h, d_h))
                    tensors[q][rows] = m.T @ tensors[q][rows]  # W_Q^h M
                    tensors[k][rows] = np.linalg.inv(m) @ tensors[k][rows]  # W_K^h M⁻ᵀ
                    tensors[v][rows] = n.T @ tensors[v][rows]  # W_V^h N
                    tensors[o][:, rows] = tensors[o][:, rows] @ np.linalg.inv(n).T  # W_O^h N⁻ᵀ

        gauged = transformed_copy(os.path.join(TINY, "mha"), self.path("gauged"), gauge)
        document = diff_json(os.path.join(TINY, "mha"), gauged)
        for repr_name in ("qk", "ov"):
            for layer in similarities(document, repr_name):
                for value in layer:
                    self.assertGreater(value, 1 - 1e-5, repr_name)
        # The raw key rows did change: a comparison of W_K would have called every head moved.

    def test_a_permutation_of_the_heads_is_visible(self):
        permutation = [1, 0, 3, 2, 5, 4, 7, 6]

        def permute(tensors, config):
            d_h = config["head_dim"]
            rows = np.concatenate([np.arange(p * d_h, (p + 1) * d_h) for p in permutation])
            for layer in range(config["num_hidden_layers"]):
                for role in "qkv":
                    name = attention(tensors, layer, role)
                    tensors[name] = tensors[name][rows]
                name = attention(tensors, layer, "o")
                tensors[name] = tensors[name][:, rows]

        model = os.path.join(TINY, "mha")
        permuted = transformed_copy(model, self.path("permuted"), permute)
        document = diff_json(model, permuted, "--repr", "qk")
        want = reference_similarity("llama", model, permuted, "--repr", "qk")
        self.assert_matches_reference(similarities(document, "qk"), want, "permuted")
        for layer in document["series"][0]["layers"]:
            self.assertLess(abs(layer["change"]["erank"]), 1e-4)  # the layer cannot tell
            self.assertLess(layer["min_head_similarity"], 0.9)  # the heads can

    def test_latent_layouts_match_the_reference(self):
        writer = os.path.join(harness.WRITERS, "write_latent_checkpoints.py")
        for family in ("mla", "lrkv"):
            sides = []
            for seed in (0, 1):
                out, ref = self.path(f"{family}{seed}"), self.path(f"{family}{seed}_ref")
                harness.run_script(writer, family, out, ref, "--seed", seed, folder="")
                sides.append((out, ref))
            for repr_name in ("qk", "ov", "k", "v"):
                document = diff_json(sides[0][0], sides[1][0], "--repr", repr_name)
                want = reference_similarity("heads", os.path.join(sides[0][1], repr_name + ".npz"),
                                            os.path.join(sides[1][1], repr_name + ".npz"))
                self.assert_matches_reference(similarities(document, repr_name), want,
                                              f"{family} {repr_name}")

    def test_encoder_decoder_series_are_compared_one_by_one(self):
        for seed, name in ((0, "a"), (1, "b")):
            harness.run_writer("write_encoder_checkpoints.py", "--seed", seed, "t5", self.path(name))
        document = diff_json(self.path("a"), self.path("b"), "--repr", "qk", "--top", "4")
        self.assertEqual([(s["attention"]["stack"], s["attention"]["kind"])
                          for s in document["series"]],
                         [("encoder", "self"), ("decoder", "self"), ("decoder", "cross")])
        self.assertEqual(len(document["moved_heads"]), 4)
        self.assertTrue(all("attention" in head for head in document["moved_heads"]))
        cross = diff_json(self.path("a"), self.path("a"), "--attention", "cross")
        self.assertEqual({v for s in cross["series"] for layer in s["layers"]
                          for v in layer["head_similarity"]}, {1.0})
        self.assertIn("qk [decoder cross]", harness.run("diff", self.path("a"), self.path("b")).stdout)

    def test_other_geometry_is_refused_in_one_line(self):
        output = self.path("out.json")
        proc = harness.run("diff", os.path.join(TINY, "mha"), os.path.join(TINY, "gqa"),
                           "-o", output)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr.strip().splitlines(), [
            "kvrank: error: the models differ in geometry: kv_heads 8 vs 2 (diff compares "
            "models of one shape)"])
        self.assertFalse(os.path.exists(output))

    def test_bad_options_are_refused(self):
        model = os.path.join(TINY, "mha")
        for args, message in ((["--top", "0x10"], "--top"), (["--top", "100001"], "--top"),
                              (["--figure", self.path("f.gif")], "f.gif"),
                              (["--repr", "qq"], "qq"),
                              (["--figure", self.path("f.svg"), "--colour-map", "jet"],
                               '--colour-map: expected viridis, rdbu or greys, found "jet"'),
                              (["--colour-map", "greys"], "--colour-map: colours the heatmap of "
                               "--figure: give --figure")):
            proc = harness.run("diff", model, model, *args)
            self.assertEqual(proc.returncode, 2, args)
            self.assertEqual(proc.stdout, "", args)
            self.assertIn(message, proc.stderr, args)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertFalse(os.path.exists(self.path("f.svg")))

    def test_result_files_give_layer_changes_only(self):
        a, b = self.path("a.json"), self.path("b.json")
        for model, out in ((BASE, a), (LATER, b)):
            self.assertEqual(harness.run("analyze", model, "-o", out).returncode, 0)
        document = diff_json(a, b)
        self.assertFalse(document["heads_compared"])
        self.assertEqual([s["repr"] for s in document["series"]], ["qk"])
        self.assertNotIn("head_similarity", document["series"][0]["layers"][0])
        checkpoints = diff_json(BASE, LATER, "--repr", "qk")
        for x, y in zip(document["series"][0]["layers"], checkpoints["series"][0]["layers"]):
            self.assertEqual(x["change"], y["change"])
        proc = harness.run("diff", a, b)
        self.assertIn("per-layer metric changes only", proc.stdout)
        mixed = diff_json(a, LATER)  # a result file and a checkpoint: the file's representations
        self.assertFalse(mixed["heads_compared"])
        proc = harness.run("diff", a, b, "--figure", self.path("f.svg"))
        self.assertEqual(proc.returncode, 2)
        self.assertFalse(os.path.exists(self.path("f.svg")))

    def test_labels_and_the_format_of_the_output_file(self):
        output = self.path("diff.csv")
        proc = harness.run("diff", BASE, LATER, "--label", "base", "--label", "later", "-o", output)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(output) as f:
            self.assertTrue(f.read().startswith("repr,attention,layer,"))
        document = diff_json(BASE, LATER, "--label", "base", "--label", "later")
        self.assertEqual([document["series"][0][side]["label"] for side in "ab"], ["base", "later"])
        self.assertEqual([document["series"][0][side]["step"] for side in "ab"], [0, 60])
        proc = harness.run("diff", BASE, LATER, "--format", "csv", "-o", self.path("x.json"))
        self.assertEqual(proc.returncode, 2)
        self.assertIn("contradicts", proc.stderr)

    def test_csv_and_figure(self):
        figure = self.path("heads.svg")
        proc = harness.run("diff", BASE, LATER, "--format", "csv", "--figure", figure)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = proc.stdout.splitlines()
        header = lines[0].split(",")
        self.assertEqual(header[:4], ["repr", "attention", "layer", "erank_a"])
        self.assertEqual(header[-1], "head_similarity_7")
        self.assertEqual(len(lines), 1 + 2 * 4)  # qk and ov, 4 layers
        with open(figure) as f:
            svg = f.read()
        self.assertEqual(svg.count('class="cell"'), 2 * 4 * 8)
        self.assertIn('data-colour-map="rdbu"', svg)  # the similarity heatmaps' default
        # --colour-map as plot's: viridis over [0, 1], its darkest colour at the bottom
        proc = harness.run("diff", BASE, LATER, "-q", "--figure", figure, "--colour-map", "viridis")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(figure) as f:
            svg = f.read()
        self.assertIn('data-colour-map="viridis"', svg)
        self.assertEqual(svg.count('class="cell"'), 2 * 4 * 8)


def explicit_similarity(forms):
    """S of explicit forms (no zero heads in the tiny models)."""
    flat = np.array([a.ravel() / np.linalg.norm(a) for a in forms])
    return flat @ flat.T


class PairsTest(harness.TestCase):
    """`analyze --pairs K`: the most similar head pairs and nearest heads, against S formed from
    the explicit d×d forms of the reference."""

    def test_pairs_and_nearest_heads_match_the_reference(self):
        model = os.path.join(TINY, "gqa")
        document = harness.analyze_json(model, "--pairs", "3")
        for layer, (number, forms) in zip(document["models"][0]["layers"],
                                          reference.llama_forms(model, "qk"), strict=True):
            s = explicit_similarity(forms)
            heads = len(forms)
            pairs = sorted(((s[i, j], i, j) for i in range(heads) for j in range(i + 1, heads)),
                           key=lambda p: -p[0])[:3]
            got = layer["similar_pairs"]
            self.assertEqual([p["heads"] for p in got], [[i, j] for _, i, j in pairs], number)
            for g, (value, _, _) in zip(got, pairs):
                self.assertTrue(close(g["similarity"], value))
            np.fill_diagonal(s, -np.inf)
            self.assertEqual(layer["nearest_head"], [int(np.argmax(row)) for row in s])
            for h, value in enumerate(layer["nearest_head_similarity"]):
                self.assertTrue(close(value, s[h].max()))

    def test_pairs_in_csv_and_table_and_absent_without_the_option(self):
        model = os.path.join(TINY, "mha")
        csv = harness.run("analyze", model, "--pairs", "2", "--format", "csv").stdout.splitlines()
        header = csv[0].split(",")
        self.assertEqual(header[-2:], ["similar_pairs", "nearest_heads"])
        self.assertEqual(len(csv[1].split(",")[-2].split(" ")), 2)
        self.assertEqual(len(csv[1].split(",")[-1].split(" ")), 8)
        table = harness.run("analyze", model, "--pairs", "2").stdout
        self.assertIn("most similar pairs", table)
        plain = harness.analyze_json(model)["models"][0]["layers"][0]
        self.assertNotIn("similar_pairs", plain)
        self.assertNotIn("nearest_head", plain)
        self.assertNotIn("similar_pairs", harness.run("analyze", model, "--format", "csv").stdout)

    def test_merge_keeps_the_pairs_and_a_damaged_file_is_refused(self):
        model = os.path.join(TINY, "mha")
        whole = harness.analyze_json(model, "--pairs", "3")
        parts = [self.path("p0.json"), self.path("p1.json")]
        for part, layers in zip(parts, ("0-1", "2-3")):
            harness.run("analyze", model, "--pairs", "3", "--layers", layers, "-o", part)
        merged = json.loads(harness.run("merge", *parts).stdout)
        keys = ("similar_pairs", "nearest_head", "nearest_head_similarity")
        for got, want in zip(merged["models"][0]["layers"], whole["models"][0]["layers"],
                             strict=True):
            self.assertEqual([got[k] for k in keys], [want[k] for k in keys])
        with open(parts[0]) as f:
            document = json.load(f)
        document["models"][0]["layers"][1]["nearest_head"][2] = -1
        with open(parts[0], "w") as f:
            json.dump(document, f)
        proc = harness.run("merge", *parts)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("layers[1].nearest_head[2]: expected a head", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1)

    def test_bad_counts_are_refused(self):
        for value in ("0", "0x3", "1e1", "-1", "1000001"):
            proc = harness.run("analyze", os.path.join(TINY, "mha"), "--pairs", value)
            self.assertEqual(proc.returncode, 2, value)
            self.assertIn("--pairs", proc.stderr)
            self.assertEqual(proc.stdout, "")


class SchemaTest(harness.TestCase):
    """diff's JSON against docs/schema/diff.schema.json, and `analyze --pairs` against the result
    schema (skipped where python3-jsonschema is missing, as test_result_schema.py)."""

    def validate(self, schema_name, document):
        try:
            import jsonschema
        except ImportError:
            self.skipTest("python3-jsonschema is not installed")
        with open(os.path.join(ROOT, "docs", "schema", schema_name)) as handle:
            validator = jsonschema.Draft202012Validator(json.load(handle))
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
        self.assertEqual(errors, [])

    def test_diff_json_validates(self):
        self.validate("diff.schema.json", diff_json(BASE, LATER))
        self.validate("diff.schema.json", diff_json(os.path.join(TINY, "mla"),
                                                    os.path.join(TINY, "mla"), "--top", "0"))
        a = self.path("a.json")
        harness.run("analyze", BASE, "-o", a)
        self.validate("diff.schema.json", diff_json(a, a))

    def test_analyze_pairs_validates(self):
        self.validate("kvrank-result.schema.json",
                      harness.analyze_json(os.path.join(TINY, "gqa"), "--pairs", "4"))


if __name__ == "__main__":
    harness.main_unittest()
