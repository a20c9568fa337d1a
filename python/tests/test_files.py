#!/usr/bin/env python3
"""The Python module on files: the same numbers and documents as the command line (data/tiny, a
synthetic checkpoint of every family the test writers know, and the command line's options), the
reference metric on a Llama checkpoint, errors as kvrank.Error with the command line's message,
inspect/check/plot, in-memory numpy state dicts of every family, DataFrames without torch, the GIL
released while computing, and Ctrl-C on one and two threads, on files and in memory.

  python3 python/tests/test_files.py build/kvrank   (ctest: python.test_files, PYTHONPATH set)
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
# Read by libgomp when kvrank loads: its busy-waiting threads would make the two-thread runs crawl
# on a machine whose cores are all taken (a loaded CI runner).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import harness  # noqa: E402
import numpy  # noqa: E402

import kvrank  # noqa: E402
import reference  # noqa: E402  (scripts/, put on the path by harness)
import write_encoder_checkpoints  # noqa: E402  (tests/writers/, put on the path by harness)
import write_family_checkpoints  # noqa: E402
import write_latent_checkpoints  # noqa: E402
from test_input_norm import with_input_norm  # noqa: E402  (tests/e2e/)

SYNTH_FAMILIES = ["llama", "gpt2", "gpt_neox", "falcon", "phi3", "deepseek_v2", "lrkv"]
# Every checkpoint layout the test writers produce: the decoder families (all but "map", which
# needs a --map file) and the hybrids, the encoders, and MLA/LRKV in their variants.
WRITER_FAMILIES = [f for f in write_family_checkpoints.FAMILIES if f != "map"] + \
    list(write_family_checkpoints.HYBRIDS)
# kvonly: NPY files of K/V projections, no config.json: the heads are given (--heads), and the
# family is the files' reader (npy) on files, the names' (llama) in memory.
WRITER_HEADS = {"kvonly": 8}
ENCODER_TYPES = ["bert", "roberta", "vit", "t5", "whisper", "clip", "siglip"]
LATENT_VARIANTS = {"mla": ["mla"], "mla-q-lora": ["mla", "--q-lora-rank", "8"],
                   "mla-minimal-config": ["mla", "--minimal-config"], "lrkv": ["lrkv"]}
TINY_MODELS = sorted(name for name in os.listdir(harness.TINY)
                     if os.path.isdir(os.path.join(harness.TINY, name)))


def cli_error(*args):
    """The message `kvrank ARGS` prints after "kvrank: error: " (it must exit 2)."""
    proc = harness.run(*args)
    assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
    line = proc.stderr.strip().splitlines()[-1]
    prefix = "kvrank: error: "
    assert line.startswith(prefix), line
    return line[len(prefix):]


def python_words(message):
    """The command line's message as analyze() says it: keywords for its options."""
    return kvrank._options.python_words(message, {"step": "steps", "label": "labels"})


def synth(folder, family, **options):
    args = ["synth", "--family", family, "-o", folder, "--seed", "3"]
    for name, value in options.items():
        args += ["--" + name.replace("_", "-"), value]
    proc = harness.run(*args)
    assert proc.returncode == 0, proc.stderr
    return folder


def writer_checkpoints(folder):
    """{name: path} of a small checkpoint of every layout in WRITER_FAMILIES, ENCODER_TYPES and
    LATENT_VARIANTS, written by tests/writers/ (independent of kvrank's C++ code)."""
    paths = {}
    ref = os.path.join(folder, "ref")  # the writers' reference factors, not needed here
    for family in WRITER_FAMILIES:
        paths[family] = os.path.join(folder, family)
        if family in write_family_checkpoints.HYBRIDS:
            write_family_checkpoints.write_hybrid(family, paths[family], ref)
        else:
            write_family_checkpoints.write_family(family, paths[family], ref)
    for model_type in ENCODER_TYPES:
        paths[model_type] = os.path.join(folder, model_type)
        write_encoder_checkpoints.write_encoder(model_type, paths[model_type], 0, "F32")
    for name, args in LATENT_VARIANTS.items():
        paths[name] = os.path.join(folder, name)
        write_latent_checkpoints.write_latent(
            write_latent_checkpoints.parse_args([args[0], paths[name], ref, *args[1:]]))
    return paths


def read_state_dict(folder):
    """A synthetic checkpoint's tensors as numpy arrays as they are stored (F32/F16), and its
    config (None without a config.json) — what a user holding the same weights in memory would
    pass."""
    config = None
    if os.path.exists(os.path.join(folder, "config.json")):
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
    tensors = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".npy"):  # one tensor, named by its file (as kvrank names it)
            tensors[name[:-len(".npy")]] = numpy.load(os.path.join(folder, name))
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(folder, name), "rb") as f:
            raw = f.read()
        size = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + size])
        for tensor, info in header.items():
            if tensor == "__metadata__":
                continue
            start, end = info["data_offsets"]
            dtype = {"F32": "<f4", "F16": "<f2"}[info["dtype"]]
            tensors[tensor] = numpy.frombuffer(raw[8 + size + start:8 + size + end],
                                               dtype=dtype).reshape(info["shape"])
    return tensors, config


def without_path(document):
    """The result document with each model's path left out (files and memory differ there, and
    in its run: "in memory" unless named)."""
    document = json.loads(json.dumps(document))
    for model in document["models"]:
        model.pop("path")
        model.pop("run", None)
        model["source"].pop("input")  # the argument as given: a folder, or nothing in memory
    return document


class FilesTest(harness.TestCase):
    def test_tiny_models_equal_the_command_line(self):
        for model in TINY_MODELS:
            path = os.path.join(harness.TINY, model)
            with self.subTest(model=model):
                self.assertEqual(kvrank.analyze(path).to_dict(), harness.analyze_json(path))

    def test_options_equal_the_command_line(self):
        paths = [os.path.join(harness.TINY, "gqa"), os.path.join(harness.TINY, "mha")]
        result = kvrank.analyze(paths, repr="qk,ov", layers=[0, 1], labels=["a"],
                                similarity=True, with_baseline=True, threads=1)
        expected = harness.analyze_json(*paths, "--repr", "qk,ov", "--layers", "0-1",
                                        "--label", "a", "--similarity", "--with-baseline",
                                        "--threads", "1")
        self.assertEqual(result.to_dict(), expected)
        self.assertEqual(result.labels, ["a", "a", "mha", "mha", "Fully redundant"])
        shard = kvrank.analyze(paths[0], layer_shard="1/2")
        self.assertEqual(shard.to_dict(), harness.analyze_json(paths[0], "--layer-shard", "1/2"))
        stepped = kvrank.analyze(paths, steps=[100, 200])
        self.assertEqual(stepped.to_dict(),
                         harness.analyze_json(*paths, "--step", "100", "--step", "200"))
        self.assertEqual([model["step"] for model in stepped.to_dict()["models"]], [100, 200])

    def test_csv_forms_equal_the_command_line(self):
        paths = [os.path.join(harness.TINY, "gqa"), os.path.join(harness.TINY, "mha")]
        result = kvrank.analyze(paths, repr="qk,ov")
        for form, flags in (({}, ["--format", "csv"]),
                            ({"summary": True}, ["--format", "csv", "--summary"]),
                            ({"sep": "\t"}, ["--format", "tsv"]),
                            ({"summary": True, "sep": "\t"}, ["--format", "tsv", "--summary"])):
            with self.subTest(flags=flags):
                proc = harness.run("analyze", *paths, "--repr", "qk,ov", *flags)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(result.to_csv(**form), proc.stdout)
        with self.assertRaisesRegex(kvrank.Error, "sep must be"):
            result.to_csv(sep=";")

    def test_attention_equals_the_command_line(self):
        """t5: encoder self-attention, decoder self- and cross-attention; --attention picks."""
        folder = self.path("t5")
        write_encoder_checkpoints.write_encoder("t5", folder, 0, "F32")
        tensors, config = read_state_dict(folder)
        labels = {}
        for attention in ("self", "cross"):
            with self.subTest(attention=attention):
                want = harness.analyze_json(folder, "--attention", attention)
                self.assertEqual(kvrank.analyze(folder, attention=attention).to_dict(), want)
                got = kvrank.analyze_state_dict(tensors, config, label="t5", attention=attention)
                self.assertEqual(without_path(got.to_dict()), without_path(want))
                labels[attention] = got.labels
        self.assertEqual(labels["cross"], ["t5 [decoder cross]"])
        self.assertEqual(len(labels["self"]), 2)  # the encoder's and the decoder's

    def test_fold_input_norm_equals_the_command_line(self):
        folder = self.path("qwen3")
        write_family_checkpoints.write_family("qwen3", folder, self.path("ref"), layers=2,
                                              heads=4, kv_heads=2, head_dim=8, d_model=32)
        with_input_norm(folder, 0)
        tensors, config = read_state_dict(folder)
        want = harness.analyze_json(folder, "--repr", "qk,ov", "--fold-input-norm")
        folded = kvrank.analyze(folder, repr="qk,ov", fold_input_norm=True).to_dict()
        self.assertEqual(folded, want)
        in_memory = kvrank.analyze_state_dict(tensors, config, label="qwen3", repr="qk,ov",
                                              fold_input_norm=True).to_dict()
        self.assertEqual(without_path(in_memory), without_path(want))
        # the gains far from 1 move the numbers: the option was not ignored
        self.assertNotEqual(kvrank.analyze(folder, repr="qk,ov").to_dict()["models"],
                            folded["models"])

    def test_every_synthetic_family_equals_the_command_line(self):
        for family in SYNTH_FAMILIES:
            with self.subTest(family=family):
                folder = synth(self.path(family), family)
                for repr_name in ("qk", "ov"):
                    self.assertEqual(kvrank.analyze(folder, repr=repr_name).to_dict(),
                                     harness.analyze_json(folder, "--repr", repr_name))

    def test_every_writer_family_equals_the_command_line(self):
        """tests/writers/' checkpoints: files and the same tensors in memory."""
        for name, folder in writer_checkpoints(self.dir).items():
            with self.subTest(family=name):
                heads = WRITER_HEADS.get(name)
                want = harness.analyze_json(folder, *(["--heads", heads] if heads else []))
                self.assertEqual(kvrank.analyze(folder, heads=heads).to_dict(), want)
                tensors, config = read_state_dict(folder)
                got = without_path(kvrank.analyze_state_dict(tensors, config, label=name,
                                                             heads=heads).to_dict())
                want = without_path(want)
                if name == "kvonly":
                    for model in got["models"] + want["models"]:
                        model.pop("family")
                self.assertEqual(got, want)

    def test_state_dict_step_equals_the_command_line(self):
        folder = synth(self.path("m"), "llama")
        tensors, config = read_state_dict(folder)
        got = kvrank.analyze_state_dict(tensors, config, label="m", step=42,
                                        layer_shard="1/2").to_dict()
        self.assertEqual(got["models"][0]["step"], 42)
        self.assertEqual(without_path(got), without_path(
            harness.analyze_json(folder, "--step", "42", "--layer-shard", "1/2")))
        for bad, message in ((-1, "^step: must be 0 or more, found -1$"),
                             (1.5, "^step: expected a whole number"),
                             ("7", "^step: expected a whole number")):
            with self.subTest(step=bad):
                with self.assertRaisesRegex(kvrank.Error, message):
                    kvrank.analyze_state_dict(tensors, config, step=bad)

    def test_to_pandas_without_torch(self):
        paths = [os.path.join(harness.TINY, "gqa"), os.path.join(harness.TINY, "mha")]
        result = kvrank.analyze(paths, repr="qk,ov")
        try:
            table = result.to_pandas()
        except ImportError:
            self.fail("pandas is missing (Debian: python3-pandas, scripts/setup.sh)")
        self.assertNotIn("torch", sys.modules)  # numpy and pandas only
        for column in ("label", "step", "source", "family", "variant", "repr", "layer", "erank",
                       "erank_centered", "mean_similarity"):
            self.assertIn(column, table.columns)
        document = result.to_dict()["models"]
        self.assertEqual(len(document), 4)  # 2 models × 2 representations
        self.assertEqual(len(table), sum(len(model["layers"]) for model in document))
        for model in document:
            rows = table[(table["label"] == model["label"]) & (table["repr"] == model["repr"])]
            self.assertEqual(list(rows["layer"]), [layer["layer"] for layer in model["layers"]])
            for (_, row), layer in zip(rows.iterrows(), model["layers"]):
                self.assertTrue(harness.close(row["erank"], layer["erank"]))
        summary = result.to_pandas(summary=True)
        self.assertEqual(sorted(zip(summary["label"], summary["repr"])),
                         [("gqa", "ov"), ("gqa", "qk"), ("mha", "ov"), ("mha", "qk")])

    def test_state_dict_of_every_family_equals_the_command_line(self):
        """numpy arrays in memory go through the same family detection as the files."""
        for family in SYNTH_FAMILIES:
            for dtype in ("f32", "f16"):
                with self.subTest(family=family, dtype=dtype):
                    folder = synth(self.path(f"{family}-{dtype}"), family, dtype=dtype)
                    tensors, config = read_state_dict(folder)
                    result = kvrank.analyze_state_dict(tensors, config,
                                                       label=os.path.basename(folder))
                    self.assertEqual(without_path(result.to_dict()),
                                     without_path(harness.analyze_json(folder)))
                    self.assertEqual(result.to_dict()["models"][0]["path"], "<in memory>")

    def test_numbers_equal_the_reference(self):
        """Independent of the command line: scripts/reference.py's naive float64 metric."""
        path = os.path.join(harness.TINY, "gqa")
        for repr_name in ("qk", "ov"):
            layers = kvrank.analyze(path, repr=repr_name).to_dict()["models"][0]["layers"]
            expected = reference.cmd_llama(path, repr_name)
            self.assertEqual(len(layers), len(expected))
            for got, want in zip(layers, expected):
                for metric in ("erank", "erank_centered", "mean_similarity"):
                    self.assertTrue(harness.close(got[metric], want[metric]),
                                    (repr_name, got["layer"], metric, got[metric], want[metric]))

    def test_loads_its_libraries_only_from_their_folders(self):
        # As the command (e2e test_cli): the extension's search path once reached the current
        # folder, so `import kvrank` failed in a folder holding a file named libz.so.1.
        extension = kvrank._kvrank.__file__
        self.assertIn("libz.so.1", harness.plant_decoy_libraries(extension, self.dir))
        probe = "import kvrank, sys; print(len(kvrank.analyze(sys.argv[1]).to_dict()['models']))"
        proc = subprocess.run([sys.executable, "-c", probe, os.path.join(harness.TINY, "gqa")],
                              capture_output=True, text=True, cwd=self.dir)
        self.assertEqual((proc.returncode, proc.stdout), (0, "1\n"), proc.stderr)

    def test_errors_are_kvrank_error_with_the_command_line_message(self):
        tiny = os.path.join(harness.TINY, "gqa")
        cases = [
            (lambda: kvrank.analyze(self.path("missing")), ["analyze", self.path("missing")]),
            (lambda: kvrank.analyze(tiny, repr="xy"), ["analyze", tiny, "--repr", "xy"]),
            (lambda: kvrank.analyze(tiny, layers="3-1"), ["analyze", tiny, "--layers", "3-1"]),
            (lambda: kvrank.analyze(tiny, layers=[99]), ["analyze", tiny, "--layers", "99"]),
            (lambda: kvrank.analyze(tiny, labels=["a", "b"]),
             ["analyze", tiny, "--label", "a", "--label", "b"]),
            (lambda: kvrank.analyze(tiny, family="nosuch"), ["analyze", tiny, "--family", "nosuch"]),
            (lambda: kvrank.analyze(tiny, attention="both"), ["analyze", tiny, "--attention", "both"]),
            (lambda: kvrank.analyze(tiny, attention="cross"),
             ["analyze", tiny, "--attention", "cross"]),
            (lambda: kvrank.analyze(tiny, steps=[1, 2]),
             ["analyze", tiny, "--step", "1", "--step", "2"]),
            (lambda: kvrank.inspect(self.path("missing")), ["inspect", self.path("missing")]),
        ]
        for call, args in cases:
            with self.subTest(args=args[2:]):
                with self.assertRaises(kvrank.Error) as raised:
                    call()
                # The command line's message, naming the keywords: repr= for --repr.
                self.assertEqual(str(raised.exception), python_words(cli_error(*args)))
        self.assertTrue(issubclass(kvrank.Error, Exception))

    def test_state_dict_errors(self):
        tensors, config = read_state_dict(synth(self.path("m"), "llama"))
        name = "model.layers.0.self_attn.q_proj.weight"  # read: its problems are errors
        bad = [
            (dict(tensors, **{name: tensors[name].astype(numpy.complex64)}), "unsupported dtype"),
            (dict(tensors, **{name: [1.0, 2.0]}), "expected a numpy array"),
        ]
        for state_dict, message in bad:
            with self.subTest(message=message):
                with self.assertRaisesRegex(kvrank.Error, "<in memory>: .*" + message):
                    kvrank.analyze_state_dict(state_dict, config)
        with self.assertRaisesRegex(kvrank.Error, "^config: field \"num_attention_heads\""):
            kvrank.analyze_state_dict(tensors, dict(config, num_attention_heads="eight"))
        for value in (float("nan"), float("inf"), object()):
            with self.subTest(config_value=value):
                with self.assertRaisesRegex(kvrank.Error, "^config: not a JSON document"):
                    kvrank.analyze_state_dict(tensors, dict(config, rope_theta=value))

    def test_inspect_equals_the_command_line(self):
        path = os.path.join(harness.TINY, "mla")
        proc = harness.run("inspect", path, "--format", "json")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(kvrank.inspect(path), json.loads(proc.stdout))

    def test_check_equals_the_command_line(self):
        path = os.path.join(harness.TINY, "gqa")
        current = kvrank.analyze(path)
        golden = current.to_dict()
        golden["models"][0]["layers"][1]["erank"] += 0.5
        golden_path = self.path("golden.json")
        with open(golden_path, "w") as f:
            json.dump(golden, f)
        current.save(self.path("current.json"))
        proc = harness.run("check", self.path("current.json"), "--baseline", golden_path)
        self.assertEqual(proc.returncode, 1)
        found = kvrank.check(current, golden_path)
        self.assertFalse(found)
        self.assertEqual([(v["layer"], v["metric"]) for v in found.violations], [(1, "erank")])
        self.assertIn(str(found), proc.stdout)
        self.assertTrue(kvrank.check(self.path("current.json"), current))

    def test_plot_equals_the_command_line(self):
        path = os.path.join(harness.TINY, "gqa")
        result = kvrank.analyze(path, similarity=True)
        result.save(self.path("gqa.json"))
        for extra, keywords in (([], {}), (["--heatmap", "1"], dict(heatmap=1)),
                                (["--heatmap", "1", "--colour-map", "greys"],
                                 dict(heatmap=1, colour_map="greys")),
                                (["--heatmap", "1", "--head-order", "cluster"],
                                 dict(heatmap=1, head_order="cluster"))):
            with self.subTest(extra=extra):
                proc = harness.run("plot", self.path("gqa.json"), "-o", self.path("cli.svg"), *extra)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                svg = kvrank.plot(self.path("gqa.json"), self.path("py.svg"), **keywords)
                with open(self.path("cli.svg")) as f:
                    self.assertEqual(svg, f.read())
                with open(self.path("py.svg")) as f:
                    self.assertEqual(svg, f.read())
        with self.assertRaises(kvrank.Error) as raised:
            kvrank.plot(result, heatmap=1, head_order="random")
        self.assertEqual(str(raised.exception),
                         'head_order: expected index or cluster, found "random"')

    def plot_both(self, inputs, flags, **options):
        """`kvrank plot INPUTS FLAGS` and kvrank.plot(INPUTS, **options): both SVGs."""
        proc = harness.run("plot", *inputs, "-o", self.path("cli.svg"), *flags)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(self.path("cli.svg")) as f:
            return f.read(), kvrank.plot(inputs, **options)

    def test_plot_over_steps_equals_the_command_line(self):
        tensors, config = read_state_dict(synth(self.path("m"), "llama"))
        steps = kvrank.concat(kvrank.analyze_state_dict(tensors, config, label=f"step {step}",
                                                        step=step) for step in (0, 10, 20))
        steps.save(self.path("trajectory.json"))
        for kind in ("layers", "mean", "heatmap"):
            with self.subTest(kind=kind):
                cli, py = self.plot_both([self.path("trajectory.json")], ["--over-steps", kind],
                                         over_steps=kind)
                self.assertEqual(py, cli)
                self.assertEqual(kvrank.plot(("trajectory", steps), over_steps=kind), cli)
        # Several inputs draw together (test_runs.py); the same run twice holds each step twice.
        two = [self.path("trajectory.json")] * 2
        with self.assertRaisesRegex(kvrank.Error, "^trajectory \\+ trajectory: run \"in memory\" "
                                    "\\(qk\\) holds two checkpoints of step 0"):
            kvrank.plot(two, over_steps="layers")
        kvrank.analyze(os.path.join(harness.TINY, "gqa")).save(self.path("gqa.json"))
        with self.assertRaisesRegex(kvrank.Error, "has no training step"):
            kvrank.plot(self.path("gqa.json"), over_steps="layers")

    def test_plot_figure_options_equal_the_command_line(self):
        inputs = []
        for model in ("gqa", "mha"):
            inputs.append(self.path(model + ".json"))
            kvrank.analyze(os.path.join(harness.TINY, model), repr="qk,ov").save(inputs[-1])
        with open(self.path("style.json"), "w") as f:
            json.dump({"gqa": {"colour": "#ff0000", "marker": "square", "dash": "dashed"}}, f)
        cases = [
            (["--panel-title", "A", "--panel-title", "B", "--size", "column", "--height", "3",
              "--font-size", "7", "--cols", "2", "--share-y", "--ylim", "0,9", "--legend",
              "right", "--style", self.path("style.json"), "--title", "T", "--metric",
              "erank_centered"],
             dict(panel_titles=["A", "B"], size="column", height=3, font_size=7, cols=2,
                  share_y=True, ylim=(0, 9), legend="right", style=self.path("style.json"),
                  title="T", metric="erank_centered")),
            (["--width", "5", "--size", "page", "--legend", "none", "--ylim", "1,8"],
             dict(width=5.0, size="page", legend="none", ylim="1,8")),
        ]
        for flags, options in cases:
            with self.subTest(flags=flags):
                cli, py = self.plot_both(inputs, flags, **options)
                self.assertEqual(py, cli)
        errors = [(dict(panel_titles=["A", "B", "C"]), "panel_titles: 3 given for 2 input(s)"),
                  (dict(width=0.1), "width: expected 0.5 to 100, found 0.1"),
                  (dict(dpi=5), "dpi: expected 10 to 2400, found 5"),
                  (dict(cols=0), "cols: expected 1 to 1000, found 0"),
                  (dict(legend="left"), "legend: expected below, right, inside or none"),
                  (dict(ylim=(3, 1)), "ylim: LOW must be below HIGH")]
        for options, message in errors:
            with self.subTest(options=options):
                with self.assertRaises(kvrank.Error) as raised:
                    kvrank.plot(inputs, self.path("x.svg"), **options)
                self.assertTrue(str(raised.exception).startswith(message), str(raised.exception))

    @unittest.skipUnless(shutil.which("rsvg-convert"), "rsvg-convert is not installed")
    def test_plot_png_dpi_equals_the_command_line(self):
        path = self.path("gqa.json")
        kvrank.analyze(os.path.join(harness.TINY, "gqa")).save(path)
        proc = harness.run("plot", path, "-o", self.path("cli.png"), "--dpi", "40")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        kvrank.plot(path, self.path("py.png"), dpi=40)
        with open(self.path("cli.png"), "rb") as cli, open(self.path("py.png"), "rb") as py:
            self.assertEqual(py.read(), cli.read())

    def test_gil_is_released(self):
        folder = synth(self.path("big"), "llama", layers=300, heads=8, head_dim=16)
        ticks = []
        stop = threading.Event()

        def count():  # runs only while analyze has let go of the GIL
            while not stop.is_set():
                ticks.append(1)
                time.sleep(0.001)

        counter = threading.Thread(target=count)
        counter.start()
        whole = kvrank.analyze(folder, threads=1)
        stop.set()
        counter.join()
        self.assertEqual(len(whole.to_dict()["models"][0]["layers"]), 300)
        self.assertGreater(len(ticks), 10, "the counter thread never ran: the GIL was held")

    def interrupted_layers(self, call):
        """Runs call(progress) with Ctrl-C (SIGINT) sent from another thread once the first layer
        is done — so it arrives while the library computes, and only if the GIL was let go.
        Asserts KeyboardInterrupt; returns the layers done by then."""
        first, finished = threading.Event(), threading.Event()
        done = []

        def progress(label, layer, total):
            done.append(layer)
            first.set()

        def interrupt():
            if first.wait(120) and not finished.is_set():
                os.kill(os.getpid(), signal.SIGINT)

        sender = threading.Thread(target=interrupt)
        sender.start()
        try:
            with self.assertRaises(KeyboardInterrupt):
                call(progress)
        finally:
            finished.set()
            first.set()
            sender.join()
        return done

    def test_ctrl_c_interrupts(self):
        folder = synth(self.path("big"), "llama", layers=300, heads=8, head_dim=16)
        tensors, config = read_state_dict(folder)
        calls = {
            "files, 1 thread": lambda progress: kvrank.analyze(folder, threads=1,
                                                              progress=progress),
            "files, 2 threads": lambda progress: kvrank.analyze(folder, threads=2,
                                                               progress=progress),
            "in memory, 2 threads": lambda progress: kvrank.analyze_state_dict(
                tensors, config, threads=2, progress=progress),
        }
        for name, call in calls.items():
            with self.subTest(name):
                self.assertLess(len(self.interrupted_layers(call)), 300)


if __name__ == "__main__":
    harness.main_unittest()
