#!/usr/bin/env python3
"""The Python module's kvrank.diff: the same document as `kvrank diff --format json`, its figure,
result files, and errors as kvrank.Error with the command line's message.

  python3 python/tests/test_diff.py build/kvrank   (ctest: python.test_diff, PYTHONPATH set)
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402

import kvrank  # noqa: E402

STEPS = os.path.join(ROOT, "data", "tiny-steps", "mha")
BASE, LATER = os.path.join(STEPS, "checkpoint-0"), os.path.join(STEPS, "checkpoint-60")


class DiffTest(harness.TestCase):
    def test_the_document_of_the_command_line(self):
        document = kvrank.diff(BASE, LATER, repr="qk,ov", layers=[0, 2], top=4)
        command = json.loads(harness.run("diff", BASE, LATER, "--layers", "0,2", "--top", "4",
                                         "--format", "json").stdout)
        self.assertEqual(document, command)
        self.assertTrue(document["heads_compared"])

    def test_figure_and_result_files(self):
        figure = self.path("heads.svg")
        kvrank.diff(BASE, LATER, repr="qk", figure=figure)
        with open(figure) as f:
            self.assertEqual(f.read().count('class="cell"'), 4 * 8)
        kvrank.diff(BASE, LATER, repr="qk", figure=figure, colour_map="greys")  # --colour-map
        with open(figure) as f:
            self.assertIn('data-colour-map="greys"', f.read())
        with self.assertRaises(kvrank.Error) as raised:
            kvrank.diff(BASE, LATER, figure=self.path("no.svg"), colour_map="jet")
        self.assertEqual(str(raised.exception),
                         'colour_map: expected viridis, rdbu or greys, found "jet"')
        a = self.path("a.json")
        self.assertEqual(harness.run("analyze", BASE, "-o", a).returncode, 0)
        self.assertFalse(kvrank.diff(a, a)["heads_compared"])
        with self.assertRaisesRegex(kvrank.Error, "figure"):
            kvrank.diff(a, a, figure=self.path("no.svg"))
        self.assertFalse(os.path.exists(self.path("no.svg")))

    def test_errors_are_the_command_lines(self):
        with self.assertRaisesRegex(kvrank.Error, "kv_heads 8 vs 2"):
            kvrank.diff(os.path.join(ROOT, "data", "tiny", "mha"),
                        os.path.join(ROOT, "data", "tiny", "gqa"))
        # Python checks the type; the range is the request's (DiffRequest::validate), in Python's
        # words.
        for top, message in ((-1, "top: must be 0 to 100000, found -1"),
                             (100001, "top: must be 0 to 100000, found 100001"),
                             (2**40, "top: 1099511627776 is out of range (at most 2147483647)"),
                             (1.5, "top: expected a whole number, found 1.5"),
                             (True, "top: expected a whole number, found True")):
            with self.subTest(top=top):
                with self.assertRaises(kvrank.Error) as raised:
                    kvrank.diff(BASE, LATER, top=top)
                self.assertEqual(str(raised.exception), message)


if __name__ == "__main__":
    harness.main_unittest()
