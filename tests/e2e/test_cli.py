"""End-to-end tests of the kvrank command line: output formats, schema, exit codes, atomic output.

Usage: python3 tests/e2e/test_cli.py path/to/kvrank   (run from the repository root)
Checkpoints come from `kvrank synth` (the schema tests do not depend on their numbers) and from
the trained models in data/tiny.
"""
import csv
import io
import json
import os
import re
import tempfile
import unittest

import harness
from harness import run


TOP_KEYS = {"schema_version", "tool", "models"}
MODEL_KEYS = {"label", "path", "step", "source", "dtype", "options", "family", "model_type", "variant", "heads",
              "kv_heads", "head_dim", "d_model", "num_layers", "lrkv_rank", "mla_kv_lora_rank",
              "repr", "layers", "summary"}
LAYER_KEYS = {"layer", "kept_heads", "erank", "erank_centered", "erank_pct", "erank_centered_pct",
              "mean_similarity", "pcs_90", "eigenvalues", "eigenvalues_centered", "head_erank",
              "head_norm", "zero_heads"}
SUMMARY_KEYS = {"erank_mean", "erank_centered_mean", "erank_pct_mean", "erank_centered_pct_mean"}
CSV_HEADER = ("label,step,source,family,variant,repr,heads,kv_heads,head_dim,d_model,num_layers,"
              "lrkv_rank,mla_kv_lora_rank,layer,kept_heads,erank,erank_pct,erank_centered,"
              "erank_centered_pct,mean_similarity,pcs_90")


class CliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.gqa = os.path.join(cls.tmp.name, "gqa")
        cls.mha = os.path.join(cls.tmp.name, "mha")
        for path, kv in ((cls.gqa, "2"), (cls.mha, "4")):
            result = run("synth", "--family", "llama", "--layers", "3", "--heads", "4",
                         "--kv-heads", kv, "--head-dim", "8", "--d-model", "32",
                         "--redundancy", "0.3", "--seed", "7", "-o", path)
            assert result.returncode == 0, result.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def assert_usage_error(self, result):
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(result.stdout, "")
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("kvrank: error: "), lines[0])
        return lines[0]

    def analyze_json(self, *args):
        result = run("analyze", *args, "--format", "json")
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

    def test_json_has_exactly_the_schema_keys(self):
        doc = self.analyze_json(self.gqa, self.mha, "--label", "G", "--label", "M")
        self.assertEqual(set(doc), TOP_KEYS)
        self.assertEqual(doc["schema_version"], 2)
        self.assertEqual(doc["tool"]["name"], "kvrank")
        self.assertEqual([m["label"] for m in doc["models"]], ["G", "M"])
        for model in doc["models"]:
            self.assertEqual(set(model), MODEL_KEYS)
            self.assertEqual(set(model["summary"]), SUMMARY_KEYS)
            self.assertEqual(len(model["layers"]), 3)
            for index, layer in enumerate(model["layers"]):
                self.assertEqual(set(layer), LAYER_KEYS)
                self.assertEqual(layer["layer"], index)
                self.assertEqual(len(layer["eigenvalues"]), 4)
                self.assertEqual(len(layer["head_norm"]), 4)
        self.assertEqual(doc["models"][0]["variant"], "gqa")
        self.assertEqual(doc["models"][0]["kv_heads"], 2)
        self.assertEqual(doc["models"][1]["variant"], "mha")

    def test_summary_is_the_mean_over_layers(self):
        model = self.analyze_json(self.gqa)["models"][0]
        for key in ("erank", "erank_centered", "erank_pct", "erank_centered_pct"):
            mean = sum(layer[key] for layer in model["layers"]) / len(model["layers"])
            self.assertAlmostEqual(model["summary"][key + "_mean"], mean, places=9)

    def test_percentages_follow_the_papers_convention(self):
        for layer in self.analyze_json(self.mha)["models"][0]["layers"]:
            heads = layer["kept_heads"]
            self.assertAlmostEqual(layer["erank_pct"], 100 * layer["erank"] / heads, places=9)
            self.assertAlmostEqual(layer["erank_centered_pct"],
                                   100 * layer["erank_centered"] / heads, places=9)

    def test_similarity_only_on_request(self):
        doc = self.analyze_json(self.mha, "--similarity")
        layer = doc["models"][0]["layers"][0]
        self.assertEqual(set(layer), LAYER_KEYS | {"similarity"})
        similarity = layer["similarity"]
        self.assertEqual(len(similarity), 4)
        for i in range(4):
            self.assertAlmostEqual(similarity[i][i], 1.0, places=12)
            for j in range(4):
                self.assertAlmostEqual(similarity[i][j], similarity[j][i], places=12)

    def test_several_representations_give_one_series_each(self):
        doc = self.analyze_json(self.gqa, "--repr", "qk,k")
        self.assertEqual([m["repr"] for m in doc["models"]], ["qk", "k"])
        for layer in doc["models"][1]["layers"]:  # GQA keys: at most H_kv distinct heads
            self.assertLessEqual(layer["erank"], 2 + 1e-9)

    def test_layer_selection(self):
        doc = self.analyze_json(self.mha, "--layers", "0,2")
        self.assertEqual([layer["layer"] for layer in doc["models"][0]["layers"]], [0, 2])

    def test_csv_header_and_rows(self):
        result = run("analyze", self.gqa, self.mha, "--format", "csv")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(lines[0], CSV_HEADER)
        rows = list(csv.DictReader(io.StringIO(result.stdout)))
        self.assertEqual(len(rows), 6)
        self.assertEqual({row["label"] for row in rows}, {"gqa", "mha"})
        json_layers = self.analyze_json(self.gqa)["models"][0]["layers"]
        for row, layer in zip(rows[:3], json_layers):
            self.assertAlmostEqual(float(row["erank"]), layer["erank"], places=5)

    def test_table_names_the_model(self):
        result = run("analyze", self.gqa, "--label", "my-model")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("my-model", result.stdout)
        self.assertIn("gqa", result.stdout)

    def test_output_file_and_with_baseline(self):
        out = os.path.join(self.tmp.name, "curves.json")
        result = run("analyze", self.mha, "--with-baseline", "--format", "json", "-o", out, "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, "")
        with open(out) as handle:
            models = json.load(handle)["models"]
        self.assertEqual(models[-1]["label"], "Fully redundant")
        self.assertEqual(models[-1]["variant"], "baseline")
        self.assertEqual([layer["erank"] for layer in models[-1]["layers"]], [1.0, 1.0, 1.0])

    def test_failed_run_leaves_no_output_file(self):
        out = os.path.join(self.tmp.name, "never.json")
        result = run("analyze", self.mha, os.path.join(self.tmp.name, "missing"),
                     "--format", "json", "-o", out)
        self.assert_usage_error(result)
        self.assertFalse(os.path.exists(out))
        self.assertEqual([f for f in os.listdir(self.tmp.name) if "never" in f], [])

    def test_baseline_command(self):
        result = run("baseline", "--layers", "4", "--heads", "6", "--format", "json")
        self.assertEqual(result.returncode, 0, result.stderr)
        model = json.loads(result.stdout)["models"][0]
        self.assertEqual(model["label"], "Fully redundant")
        self.assertEqual(len(model["layers"]), 4)
        for layer in model["layers"]:
            self.assertEqual(layer["erank"], 1.0)
            self.assertEqual(layer["erank_centered"], 1.0)

    def test_usage_errors_exit_2_with_one_line(self):
        missing = os.path.join(self.tmp.name, "nope.safetensors")
        cases = [
            ("analyze",),
            ("frobnicate",),
            ("analyze", missing),
            ("analyze", self.mha, "--format", "xml"),
            ("analyze", self.mha, "--repr", "qq"),
            ("analyze", self.mha, "--layers", "7"),
            ("analyze", self.mha, "--layers", "3-1"),
            ("analyze", self.mha, "--label", "a", "--label", "b"),
            ("inspect", missing),
            ("check", missing, "--baseline", missing),
            ("synth", "--heads", "6", "--kv-heads", "4", "-o", os.path.join(self.tmp.name, "bad")),
        ]
        for args in cases:
            with self.subTest(args=args):
                self.assert_usage_error(run(*args))
        line = self.assert_usage_error(run("analyze", missing))
        self.assertIn(missing, line)

    # ---------------------------------------------------------------- integers, decimal only

    def test_integer_options_are_decimal_only_and_never_clamped(self):
        doc = self.analyze_json(self.mha, "--step", "000500")
        self.assertEqual(doc["models"][0]["step"], 500)  # not octal 320; checkpoint-000500 is 500
        too_large = "9223372036854775808"
        cases = [("analyze", self.mha, "--step", too_large),
                 ("analyze", self.mha, "--step", "0x10"),
                 ("analyze", self.mha, "--threads", "0x10"),
                 ("analyze", self.mha, "--threads", too_large),
                 ("analyze", self.mha, "--heads", "1e3"),
                 ("baseline", "--layers", "+4"),
                 ("synth", "--layers", too_large, "-o", os.path.join(self.tmp.name, "never")),
                 ("plot", "r.json", "-o", "f.svg", "--heatmap", "0x1"),
                 ("plot", "r.json", "-o", "f.png", "--dpi", too_large)]
        for args in cases:
            with self.subTest(args=args):
                line = self.assert_usage_error(run(*args))
                self.assertRegex(line, r"--\S+: (expected a decimal integer|\S+ is out of range)")
        self.assertIn(f"--step: {too_large} is out of range (at most 9223372036854775807)",
                      self.assert_usage_error(run("analyze", self.mha, "--step", too_large)))

    # ---------------------------------------------------------------- --keep-going

    def test_keep_going_keeps_each_inputs_own_step_and_label(self):
        missing = os.path.join(self.tmp.name, "missing")
        result = run("analyze", self.mha, missing, self.gqa, "--keep-going", "--format", "json",
                     "--step", "1", "--step", "2", "--step", "3",
                     "--label", "A", "--label", "B", "--label", "C", "-q")
        self.assertEqual(result.returncode, 4, result.stderr)
        models = json.loads(result.stdout)["models"]
        self.assertEqual([(m["label"], m["step"]) for m in models], [("A", 1), ("C", 3)])
        self.assertIn(missing, result.stderr)

    # ---------------------------------------------------------------- a forgiving command line

    def test_did_you_mean(self):
        cases = [(("analyse", self.mha), 'unknown subcommand "analyse" (did you mean analyze?)'),
                 (("analyze", self.mha, "--fromat", "json"),
                  "unknown option --fromat of analyze (did you mean --format?)"),
                 (("analyze", self.mha, "--layer", "2"),
                  "unknown option --layer of analyze (did you mean --layers?)"),
                 (("baseline", "--layers", "2", "--hedas=3"),
                  "unknown option --hedas of baseline (did you mean --heads?)")]
        for args, expected in cases:
            with self.subTest(args=args):
                self.assertEqual(self.assert_usage_error(run(*args)), "kvrank: error: " + expected)
        line = self.assert_usage_error(run("frobnicate"))
        self.assertIn("expected analyze|inspect|check|plot|merge|baseline|diff|plan|synth", line)
        self.assertIn("kvrank analyze --help lists them",
                      self.assert_usage_error(run("analyze", self.mha, "--zzzzzzzzzz")))

    def test_a_glob_over_a_folder_hints_at_its_folders(self):
        folder = os.path.join(self.tmp.name, "glob")
        os.makedirs(folder, exist_ok=True)
        notes = os.path.join(folder, "losses.json")
        with open(notes, "w") as handle:
            handle.write("{}")
        result = run("analyze", self.mha, notes, "-q", "--format", "json")
        line = self.assert_usage_error(result)
        self.assertIn(notes, line)
        self.assertIn(f"{folder}/*/, or add --keep-going", line)
        # A folder holding only a GGUF file names it.
        gguf_folder = os.path.join(self.tmp.name, "quantised")
        os.makedirs(gguf_folder, exist_ok=True)
        with open(os.path.join(gguf_folder, "model-Q8_0.gguf"), "wb") as handle:
            handle.write(b"GGUF")
        line = self.assert_usage_error(run("analyze", gguf_folder))
        self.assertIn("no checkpoint files in this folder", line)
        self.assertIn("it holds model-Q8_0.gguf: name a .gguf file itself", line)

    def test_baseline_heads_mean_redundancy(self):
        doc = json.loads(run("baseline", "--layers", "2", "--format", "json").stdout)
        model = doc["models"][0]
        self.assertEqual(model["heads"], 2)
        self.assertEqual([layer["erank_pct"] for layer in model["layers"]], [50.0, 50.0])
        line = self.assert_usage_error(run("baseline", "--layers", "2", "--heads", "1"))
        self.assertIn("--heads: must be 2 or more, found 1", line)

    def test_help_lists_choices_from_the_library_tables(self):
        analyze = run("analyze", "--help").stdout
        for choices in ("{qk,ov,k,v}", "{self,cross,all}", "{table,json,csv,tsv}"):
            self.assertIn(choices, analyze)

    def test_plot_model_lists_the_labels_present(self):
        results = os.path.join(self.tmp.name, "similarity.json")
        analyzed = run("analyze", self.gqa, self.mha, "--similarity", "-o", results, "-q")
        self.assertEqual(analyzed.returncode, 0, analyzed.stderr)
        line = self.assert_usage_error(run("plot", results, "-o", os.path.join(self.tmp.name, "h.svg"),
                                           "--heatmap", "0", "--model", "Foo"))
        self.assertIn('has no model labelled "Foo" (it has "gqa", "mha")', line)

    def test_every_subcommand_is_in_the_readme_synopsis(self):
        # The subcommands are the command line's table (kvrank --help lists it); the README's
        # synopsis is written by hand, so a row added without its line fails here.
        listing = re.split(r"(?i)^subcommands:$", run("--help").stdout, flags=re.M)[1]
        names = [line.split()[0] for line in listing.splitlines() if line.startswith("  ")]
        self.assertIn("analyze", names)
        with open("README.md", encoding="utf-8") as handle:
            readme = handle.read()
        for name in names:
            self.assertRegex(readme, rf"(?m)^kvrank {name} ", f"README.md has no synopsis of {name}")

    def test_check_quotes_an_unmatched_label_as_an_excerpt(self):
        golden = os.path.join(self.tmp.name, "golden.json")
        analyzed = run("analyze", self.mha, "--format", "json", "-o", golden, "-q")
        self.assertEqual(analyzed.returncode, 0, analyzed.stderr)
        with open(golden) as handle:
            doc = json.load(handle)
        doc["models"][0]["label"] = "x" * 1_000_000
        current = os.path.join(self.tmp.name, "current-long-label.json")
        with open(current, "w") as handle:
            json.dump(doc, handle)
        line = self.assert_usage_error(run("check", current, "--baseline", golden))
        self.assertLess(len(line), 600, line[:200])
        self.assertIn("(1000000 bytes)", line)

    def test_help_and_version(self):
        self.assertEqual(run("--help").returncode, 0)
        self.assertEqual(run("analyze", "--help").returncode, 0)
        version = run("--version")
        self.assertEqual(version.returncode, 0)
        self.assertIn("kvrank", version.stdout)

    def test_loads_its_libraries_only_from_their_folders(self):
        # The run-time search path once ended in an empty entry (the current folder): run in a
        # folder holding a file named libz.so.1, kvrank did not start.
        with tempfile.TemporaryDirectory() as folder:
            decoys = harness.plant_decoy_libraries(harness.KVRANK, folder)
            self.assertIn("libz.so.1", decoys)
            result = run("analyze", os.path.join(harness.TINY, "gqa"), "--format", "csv",
                         cwd=folder)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(result.stdout.startswith(CSV_HEADER), result.stdout)

    def test_trained_model_is_detected_and_analysed(self):
        gqa = os.path.join(harness.TINY, "gqa")  # data/README.md: 8 heads, 2 KV heads, d_h 16
        model = self.analyze_json(gqa)["models"][0]
        self.assertEqual((model["family"], model["variant"]), ("llama", "gqa"))
        self.assertEqual((model["heads"], model["kv_heads"], model["head_dim"]), (8, 2, 16))
        self.assertEqual((model["d_model"], model["num_layers"]), (128, 4))
        inspect = run("inspect", gqa, "--format", "json")
        self.assertEqual(inspect.returncode, 0, inspect.stderr)


if __name__ == "__main__":
    harness.main_unittest()
