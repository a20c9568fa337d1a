"""End-to-end tests of what kvrank writes and says: the format -o implies, the result schema and its
provenance, the tidy CSV, progress in batch logs, --keep-going, `check` for CI, the help texts and
the errors that say what to do.

Usage: python3 tests/e2e/test_outputs.py path/to/kvrank   (run from the repository root)
test_result_schema.py validates what analyze, merge and baseline write against the JSON Schema.
"""
import csv
import io
import json
import os
import re
import shutil
import struct

import harness
from harness import run

MHA, GQA, MQA = (os.path.join("data", "tiny", name) for name in ("mha", "gqa", "mqa"))
RESULT_V1 = os.path.join(harness.ROOT, "tests", "data", "result-v1.json")

def read(path, mode="r"):
    with open(path, mode) as handle:
        return handle.read()


def write_bytes(path, data):
    with open(path, "wb") as handle:
        handle.write(data)


def safetensors_dtypes(path):
    """The dtypes a safetensors header lists, read independently of kvrank."""
    with open(path, "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(size))
    return {entry["dtype"] for name, entry in header.items() if name != "__metadata__"}


def help_text(command):
    """`kvrank COMMAND --help`, an option's default written TYPE=VALUE as CLI11 2.3 writes it
    (Debian 12); CLI11 2.4 (Debian 13, Ubuntu 24.04) writes TYPE [VALUE]."""
    text = run(command, "--help").stdout
    return re.sub(r"(\b[A-Z]+(?::\S+)?) \[([^\]]+)\]", r"\1=\2", text)


def help_options(text):
    """(option, its help text) for each option of a CLI11 help that takes a value (not a flag)."""
    options, current = [], None
    for line in text.splitlines():
        if re.match(r"^  -", line):
            current = [line]
            options.append(current)
        elif current is not None and re.match(r"^ {10,}\S", line):
            current.append(line)  # the description wrapped onto the next line
        else:
            current = None
    taking_values = []
    for lines in options:
        head = lines[0].split()
        if len(head) > 1 and re.match(r"(TEXT|INT|FLOAT|UINT)", head[1]) and head[0] != "-h,--help":
            taking_values.append((head[0], " ".join(lines)))
    return taking_values


class OutputsTest(harness.TestCase):
    def analyze(self, *args, code=0):
        result = run("analyze", *args)
        self.assertEqual(result.returncode, code, result.stderr)
        return result

    def usage_error(self, result, message):
        self.assertEqual((result.returncode, result.stdout), (2, ""), result.stderr)
        self.assertEqual(result.stderr, f"kvrank: error: {message}\n")

    # ---------------------------------------------------------------- 1. -o decides the format

    def test_the_extension_of_o_sets_the_format(self):
        for name, check in (("out.json", lambda text: json.loads(text)["schema_version"] == 2),
                            ("out.csv", lambda text: text.startswith("label,step,source,")),
                            ("out.tsv", lambda text: text.startswith("label\tstep\tsource\t")),
                            ("out.txt", lambda text: " layer     erank  erank%" in text)):
            with self.subTest(name=name):
                self.analyze(MHA, "-q", "-o", self.path(name))
                self.assertTrue(check(read(self.path(name))), read(self.path(name))[:200])
                # In any case: OUT.JSON is JSON too, as plot's OUT.SVG is SVG.
                upper = self.path(name.upper())
                self.analyze(MHA, "-q", "-o", upper)
                self.assertTrue(check(read(upper)), read(upper)[:200])

    def test_a_format_that_contradicts_o_is_refused_and_writes_nothing(self):
        output = self.path("out.json")
        self.usage_error(run("analyze", MHA, "--format", "csv", "-o", output),
                         f"--format csv contradicts -o {output} (a .json file holds json): drop "
                         "--format, or name the file for the format")
        self.assertFalse(os.path.exists(output))
        self.usage_error(run("merge", RESULT_V1, "-o", self.path("all.csv")),
                         f"-o {self.path('all.csv')}: merge writes JSON, not csv (name the file "
                         ".json)")
        # Other extensions follow --format (default: the table).
        self.analyze(MHA, "-q", "--format", "json", "-o", self.path("out.result"))
        self.assertEqual(json.loads(read(self.path("out.result")))["schema_version"], 2)

    # ---------------------------------------------------------------- 2. schema and provenance

    def test_provenance_names_the_input_and_what_shaped_the_numbers(self):
        doc = json.loads(self.analyze(MHA, "--layers", "0,2-3", "--format", "json", "-q").stdout)
        (model,) = doc["models"]
        self.assertEqual(model["source"], {"input": MHA, "hf_repo": None, "hf_revision": None})
        self.assertEqual(model["step"], None)
        want = ",".join(sorted(safetensors_dtypes(os.path.join(MHA, "model.safetensors"))))
        self.assertEqual(model["dtype"], want)
        self.assertEqual(model["options"], {"layers": "0,2-3", "map": None, "qk_norm_gain": None,
                                            "input_norm_gain": None})
        self.assertEqual(doc["tool"]["name"], "kvrank")

    def test_provenance_of_a_hub_cache_model_names_repo_and_revision(self):
        hub = self.path("hub")
        revision = "0123456789abcdef0123456789abcdef01234567"
        snapshot = os.path.join(hub, "models--org--tiny", "snapshots", revision)
        shutil.copytree(MHA, snapshot)
        os.makedirs(os.path.join(hub, "models--org--tiny", "refs"))
        with open(os.path.join(hub, "models--org--tiny", "refs", "main"), "w") as ref:
            ref.write(revision)
        env = dict(os.environ, HF_HUB_CACHE=hub)
        result = run("analyze", "org/tiny", "--format", "json", "-q", env=env, cwd=self.dir)
        self.assertEqual(result.returncode, 0, result.stderr)
        (model,) = json.loads(result.stdout)["models"]
        self.assertEqual(model["source"],
                         {"input": "org/tiny", "hf_repo": "org/tiny", "hf_revision": revision})

    def test_results_are_byte_reproducible(self):
        first = run("analyze", MHA, GQA, "--format", "json", "-q", text=False).stdout
        second = run("analyze", MHA, GQA, "--format", "json", "-q", text=False).stdout
        self.assertEqual(first, second)

    def test_models_and_layers_normalise_without_a_prefix(self):
        """pandas.json_normalize(d["models"], "layers", meta=[...]) refuses a meta key that is also
        a layer key; no model key may be one (checked here without pandas, and with it when
        installed)."""
        doc = json.loads(self.analyze(MHA, GQA, "--format", "json", "-q").stdout)
        for model in doc["models"]:
            meta = {key for key, value in model.items() if key != "layers"}
            for layer in model["layers"]:
                self.assertEqual(meta & set(layer), set())
        try:
            import pandas
        except ImportError:
            return
        meta = ["label", "repr", "family", "variant", "heads", "kv_heads", "step"]
        frame = pandas.json_normalize(doc["models"], "layers", meta=meta)
        self.assertEqual(len(frame), sum(len(m["layers"]) for m in doc["models"]))

    def test_version_1_results_still_read_in_check_plot_and_merge(self):
        self.assertEqual(json.loads(read(RESULT_V1))["schema_version"], 1)
        result = run("check", RESULT_V1, "--baseline", RESULT_V1)
        self.assertEqual(result.returncode, 0, result.stderr)
        result = run("plot", RESULT_V1, "-o", self.path("v1.svg"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("<svg", read(self.path("v1.svg")))
        merged = json.loads(run("merge", RESULT_V1).stdout)
        self.assertEqual(merged["schema_version"], 2)
        original = json.loads(read(RESULT_V1))
        for old, new in zip(original["models"], merged["models"]):
            self.assertEqual([layer["heads"] for layer in old["layers"]],
                             [layer["kept_heads"] for layer in new["layers"]])
            self.assertEqual([layer["erank"] for layer in old["layers"]],
                             [layer["erank"] for layer in new["layers"]])
            self.assertEqual((new["step"], new["source"]["input"]), (None, None))

    # ---------------------------------------------------------------- 3. tidy CSV

    def test_csv_rows_carry_the_model_columns(self):
        doc = json.loads(self.analyze(MHA, MQA, "--format", "json", "-q").stdout)
        rows = list(csv.DictReader(io.StringIO(self.analyze(MHA, MQA, "--format", "csv",
                                                            "-q").stdout)))
        self.assertEqual(len(rows), sum(len(m["layers"]) for m in doc["models"]))
        for row in rows:
            model = next(m for m in doc["models"] if m["label"] == row["label"])
            for key in ("family", "variant", "repr"):
                self.assertEqual(row[key], model[key])
            for key in ("heads", "kv_heads", "head_dim", "d_model", "num_layers"):
                self.assertEqual(int(row[key]), model[key])
            self.assertEqual(row["source"], model["source"]["input"])
            self.assertEqual(row["step"], "")
            layer = model["layers"][int(row["layer"])]
            self.assertEqual(int(row["kept_heads"]), layer["kept_heads"])
            self.assertEqual(float(row["erank"]), layer["erank"])
            self.assertEqual(int(row["pcs_90"]), layer["pcs_90"])

    def test_csv_summary_is_one_row_per_model_and_repr(self):
        doc = json.loads(self.analyze(MHA, GQA, "--repr", "qk,k", "--format", "json",
                                      "-q").stdout)
        text = self.analyze(MHA, GQA, "--repr", "qk,k", "--summary", "-q", "-o",
                            self.path("s.csv")).stdout
        self.assertEqual(text, "")
        rows = list(csv.DictReader(io.StringIO(read(self.path("s.csv")))))
        self.assertEqual([(r["label"], r["repr"]) for r in rows],
                         [(m["label"], m["repr"]) for m in doc["models"]])
        for row, model in zip(rows, doc["models"]):
            self.assertEqual(int(row["layers_analysed"]), len(model["layers"]))
            for key, mean in model["summary"].items():
                self.assertEqual(float(row[key]), mean)
            # the means are of the layers (independently of kvrank's summary)
            erank = sum(layer["erank"] for layer in model["layers"]) / len(model["layers"])
            self.assertTrue(harness.close(float(row["erank_mean"]), erank))

    def test_similarity_and_summary_outside_their_formats_are_usage_errors(self):
        self.usage_error(run("analyze", MHA, "--similarity", "--format", "csv"),
                         "--similarity: the H×H matrices go only into JSON (--format json or "
                         "-o FILE.json), not into csv")
        self.usage_error(run("analyze", MHA, "--summary", "-o", self.path("x.json")),
                         "--summary: one row per model and representation is a CSV or TSV form "
                         "(--format csv or -o FILE.csv), not json")
        self.assertFalse(os.path.exists(self.path("x.json")))

    # ---------------------------------------------------------------- 4. progress

    def test_plain_progress_lines_and_a_closing_line_off_a_terminal(self):
        output = self.path("out.json")
        result = self.analyze(MHA, GQA, "-o", output)  # stderr is a pipe: auto → plain
        lines = result.stderr.splitlines()
        pattern = (r"kvrank: model (\d)/2 (\w+): (\d+)/(\d+) layers, \d+\.\d s elapsed"
                   r"(, ETA \d+\.\d s)?")
        progress = [re.fullmatch(pattern, line) for line in lines if "info" not in line]
        self.assertTrue(all(progress), lines)
        finals = [(m[1], m[2]) for m in progress if m[3] == m[4]]
        self.assertEqual(finals, [("1", "mha"), ("2", "gqa")])
        self.assertIsNotNone(progress[0][5], "the first model's line has an ETA")
        self.assertRegex(lines[-1], r"^kvrank: info: wrote " + re.escape(output) +
                         r": 2 models × 4 layers in \d+\.\d s$")

    def test_every_command_that_writes_a_file_closes_with_one_line(self):
        def closing(*args):
            result = run(*args)
            self.assertEqual(result.returncode, 0, result.stderr)
            return result.stderr.splitlines()[-1]
        seconds = r" in \d+\.\d s"
        part = self.path("part.json")
        self.assertRegex(closing("analyze", MHA, "--layers", "1", "--progress", "none", "-o", part),
                         "^kvrank: info: wrote " + re.escape(part) + ": 1 model × 1 layer" +
                         seconds + "$")
        whole, merged = self.path("whole.json"), self.path("merged.json")
        self.analyze(MHA, "-q", "-o", whole)
        self.assertRegex(closing("merge", whole, RESULT_V1, "-o", merged),
                         "^kvrank: info: wrote " + re.escape(merged) +
                         ": 3 models, 10 layers in all from 2 parts" + seconds + "$")
        baseline = self.path("baseline.csv")
        self.assertRegex(closing("baseline", "--layers", "3", "-o", baseline),
                         "^kvrank: info: wrote " + re.escape(baseline) + ": 1 model × 3 layers" +
                         seconds + "$")
        figure = self.path("fig.svg")
        self.assertRegex(closing("plot", part, "-o", figure),
                         "^kvrank: info: wrote " + re.escape(figure) + ": 1 result file" +
                         seconds + "$")
        synthetic = self.path("synthetic")
        self.assertRegex(closing("synth", "--layers", "1", "--heads", "2", "-o", synthetic),
                         "^kvrank: info: wrote " + re.escape(synthetic) +
                         ": a llama checkpoint of 1 layer" + seconds + "$")

    def test_quiet_and_none_print_nothing(self):
        self.assertEqual(self.analyze(MHA, "-q", "-o", self.path("a.json")).stderr, "")
        result = self.analyze(MHA, "--progress", "none", "--format", "json")
        self.assertEqual(result.stderr, "")
        self.usage_error(run("analyze", MHA, "--progress", "sometimes"),
                         "--progress: expected auto, bar, plain or none, found \"sometimes\"")

    # ---------------------------------------------------------------- 5. --keep-going

    def test_keep_going_writes_the_good_results_and_exits_4(self):
        broken = self.path("broken.safetensors")
        write_bytes(broken, b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
        output = self.path("out.json")
        result = run("analyze", MHA, broken, GQA, "--keep-going", "--progress", "none",
                     "-o", output)
        self.assertEqual(result.returncode, 4, result.stderr)
        errors = [line for line in result.stderr.splitlines() if "error" in line]
        self.assertEqual(len(errors), 2, result.stderr)
        self.assertTrue(errors[0].startswith(f"kvrank: error: {broken}: "), errors[0])
        self.assertEqual(errors[1], "kvrank: error: 1 of 3 inputs failed (named above); the "
                                    "results of the others were written")
        doc = json.loads(read(output))
        self.assertEqual([m["label"] for m in doc["models"]], ["mha", "gqa"])
        # Without --keep-going the first failure ends the run and nothing is written.
        os.remove(output)
        result = run("analyze", MHA, broken, "-q", "-o", output)
        self.assertEqual(result.returncode, 2)
        self.assertFalse(os.path.exists(output))
        # Nothing usable: exit 2.
        result = run("analyze", broken, self.path("absent.safetensors"), "--keep-going", "-q",
                     "-o", output)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(result.stderr.splitlines()[-1],
                         "kvrank: error: no input could be analysed (each is named above)")
        self.assertFalse(os.path.exists(output))

    # ---------------------------------------------------------------- 6. check for CI

    def two_results(self):
        golden = json.loads(read(RESULT_V1))
        current = json.loads(read(RESULT_V1))
        current["models"][0]["layers"][1]["erank"] += 0.5   # A layer 1 rises
        current["models"][1]["layers"][2]["erank"] -= 0.25  # B layer 2 falls
        paths = self.path("current.json"), self.path("golden.json")
        for document, path in zip((current, golden), paths):
            with open(path, "w") as handle:
                json.dump(document, handle)
        return paths

    def test_check_direction_and_neutral_wording(self):
        current, golden = self.two_results()
        env = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
        both = run("check", current, "--baseline", golden, "--metric", "erank", env=env)
        self.assertEqual(both.returncode, 1)
        self.assertTrue(both.stdout.endswith(
            f"kvrank check: 2 value(s) changed beyond tolerance against {golden}\n"), both.stdout)
        down = run("check", current, "--baseline", golden, "--metric", "erank",
                   "--direction", "down", env=env)
        self.assertEqual(down.returncode, 1)
        self.assertEqual(down.stdout.splitlines()[1].split()[:3], ["B", "qk", "2"])
        self.assertIn("1 value(s) changed", down.stdout)
        up = run("check", current, "--baseline", golden, "--metric", "erank", "--direction", "up",
                 env=env)
        self.assertEqual(up.stdout.splitlines()[1].split()[:3], ["A", "qk", "1"])

    def test_check_json_report(self):
        current, golden = self.two_results()
        result = run("check", current, "--baseline", golden, "--metric", "erank",
                     "--format", "json", "--annotate", "none")
        self.assertEqual(result.returncode, 1)
        report = json.loads(result.stdout)
        self.assertEqual((report["passed"], report["direction"], report["metrics"]),
                         (False, "both", ["erank"]))
        self.assertEqual([(c["label"], c["layer"], c["diff"]) for c in report["changes"]],
                         [("A", 1, 0.5), ("B", 2, -0.25)])
        result = run("check", golden, "--baseline", golden, "--format", "json")
        self.assertEqual((result.returncode, json.loads(result.stdout)["changes"]), (0, []))

    def test_check_under_github_actions_annotates_and_writes_the_job_summary(self):
        current, golden = self.two_results()
        summary = self.path("summary.md")
        env = dict(os.environ, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=summary)
        result = run("check", current, "--baseline", golden, "--metric", "erank",
                     "--direction", "down", env=env)
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stdout.splitlines()[0],
                         f"::error file={current},title=kvrank check::model \"B\" (repr qk) layer "
                         "2: erank changed from 1.500000 to 1.250000")
        self.assertEqual(read(summary).splitlines()[-1],
                         "| B | qk | 2 | erank | 1.500000 | 1.250000 | -0.250000 |")
        self.assertIn("direction down", read(summary))
        # With --format json, stdout is the comparison alone: the annotations go to stderr.
        both = run("check", current, "--baseline", golden, "--metric", "erank",
                   "--direction", "down", "--format", "json", env=env)
        self.assertEqual(json.loads(both.stdout)["passed"], False)
        self.assertEqual(both.stderr.splitlines()[0],
                         f"::error file={current},title=kvrank check::model \"B\" (repr qk) layer "
                         "2: erank changed from 1.500000 to 1.250000")
        plain = run("check", current, "--baseline", golden, "--annotate", "github",
                    env={k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")})
        self.assertTrue(plain.stdout.startswith("::error file="), plain.stdout)

    # ---------------------------------------------------------------- 7. help

    def test_help_shows_inputs_defaults_and_choices(self):
        analyze = help_text("analyze")
        for text in ("ORG/NAME[@REV]", ".gguf", ".npy/.npz", "-q/--quiet", "-v/--verbose",
                     "--keep-going", "{auto,bar,plain,none}", "{table,json,csv,tsv}"):
            self.assertIn(text, analyze)
        plot = help_text("plot")
        self.assertIn("erank_centered_pct", plot)
        self.assertIn("--metric TEXT:{erank,erank_pct,erank_centered,erank_centered_pct,"
                      "mean_similarity,pcs_90}=erank", plot)
        synth = help_text("synth")
        self.assertIn("(1-r)·own + r·shared", synth)
        self.assertIn("Only -o is required", synth)
        self.assertIn("--family TEXT=llama", synth)
        check = help_text("check")
        self.assertIn("--abs-tol FLOAT:NONNEGATIVE=0.05", check)
        self.assertIn("{down,up,both}", check)

    def test_every_option_with_a_value_shows_its_default_or_choices(self):
        for command in ("analyze", "inspect", "plot", "check", "merge", "baseline", "synth"):
            for option, text in help_options(help_text(command)):
                with self.subTest(command=command, option=option):
                    self.assertTrue(re.search(r"=\S|\{|REQUIRED|default|Only -o", text), text)

    def test_baseline_defaults_to_the_table_and_bare_kvrank_points_to_help(self):
        result = run("baseline", "--layers", "2")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(" layer     erank", result.stdout)
        bare = run()
        self.usage_error(bare, "no subcommand given: kvrank analyze|inspect|check|plot|merge|"
                               "baseline|diff|plan|synth (kvrank --help lists them, kvrank SUBCOMMAND --help "
                               "their options)")

    # ---------------------------------------------------------------- 8. errors that say what to do

    def test_a_pytorch_pickle_says_how_to_convert_it(self):
        pickle = self.path("pytorch_model.bin")
        write_bytes(pickle, b"\x80\x02}q\x00.")
        target = self.path("pytorch_model.safetensors")
        advice = ("a PyTorch pickle (torch.save), which kvrank does not read (loading one can run "
                  "code): convert it to safetensors, e.g. python3 -c \"import torch; from "
                  "safetensors.torch import save_file; save_file(torch.load('" + pickle +
                  "', weights_only=True), '" + target + "')\" (a Lightning .ckpt keeps the "
                  "weights under \"state_dict\"; for a Hugging Face folder, "
                  "model.save_pretrained(DIR, safe_serialization=True) writes safetensors)")
        self.usage_error(run("analyze", pickle), f"{pickle}: {advice}")
        self.usage_error(run("analyze", self.dir),
                         f"{self.dir}: holds no safetensors, only pytorch_model.bin, {advice}")

    def test_a_folder_of_model_folders_suggests_the_glob(self):
        for name in ("a", "b"):
            shutil.copytree(MHA, self.path(os.path.join("runs", name)))
        runs = self.path("runs")
        self.usage_error(run("analyze", runs),
                         f"{runs}: a folder of model folders: give each model folder, e.g. "
                         f"{runs}/*/")

    def test_a_missing_local_path_names_the_nearest_existing_one(self):
        shutil.copytree(MHA, self.path(os.path.join("ckpts", "model-a")))
        result = run("analyze", "ckpts/modle-a", cwd=self.dir)
        self.usage_error(result, "ckpts/modle-a: no such file or folder (nearest existing name: "
                                 "ckpts/model-a)")
        result = run("analyze", "./nothing-like-it.safetensors", cwd=self.dir)
        self.usage_error(result, "./nothing-like-it.safetensors: no such file or folder")

    def test_tensors_named_like_activations_suggest_the_flag(self):
        import numpy as np
        arrays = {f"layers.{i}.{role}": np.ones((4, 2, 3), dtype=np.float32)
                  for i in range(2) for role in "qkv"}
        path = self.path("capture.npz")
        np.savez(path, **arrays)
        result = run("analyze", path)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertTrue(result.stderr.rstrip().endswith(
            "(its tensors are named like captured activations, layers.{i}.k: if they are, add "
            "--activations)"), result.stderr)


if __name__ == "__main__":
    harness.main_unittest()
