"""End-to-end tests of `kvrank plot`, `kvrank check` and `kvrank baseline`.

Usage: python3 tests/e2e/test_plot_check.py path/to/kvrank   (run from the repository root)
Result files are written here by hand in schema_version 1 (docs/result-format.md), so these tests do
not depend on `analyze`; figures are parsed with xml.etree.
"""
import json
import math
import os
import shutil
import tempfile
import unittest
import xml.etree.ElementTree as ET

import harness
from harness import run

# The metric names as --metric's message lists them (the library's table, in order).
METRICS = "erank, erank_pct, erank_centered, erank_centered_pct, mean_similarity or pcs_90"

NS = "{http://www.w3.org/2000/svg}"
SEED_MODELS = ["Standard MHA", "LRKV (r=16)", "LRKV (r=64)", "MQA", "MLA", "GQA"]


def layer_entry(index, heads, erank, similarity=None):
    """One layer as schema_version 1 writes it; the centred rank is a fixed function of erank."""
    centred = max(1.0, erank - 0.75)
    eigen = [erank / heads] * heads
    entry = {"layer": index, "heads": heads, "erank": erank, "erank_centered": centred,
             "erank_pct": 100.0 * erank / heads, "erank_centered_pct": 100.0 * centred / heads,
             "mean_similarity": 0.5 / (1 + erank), "pcs_90": max(1, int(erank)),
             "eigenvalues": eigen, "eigenvalues_centered": eigen,
             "head_erank": [3.0] * heads, "head_norm": [1.5] * heads, "zero_heads": []}
    if similarity is not None:
        entry["similarity"] = similarity
    return entry


def model_entry(label, variant, values, heads, with_similarity=False):
    layers = []
    for i, value in enumerate(values):
        similarity = None
        if with_similarity:
            similarity = [[1.0 if a == b else round(0.3 * math.cos(a + 2 * b + i), 6)
                           for b in range(heads)] for a in range(heads)]
            similarity = [[(similarity[a][b] + similarity[b][a]) / 2 for b in range(heads)]
                          for a in range(heads)]
        layers.append(layer_entry(i, heads, value, similarity))
    mean = sum(values) / len(values)
    return {"label": label, "path": "/ckpts/" + label, "family": "llama", "variant": variant,
            "heads": heads, "kv_heads": heads, "head_dim": 64, "d_model": 64 * heads,
            "num_layers": len(values), "lrkv_rank": 16 if variant == "lrkv" else None,
            "mla_kv_lora_rank": 512 if variant == "mla" else None, "repr": "qk",
            "layers": layers,
            "summary": {"erank_mean": mean, "erank_centered_mean": mean - 0.75,
                        "erank_pct_mean": 100 * mean / heads,
                        "erank_centered_pct_mean": 100 * (mean - 0.75) / heads}}


def seed_models(num_layers, heads):
    """Six curves shaped like the seed figure, plus the fully-redundant baseline."""
    models = []
    for k, label in enumerate(SEED_MODELS):
        values = [min(heads, 1.5 + (k + 1) * heads / 8 + 0.3 * math.sin(i + k))
                  for i in range(num_layers)]
        variant = {"MQA": "mqa", "MLA": "mla", "GQA": "gqa"}.get(label, "mha")
        if label.startswith("LRKV"):
            variant = "lrkv"
        models.append(model_entry(label, variant, values, heads))
    models.append(model_entry("Fully redundant", "baseline", [1.0] * num_layers, heads))
    return models


def document(models):
    return {"schema_version": 1, "tool": {"name": "kvrank", "version": "test"}, "models": models}


def svg_summary(path):
    root = ET.parse(path).getroot()
    assert root.tag == NS + "svg", root.tag

    def cls(element):
        return element.get("class", "")

    panels = []
    for panel in root.iter(NS + "g"):
        if cls(panel) != "panel":
            continue
        series = {}
        for group in panel.iter(NS + "g"):
            if cls(group) == "model":
                paths = [p for p in group.iter(NS + "path") if cls(p) == "series"]
                markers = [c for c in group.iter(NS + "path") if cls(c) == "marker"]
                series[group.get("data-label")] = (len(paths), len(markers))
        baselines = [p.get("data-label") for p in panel.iter(NS + "path") if cls(p) == "baseline"]
        titles = [t.text for t in panel.iter(NS + "text") if cls(t) == "panel-title"]
        panels.append({"title": titles[0] if titles else None, "series": series,
                       "baselines": baselines})
    legend = ["".join(t.text or "" for t in g.iter(NS + "text"))
              for g in root.iter(NS + "g") if cls(g) == "legend-entry"]
    cells = [r for r in root.iter(NS + "rect") if cls(r) == "cell"]
    texts = [t.text for t in root.iter(NS + "text")]
    return {"panels": panels, "legend": legend, "cells": cells, "texts": texts}


class PlotCheckTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, models):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", encoding="utf-8") as out:
            json.dump(document(models), out)
        return path

    def out(self, name):
        return os.path.join(self.tmp.name, name)

    def assert_usage_error(self, result):
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertEqual(result.stdout, "")
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("kvrank: error: "), lines[0])
        return lines[0]

    # ------------------------------------------------------------------ plot

    def test_plot_two_panels_like_the_seed(self):
        small = self.write("128M.json", seed_models(12, 6))
        large = self.write("2.5B.json", seed_models(36, 18))
        figure = self.out("figure.svg")
        result = run("plot", small, large, "-o", figure, "--title", "Effective rank <demo>")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, "")
        svg = svg_summary(figure)
        self.assertEqual([p["title"] for p in svg["panels"]], ["128M", "2.5B"])
        for panel, layers in zip(svg["panels"], (12, 36)):
            self.assertEqual(sorted(panel["series"]), sorted(SEED_MODELS))
            for label, (paths, markers) in panel["series"].items():
                self.assertEqual(paths, 1, label)
                self.assertEqual(markers, layers, label)
            self.assertEqual(panel["baselines"], ["Fully redundant"])
        self.assertEqual(svg["legend"], SEED_MODELS + ["Fully redundant"])
        self.assertIn("Effective rank <demo>", svg["texts"])
        self.assertIn("Effective rank", svg["texts"])
        self.assertIn("Layer", svg["texts"])
        self.assertEqual(os.listdir(self.tmp.name).count("figure.svg"), 1)

    def test_plot_escapes_labels_and_adds_the_baseline_for_erank_only(self):
        label = 'LRKV <r=16> & "co"'
        path = self.write("runs.json", [model_entry(label, "lrkv", [2.0, 3.0, 3.5, 3.2], 4)])
        for metric, baselines in (("erank", ["Fully redundant"]),
                                  ("erank_centered", ["Fully redundant"]),
                                  ("erank_pct", []), ("mean_similarity", []), ("pcs_90", [])):
            figure = self.out(metric + ".svg")
            result = run("plot", path, "-o", figure, "--metric", metric)
            self.assertEqual(result.returncode, 0, result.stderr)
            svg = svg_summary(figure)
            self.assertEqual(svg["panels"][0]["series"], {label: (1, 4)}, metric)
            self.assertEqual(svg["panels"][0]["baselines"], baselines, metric)
            self.assertEqual(svg["legend"][0], label)
        line = self.assert_usage_error(run("plot", path, "-o", self.out("x.svg"), "--metric",
                                           "rank"))
        self.assertEqual(line, f'kvrank: error: --metric: expected {METRICS}, found "rank"')
        self.assertFalse(os.path.exists(self.out("x.svg")))

    def test_plot_heatmap(self):
        heads = 6
        path = self.write("sim.json", [model_entry("tiny", "mha", [4.0, 5.0, 4.5], heads,
                                                   with_similarity=True)])
        figure = self.out("heat.svg")
        result = run("plot", path, "-o", figure, "--heatmap", "2")
        self.assertEqual(result.returncode, 0, result.stderr)
        svg = svg_summary(figure)
        self.assertEqual(len(svg["cells"]), heads * heads)
        with open(path, encoding="utf-8") as source:
            expected = json.load(source)["models"][0]["layers"][2]["similarity"]
        values = [float(cell.get("data-value")) for cell in svg["cells"]]
        flat = [v for row in expected for v in row]
        for got, want in zip(values, flat):
            self.assertAlmostEqual(got, want, places=5)
        for head in range(heads):
            self.assertIn(str(head), svg["texts"])
        # A layer that does not exist, and a file written without --similarity: usage errors.
        self.assert_usage_error(run("plot", path, "-o", self.out("h.svg"), "--heatmap", "9"))
        plain = self.write("plain.json", [model_entry("tiny", "mha", [4.0, 5.0], heads)])
        line = self.assert_usage_error(run("plot", plain, "-o", self.out("h.svg"), "--heatmap", "1"))
        self.assertIn("--similarity", line)
        self.assertFalse(os.path.exists(self.out("h.svg")))

    def test_plot_rejects_an_invalid_result_file(self):
        bad = document([model_entry("m", "mha", [2.0, 3.0], 4)])
        del bad["models"][0]["layers"][1]["erank"]
        path = self.out("bad.json")
        with open(path, "w", encoding="utf-8") as out:
            json.dump(bad, out)
        line = self.assert_usage_error(run("plot", path, "-o", self.out("b.svg")))
        self.assertIn('models[0].layers[1]: missing "erank"', line)
        self.assertIn("bad.json", line)

    @unittest.skipIf(shutil.which("rsvg-convert") is None, "rsvg-convert not installed")
    def test_plot_png(self):
        path = self.write("runs.json", seed_models(12, 6))
        figure = self.out("figure.png")
        result = run("plot", path, "-o", figure)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(figure, "rb") as png:
            self.assertEqual(png.read(8), b"\x89PNG\r\n\x1a\n")

    # ----------------------------------------------------------------- check

    def test_check_identical_passes(self):
        golden = self.write("golden.json", seed_models(12, 6))
        current = self.write("current.json", seed_models(12, 6))
        result = run("check", current, "--baseline", golden)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_check_reports_the_moved_layer(self):
        models = seed_models(12, 6)
        golden = self.write("golden.json", models)
        moved = json.loads(json.dumps(models))
        moved[5]["layers"][7]["erank"] += 0.2  # GQA, layer 7
        current = self.write("current.json", moved)
        result = run("check", current, "--baseline", golden)
        self.assertEqual(result.returncode, 1, result.stderr)
        rows = [line.split() for line in result.stdout.splitlines() if line.startswith("GQA")]
        self.assertEqual(len(rows), 1, result.stdout)
        self.assertEqual(rows[0][:4], ["GQA", "qk", "7", "erank"])
        self.assertAlmostEqual(float(rows[0][-1]), 0.2, places=5)
        # Within a looser tolerance (absolute or relative) the same files pass.
        self.assertEqual(run("check", current, "--baseline", golden, "--abs-tol", "0.25").returncode, 0)
        golden_value = models[5]["layers"][7]["erank"]
        rel = 0.25 / golden_value
        self.assertEqual(run("check", current, "--baseline", golden, "--rel-tol", str(rel)).returncode, 0)
        self.assertEqual(run("check", current, "--baseline", golden,
                             "--rel-tol", str(0.1 / golden_value)).returncode, 1)
        # Only the listed metrics are compared.
        self.assertEqual(run("check", current, "--baseline", golden,
                             "--metric", "erank_centered").returncode, 0)

    def test_check_metric_list(self):
        models = seed_models(5, 6)
        golden = self.write("golden.json", models)
        moved = json.loads(json.dumps(models))
        moved[0]["layers"][2]["mean_similarity"] += 0.5
        moved[1]["layers"][4]["pcs_90"] += 2
        current = self.write("current.json", moved)
        self.assertEqual(run("check", current, "--baseline", golden).returncode, 0)
        result = run("check", current, "--baseline", golden, "--metric", "mean_similarity,pcs_90")
        self.assertEqual(result.returncode, 1)
        self.assertIn("mean_similarity", result.stdout)
        self.assertIn("pcs_90", result.stdout)
        line = self.assert_usage_error(run("check", current, "--baseline", golden, "--metric",
                                           "erank,bogus"))
        self.assertEqual(line, f'kvrank: error: --metric: expected {METRICS}, found "bogus"')

    def test_check_files_that_do_not_correspond(self):
        models = seed_models(12, 6)
        golden = self.write("golden.json", models)
        missing = self.write("missing.json", [m for m in models if m["label"] != "MLA"])
        line = self.assert_usage_error(run("check", missing, "--baseline", golden))
        self.assertIn("MLA", line)
        self.assertIn("missing.json", line)
        self.assertIn("golden.json", line)
        shorter = self.write("shorter.json", seed_models(10, 6))
        line = self.assert_usage_error(run("check", shorter, "--baseline", golden))
        self.assertIn("shorter.json", line)
        self.assertIn("golden.json", line)
        wrong = document(models)
        wrong["schema_version"] = 3
        path = self.out("v3.json")
        with open(path, "w", encoding="utf-8") as out:
            json.dump(wrong, out)
        line = self.assert_usage_error(run("check", path, "--baseline", golden))
        self.assertIn("schema_version", line)

    # -------------------------------------------------------------- baseline

    def test_baseline_is_a_valid_result_file_and_plots_dashed(self):
        result = run("baseline", "--layers", "12", "--heads", "6", "--format", "json")
        self.assertEqual(result.returncode, 0, result.stderr)
        doc = json.loads(result.stdout)
        self.assertEqual(doc["schema_version"], 2)
        (model,) = doc["models"]
        self.assertEqual(model["variant"], "baseline")
        self.assertEqual(model["label"], "Fully redundant")
        self.assertEqual([layer["layer"] for layer in model["layers"]], list(range(12)))
        for layer in model["layers"]:
            self.assertEqual(layer["erank"], 1.0)
            self.assertAlmostEqual(layer["erank_pct"], 100.0 / 6)
        path = self.out("baseline.json")
        with open(path, "w", encoding="utf-8") as out:
            out.write(result.stdout)
        # check accepts it, and plot draws it as the dashed line, not as a coloured series.
        self.assertEqual(run("check", path, "--baseline", path).returncode, 0)
        figure = self.out("b.svg")
        self.assertEqual(run("plot", path, "-o", figure, "--metric", "erank_pct").returncode, 0)
        panel = svg_summary(figure)["panels"][0]
        self.assertEqual(panel["series"], {})
        self.assertEqual(panel["baselines"], ["Fully redundant"])


if __name__ == "__main__":
    harness.main_unittest()
