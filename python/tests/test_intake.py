#!/usr/bin/env python3
"""What the module takes, as a Python user passes it: every problem with an argument is a
kvrank.Error with one line in Python's words (`heads=`, never `--heads`, never pybind's
multi-line TypeError), numbers beyond any machine's included; numpy arrays kvrank never reads are
never touched, and the ones it reads are read whatever their layout (copied for their layer when
strided or big-endian). The torch side (modules, GPU and sparse tensors) is test_torch.py's.

  python3 python/tests/test_intake.py build/kvrank   (ctest: python.test_intake, PYTHONPATH set)
"""
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402
import numpy  # noqa: E402

import kvrank  # noqa: E402
from test_files import read_state_dict, synth  # noqa: E402  (python/tests/)

TINY = os.path.join(harness.TINY, "gqa")
Q = "model.layers.0.self_attn.q_proj.weight"


class IntakeTest(harness.TestCase):
    def setUp(self):
        super().setUp()
        self.tensors, self.config = read_state_dict(synth(self.path("m"), "llama"))

    def error(self, call):
        with self.assertRaises(kvrank.Error) as raised:
            call()
        message = str(raised.exception)
        self.assertNotIn("\n", message)
        self.assertNotRegex(message, r"--[a-z]", "a command-line option in a Python message")
        return message

    def test_messages_name_keywords(self):
        cases = [
            (lambda: kvrank.analyze_state_dict(self.tensors, None),
             "<in memory>: cannot tell the number of attention heads: neither the config nor a "
             "keyword gives it; pass heads= (and kv_heads=, head_dim= when they differ from the "
             "defaults)"),
            (lambda: kvrank.analyze(TINY, threads=99999),
             "threads=99999: at most {} (4 × the {} processors of this machine)"),
            (lambda: kvrank.analyze(TINY, repr="xy"),
             'repr: expected qk, ov, k or v, found "xy"'),
            (lambda: kvrank.analyze(TINY, steps=[1, 2]), "steps: 2 given for 1 input(s)"),
            (lambda: kvrank.analyze(TINY, labels=["a", "b"]), "labels: 2 given for 1 input(s)"),
            (lambda: kvrank.analyze(TINY, family="nosuch"), "family: expected a family (llama, "),
            (lambda: kvrank.plot(kvrank.analyze(TINY), over_steps="sideways"),
             'over_steps: expected layers, mean or heatmap, found "sideways"'),
            # Ranges are the request's to check (Python checks only the type), in Python's words.
            (lambda: kvrank.analyze(TINY, heads=0), "heads: must be 1 or more, found 0"),
            (lambda: kvrank.analyze(TINY, steps=[-1]), "steps: must be 0 or more, found -1"),
            (lambda: kvrank.plot(kvrank.analyze(TINY), dpi=-1), "dpi: expected 10 to 2400"),
            (lambda: kvrank.plot(kvrank.analyze(TINY), cols=0), "cols: expected 1 to 1000"),
            (lambda: kvrank.plot(kvrank.analyze(TINY), heatmap=-1),
             "heatmap: must be a layer index, 0 or more, found -1"),
            (lambda: kvrank.plot(kvrank.analyze(TINY), width=float("nan")),
             "width: expected 0.5 to 100, found nan"),
            # check's tolerances: one rule, the library's (report/check.hpp).
            (lambda: kvrank.check(kvrank.analyze(TINY), kvrank.analyze(TINY), abs_tol=math.nan),
             "abs_tol: must be a finite number, 0 or more, found nan"),
            (lambda: kvrank.check(kvrank.analyze(TINY), kvrank.analyze(TINY), abs_tol=math.inf),
             "abs_tol: must be a finite number, 0 or more, found inf"),
            (lambda: kvrank.check(kvrank.analyze(TINY), kvrank.analyze(TINY), rel_tol=-1),
             "rel_tol: must be a finite number, 0 or more, found -1"),
            (lambda: kvrank.check(kvrank.analyze(TINY), kvrank.analyze(TINY), metric=""),
             "metric: at least one metric is required"),
        ]
        for call, expected in cases:
            with self.subTest(expected=expected):
                message = self.error(call)
                if "{}" in expected:
                    processors = int(message.split("the ")[-1].split()[0])
                    expected = expected.format(4 * processors, processors)
                self.assertTrue(message.startswith(expected), message)

    def test_numbers_beyond_any_machine(self):
        """Python's ints have no limit; pybind's conversions do: these never reach them."""
        cases = [
            (lambda: kvrank.analyze(TINY, threads=2**40),
             "threads: 1099511627776 is out of range (at most 2147483647)"),
            (lambda: kvrank.analyze(TINY, steps=[2**70]),
             "steps: 1180591620717411303424 is out of range (at most 9223372036854775807)"),
            (lambda: kvrank.analyze_state_dict(self.tensors, self.config, step=2**63),
             "step: 9223372036854775808 is out of range (at most 9223372036854775807)"),
            (lambda: kvrank.analyze(TINY, heads=2**31),
             "heads: 2147483648 is out of range (at most 2147483647)"),
            (lambda: kvrank.analyze(TINY, layers=[2**40]), "layers: expected a whole number"),
            (lambda: kvrank.analyze(TINY, threads="2"),
             "threads: expected a whole number, found '2'"),
            (lambda: kvrank.analyze(TINY, threads=True), "threads: expected a whole number"),
            (lambda: kvrank.plot(TINY, dpi=2**40), "dpi: 1099511627776 is out of range (at most"),
            (lambda: kvrank.plot(TINY, width="wide"), "width: expected a number, found 'wide'"),
            (lambda: kvrank.plot(TINY, heatmap=2**40), "heatmap: 1099511627776 is out of range"),
            (lambda: kvrank.check(TINY, TINY, abs_tol="x"), "abs_tol: expected a number"),
            (lambda: kvrank.analyze(TINY, family=3), "family: expected text, found 3"),
            (lambda: kvrank.analyze(TINY, map=3), "map: expected a path, found 3"),
            (lambda: kvrank.analyze(TINY, progress=3), "progress: expected a function"),
            (lambda: kvrank.analyze(3), "paths: expected a list, found 3"),
        ]
        for call, expected in cases:
            with self.subTest(expected=expected):
                message = self.error(call)
                self.assertTrue(message.startswith(expected), message)

    def test_arrays_never_read_are_never_touched(self):
        clean = kvrank.analyze_state_dict(self.tensors, self.config, repr="qk,ov").to_dict()
        untouched = dict(self.tensors, **{
            "model.layers.0.mlp.up_proj.weight": numpy.ones((4, 6), numpy.float32).T,
            "model.layers.0.mlp.down_proj.weight": numpy.zeros(3, numpy.complex64),
            "model.layers.1.mlp.up_proj.weight": numpy.array(["text"]),
            "model.layers.1.mlp.down_proj.weight": numpy.ones(3, ">f4"),
            "model.layers.1.mlp._extra_state": None,
        })
        self.assertEqual(
            kvrank.analyze_state_dict(untouched, self.config, repr="qk,ov").to_dict(), clean)

    def test_arrays_read_whatever_their_layout(self):
        clean = kvrank.analyze_state_dict(self.tensors, self.config, repr="qk,ov").to_dict()
        layouts = {
            "strided": lambda t: numpy.asfortranarray(t),
            "big-endian": lambda t: t.astype(t.dtype.newbyteorder(">")),
            "every other row": lambda t: numpy.repeat(t, 2, axis=0)[::2],
        }
        for name, layout in layouts.items():
            with self.subTest(layout=name):
                changed = {key: layout(t) if "self_attn" in key else t
                           for key, t in self.tensors.items()}
                self.assertNotEqual(changed[Q].flags["C_CONTIGUOUS"] and
                                    changed[Q].dtype.isnative, True)
                got = kvrank.analyze_state_dict(changed, self.config, repr="qk,ov").to_dict()
                self.assertEqual(got, clean)


if __name__ == "__main__":
    harness.main_unittest()
