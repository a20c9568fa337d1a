#!/usr/bin/env python3
"""Training runs in memory: analyze_state_dict(run=, step=) and analyze(runs=) name the run a
measurement belongs to; a Tracker measures one run every N steps; plot(over_steps=…) draws one
panel (layers) or line (mean) per run under its name, several runs in one figure, the same as
`kvrank plot` draws from the saved file; and a curve plot holding one label at several steps
draws each as its own series (the step in the legend), or refuses as `check` does — never two
series drawn as one.

  python3 python/tests/test_runs.py build/kvrank   (ctest: python.test_runs, PYTHONPATH set)
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402
import numpy  # noqa: E402

import kvrank  # noqa: E402
from test_files import read_state_dict, synth  # noqa: E402  (python/tests/)


def titles(svg):
    return re.findall(r'<g class="panel" data-title="([^"]*)"', svg)


def legend(svg):
    """The legend's entries, less the fully-redundant reference line."""
    return [label for label in re.findall(r'<g class="legend-entry" data-label="([^"]*)"', svg)
            if label != "Fully redundant"]


def series(svg):
    return re.findall(r'<path class="series" data-label="([^"]*)"', svg)


class RunsTest(harness.TestCase):
    def setUp(self):
        super().setUp()
        self.tensors, self.config = read_state_dict(synth(self.path("m"), "llama"))

    def trained(self, step, seed=0):
        """The model "after `step` steps": its attention weights nudged by step-dependent noise."""
        noise = numpy.random.default_rng(seed * 1000 + step)
        return {name: (t + 0.02 * step * noise.standard_normal(t.shape)).astype(t.dtype)
                if "self_attn" in name else t for name, t in self.tensors.items()}

    def tracked(self, run, seed):
        tracker = kvrank.Tracker(self.config, run=run, every=10, repr="qk")
        for step in range(31):
            measured = tracker.measure(self.trained(step, seed), step)
            self.assertEqual(measured is None, step % 10 != 0)
        return tracker

    def test_two_runs_over_steps_from_python_and_from_the_file(self):
        baseline, variant = self.tracked("mha-baseline", 1), self.tracked("mha-variant", 2)
        self.assertEqual(baseline.steps, [0, 10, 20, 30])
        document = baseline.results.to_dict()
        self.assertEqual([(m["label"], m["run"], m["step"]) for m in document["models"]],
                         [(f"mha-baseline step {s}", "mha-baseline", s) for s in (0, 10, 20, 30)])
        both = kvrank.concat([baseline.results, variant.results])
        both.save(self.path("both.json"))
        for kind in ("layers", "mean", "heatmap"):
            with self.subTest(kind=kind):
                svg = kvrank.plot([baseline, variant], over_steps=kind)
                named = legend(svg) if kind == "mean" else titles(svg)
                if kind != "heatmap":
                    self.assertEqual(named, ["mha-baseline", "mha-variant"])
                self.assertNotIn('"."', svg)
                # The command line draws the same from the saved file: the run is recorded.
                proc = harness.run("plot", self.path("both.json"), "--over-steps", kind, "-o",
                                   self.path("cli.svg"))
                self.assertEqual(proc.returncode, 0, proc.stderr)
                with open(self.path("cli.svg")) as f:
                    self.assertEqual(f.read(), kvrank.plot(("both", both), over_steps=kind))
                if kind != "mean":  # the mean's one panel is titled after its input
                    self.assertEqual(kvrank.plot(both, over_steps=kind), svg)
        self.assertEqual(len(baseline.to_pandas()), 4 * 4)  # 4 measurements × 4 layers
        self.assertEqual(baseline.plot(), kvrank.plot(baseline.results, over_steps="layers"))

    def test_unnamed_in_memory_runs(self):
        """Without run=, a model in memory belongs to the run "in memory" (never ".")."""
        steps = kvrank.concat(kvrank.analyze_state_dict(self.trained(step), self.config, step=step)
                              for step in (0, 5))
        self.assertEqual([m["run"] for m in steps.to_dict()["models"]], ["in memory"] * 2)
        self.assertEqual(steps.labels, ["model step 0", "model step 5"])
        self.assertEqual(titles(kvrank.plot(steps, over_steps="layers")), ["in memory"])
        self.assertEqual(kvrank.analyze_state_dict(self.tensors, self.config).labels, ["model"])

    def test_runs_of_files(self):
        paths = sorted(glob.glob(os.path.join(ROOT, "data", "tiny-steps", "*", "checkpoint-*")))
        self.assertGreaterEqual(len(paths), 2)
        result = kvrank.analyze(paths[:2], runs=["first", "second"])
        self.assertEqual([m["run"] for m in result.to_dict()["models"]], ["first", "second"])
        unnamed = kvrank.analyze(paths[:1]).to_dict()["models"][0]
        self.assertNotIn("run", unnamed)  # a file's run is its folder's, as before
        with self.assertRaisesRegex(kvrank.Error, r"^runs: 3 given for 2 input\(s\)$"):
            kvrank.analyze(paths[:2], runs=["a", "b", "c"])

    def test_one_label_at_several_steps_draws_distinct_series(self):
        """The trajectory of one label: one series per step, the step in the legend — from
        Python and from the file; `check` compares by label and refuses the file."""
        trajectory = kvrank.concat(
            kvrank.analyze_state_dict(self.trained(step), self.config, label="model", step=step)
            for step in (0, 10, 20))
        svg = kvrank.plot(trajectory)
        expected = ["model (step 0)", "model (step 10)", "model (step 20)"]
        self.assertEqual(series(svg), expected)
        self.assertEqual(legend(svg), expected)
        trajectory.save(self.path("trajectory.json"))
        proc = harness.run("plot", self.path("trajectory.json"), "-o", self.path("cli.svg"))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(self.path("cli.svg")) as f:
            self.assertEqual(legend(f.read()), expected)
        # Two runs at one step under one label: the run tells them apart.
        runs = kvrank.concat(
            kvrank.analyze_state_dict(self.trained(5, seed), self.config, label="model", step=5,
                                      run=run) for seed, run in ((1, "a"), (2, "b")))
        self.assertEqual(legend(kvrank.plot(runs)), ["model (a)", "model (b)"])

    def test_models_nothing_tells_apart_are_refused_as_check_refuses(self):
        twice = kvrank.concat([kvrank.analyze_state_dict(self.trained(step), self.config,
                                                         label="model", step=3)
                               for step in (1, 2)])
        with self.assertRaises(kvrank.Error) as plotted:
            kvrank.plot(("twice", twice))
        with self.assertRaises(kvrank.Error) as checked:
            kvrank.check(twice, twice)
        message = 'two models labelled "model" with repr qk (labels must be unique to be compared)'
        self.assertEqual(str(plotted.exception), "twice: " + message)
        self.assertTrue(str(checked.exception).endswith(message), str(checked.exception))
        twice.save(self.path("twice.json"))
        proc = harness.run("plot", self.path("twice.json"), "-o", self.path("x.svg"))
        self.assertEqual(proc.returncode, 2)
        self.assertIn(message, proc.stderr)
        self.assertFalse(os.path.exists(self.path("x.svg")))

    def test_tracker_arguments(self):
        tracker = kvrank.Tracker(self.config, run="r", every=2)
        self.assertEqual(len(tracker.results), 0)  # nothing measured yet
        self.assertEqual(tracker.results.to_dict()["models"], [])
        for bad, message in ((dict(every=0), "^every: expected a whole number from 1"),
                             (dict(run=3), "^run: expected text, found 3")):
            with self.subTest(bad=bad):
                with self.assertRaisesRegex(kvrank.Error, message):
                    kvrank.Tracker(self.config, **bad)
        with self.assertRaisesRegex(kvrank.Error, "^step: expected a whole number, found 1.5"):
            tracker.measure(self.tensors, 1.5)
        self.assertIsNotNone(tracker.measure(self.tensors, 3, force=True))
        self.assertIn("1 measurement", repr(tracker))


if __name__ == "__main__":
    harness.main_unittest()
