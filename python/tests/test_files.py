#!/usr/bin/env python3
"""The Python module on files: the same numbers and documents as the command line (data/tiny and
a synthetic checkpoint of every family), the reference metric on a Llama checkpoint, errors as
kvrank.Error with the command line's message, inspect/check/plot, in-memory numpy state dicts of
every family, the GIL released while computing, and Ctrl-C.

  python3 python/tests/test_files.py build/kvrank   (ctest: python.test_files, PYTHONPATH set)
"""
import json
import os
import signal
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402
import numpy  # noqa: E402

import kvrank  # noqa: E402
import reference  # noqa: E402  (scripts/, put on the path by harness)

SYNTH_FAMILIES = ["llama", "gpt2", "gpt_neox", "falcon", "phi3", "deepseek_v2", "lrkv"]
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


def synth(folder, family, **options):
    args = ["synth", "--family", family, "-o", folder, "--seed", "3"]
    for name, value in options.items():
        args += ["--" + name.replace("_", "-"), value]
    proc = harness.run(*args)
    assert proc.returncode == 0, proc.stderr
    return folder


def read_state_dict(folder):
    """A synthetic checkpoint's tensors as numpy arrays as they are stored (F32/F16), and its
    config — what a user holding the same weights in memory would pass."""
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    tensors = {}
    for name in sorted(os.listdir(folder)):
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
    """The result document with each model's path left out (files and memory differ there)."""
    document = json.loads(json.dumps(document))
    for model in document["models"]:
        model.pop("path")
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

    def test_every_synthetic_family_equals_the_command_line(self):
        for family in SYNTH_FAMILIES:
            with self.subTest(family=family):
                folder = synth(self.path(family), family)
                for repr_name in ("qk", "ov"):
                    self.assertEqual(kvrank.analyze(folder, repr=repr_name).to_dict(),
                                     harness.analyze_json(folder, "--repr", repr_name))

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
            (lambda: kvrank.inspect(self.path("missing")), ["inspect", self.path("missing")]),
        ]
        for call, args in cases:
            with self.subTest(args=args[2:]):
                with self.assertRaises(kvrank.Error) as raised:
                    call()
                self.assertEqual(str(raised.exception), cli_error(*args))
        self.assertTrue(issubclass(kvrank.Error, Exception))

    def test_state_dict_errors(self):
        tensors, config = read_state_dict(synth(self.path("m"), "llama"))
        name = sorted(tensors)[0]
        bad = [
            (dict(tensors, **{name: tensors[name].T}), "not contiguous"),
            (dict(tensors, **{name: tensors[name].astype(numpy.complex64)}), "unsupported dtype"),
            (dict(tensors, **{name: [1.0, 2.0]}), "expected a numpy array"),
        ]
        for state_dict, message in bad:
            with self.subTest(message=message):
                with self.assertRaisesRegex(kvrank.Error, "<in memory>: .*" + message):
                    kvrank.analyze_state_dict(state_dict, config)
        with self.assertRaisesRegex(kvrank.Error, "^config: field \"num_attention_heads\""):
            kvrank.analyze_state_dict(tensors, dict(config, num_attention_heads="eight"))

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
        for extra in ([], ["--heatmap", "1"]):
            with self.subTest(extra=extra):
                proc = harness.run("plot", self.path("gqa.json"), "-o", self.path("cli.svg"), *extra)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                svg = kvrank.plot(self.path("gqa.json"), self.path("py.svg"),
                                  heatmap=int(extra[1]) if extra else None)
                with open(self.path("cli.svg")) as f:
                    self.assertEqual(svg, f.read())
                with open(self.path("py.svg")) as f:
                    self.assertEqual(svg, f.read())

    def test_gil_is_released_and_ctrl_c_interrupts(self):
        folder = synth(self.path("big"), "llama", layers=300, heads=8, head_dim=16)
        ticks = []
        stop = threading.Event()

        def count():  # runs only while analyze has let go of the GIL
            while not stop.is_set():
                ticks.append(1)
                time.sleep(0.001)

        counter = threading.Thread(target=count)
        counter.start()
        started = time.monotonic()
        whole = kvrank.analyze(folder, threads=1)
        duration = time.monotonic() - started
        stop.set()
        counter.join()
        self.assertEqual(len(whole.to_dict()["models"][0]["layers"]), 300)
        self.assertGreater(len(ticks), 10, "the counter thread never ran: the GIL was held")

        # Ctrl-C a quarter of the way through: KeyboardInterrupt, before the last layer.
        done = []
        timer = threading.Timer(duration / 4, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        with self.assertRaises(KeyboardInterrupt):
            kvrank.analyze(folder, threads=1, progress=lambda label, layer, total: done.append(layer))
        timer.join()
        self.assertLess(len(done), 300)


if __name__ == "__main__":
    harness.main_unittest()
