#!/usr/bin/env python3
"""The Python functions leave their options' defaults to the library's requests: an option left
None gives what the command line gives without it, a value given explicitly still counts (the
command line's default included), and a bad value keeps its one-line message (the request's, in
Python's words). kvrank.plan's are in test_plan.py.

  python3 python/tests/test_defaults.py build/kvrank   (ctest: python.test_defaults, PYTHONPATH set)
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402

import kvrank  # noqa: E402
import test_files  # noqa: E402  (read_state_dict, without_path)
import write_encoder_checkpoints  # noqa: E402  (tests/writers/, put on the path by harness)

GQA = os.path.join(harness.TINY, "gqa")
STEPS = os.path.join(ROOT, "data", "tiny-steps", "mha")
BASE, LATER = os.path.join(STEPS, "checkpoint-0"), os.path.join(STEPS, "checkpoint-60")
# Every name the metric lists accept, as their messages list them.
METRICS = "erank, erank_pct, erank_centered, erank_centered_pct, mean_similarity or pcs_90"


class DefaultsTest(harness.TestCase):
    def assert_errors(self, call, cases):
        """call(**keywords) raises kvrank.Error with exactly `message`, for each (keywords,
        message) of `cases`."""
        for keywords, message in cases:
            with self.subTest(**{k: repr(v) for k, v in keywords.items()}):
                with self.assertRaises(kvrank.Error) as raised:
                    call(**keywords)
                self.assertEqual(str(raised.exception), message)

    def test_analyze(self):
        """attention and threads: on an encoder-decoder (t5), where --attention chooses."""
        folder = self.path("t5")
        write_encoder_checkpoints.write_encoder("t5", folder, 0, "F32")
        default = harness.analyze_json(folder)
        self.assertEqual(kvrank.analyze(folder).to_dict(), default)
        self.assertEqual(kvrank.analyze(folder, attention="all", threads=0).to_dict(), default)
        self.assertEqual(kvrank.analyze(folder, attention="cross", threads=1).to_dict(),
                         harness.analyze_json(folder, "--attention", "cross", "--threads", "1"))
        self.assertNotEqual(harness.analyze_json(folder, "--attention", "cross"), default)
        self.assert_errors(lambda **keywords: kvrank.analyze(GQA, **keywords), [
            (dict(attention="both"), 'attention: expected self, cross or all, found "both"'),
            (dict(attention=""), 'attention: expected self, cross or all, found ""'),
            (dict(attention=1), "attention: expected text, found 1"),
            (dict(threads=-1), "threads=-1: expected 0 (all cores) or more"),
            (dict(threads=1.5), "threads: expected a whole number, found 1.5"),
            (dict(threads=2**40), "threads: 1099511627776 is out of range (at most 2147483647)"),
        ])

    def test_analyze_state_dict(self):
        folder = self.path("t5")
        write_encoder_checkpoints.write_encoder("t5", folder, 0, "F32")
        tensors, config = test_files.read_state_dict(folder)

        def in_memory(**keywords):
            result = kvrank.analyze_state_dict(tensors, config, label="t5", **keywords)
            return test_files.without_path(result.to_dict())

        default = test_files.without_path(harness.analyze_json(folder, "--label", "t5"))
        self.assertEqual(in_memory(), default)
        self.assertEqual(in_memory(attention="all", threads=0), default)
        self.assertEqual(in_memory(attention="self", threads=1), test_files.without_path(
            harness.analyze_json(folder, "--label", "t5", "--attention", "self")))
        self.assert_errors(lambda **keywords: in_memory(**keywords), [
            (dict(attention="both"), 'attention: expected self, cross or all, found "both"'),
            (dict(threads=-1), "threads=-1: expected 0 (all cores) or more"),
        ])

    def diff_command(self, *flags):
        proc = harness.run("diff", BASE, LATER, "--format", "json", *flags)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)

    def test_diff(self):
        default = self.diff_command()
        self.assertEqual(kvrank.diff(BASE, LATER), default)
        self.assertEqual(kvrank.diff(BASE, LATER, attention="all", top=10), default)
        self.assertEqual(kvrank.diff(BASE, LATER, top=3), self.diff_command("--top", "3"))
        self.assertNotEqual(self.diff_command("--top", "3"), default)
        self.assert_errors(lambda **keywords: kvrank.diff(BASE, LATER, **keywords), [
            (dict(attention="both"), 'attention: expected self, cross or all, found "both"'),
            (dict(top=-1), "top: must be 0 to 100000, found -1"),
            (dict(top=1.5), "top: expected a whole number, found 1.5"),
        ])

    def check_both(self, current, golden, *flags, **keywords):
        """`kvrank check CURRENT --baseline GOLDEN FLAGS` and kvrank.check(…, **keywords): both
        pass or both fail, with the same table."""
        proc = harness.run("check", current, "--baseline", golden, *flags)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        found = kvrank.check(current, golden, **keywords)
        self.assertEqual(bool(found), proc.returncode == 0)
        self.assertIn(str(found), proc.stdout)
        return found

    def test_check(self):
        """Within the default abs_tol (0.05) in erank, beyond it in erank_centered: the default
        metrics compare both."""
        current = kvrank.analyze(GQA)
        golden = current.to_dict()
        golden["models"][0]["layers"][1]["erank"] += 0.04
        golden["models"][0]["layers"][1]["erank_centered"] += 0.5
        current.save(self.path("current.json"))
        with open(self.path("golden.json"), "w") as f:
            json.dump(golden, f)
        both = (self.path("current.json"), self.path("golden.json"))
        found = self.check_both(*both)
        self.assertEqual([(v["layer"], v["metric"]) for v in found.violations],
                         [(1, "erank_centered")])
        self.assertEqual(kvrank.check(*both, metric="erank,erank_centered",
                                      abs_tol=0.05).violations, found.violations)
        self.assertTrue(self.check_both(*both, "--metric", "erank", metric="erank"))
        self.assertFalse(self.check_both(*both, "--metric", "erank", "--abs-tol", "0.01",
                                         metric=["erank"], abs_tol=0.01))
        self.assert_errors(lambda **keywords: kvrank.check(current, current, **keywords), [
            (dict(metric="bogus"), f'metric: expected {METRICS}, found "bogus"'),
            (dict(metric=""), "metric: at least one metric is required"),
            (dict(metric=[]), "metric: at least one metric is required"),
            (dict(metric=3), "metric: expected a list, found 3"),
            (dict(abs_tol=-1), "abs_tol: must be a finite number, 0 or more, found -1"),
            (dict(abs_tol=float("nan")), "abs_tol: must be a finite number, 0 or more, found nan"),
            (dict(abs_tol="x"), "abs_tol: expected a number, found 'x'"),
        ])

    def plot_command(self, *flags):
        proc = harness.run("plot", self.path("gqa.json"), "-o", "-", *flags)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc.stdout

    def test_plot(self):
        kvrank.analyze(GQA, repr="qk,ov").save(self.path("gqa.json"))
        default = self.plot_command()
        self.assertEqual(kvrank.plot(self.path("gqa.json")), default)
        self.assertEqual(kvrank.plot(self.path("gqa.json"), metric="erank", title="",
                                     legend="below"), default)
        given = self.plot_command("--metric", "erank_centered", "--title", "T", "--legend", "right")
        self.assertNotEqual(given, default)
        self.assertEqual(kvrank.plot(self.path("gqa.json"), metric="erank_centered", title="T",
                                     legend="right"), given)
        legends = ("below, right, inside or none (inside:CORNER: top-left, top-right, bottom-left "
                   "or bottom-right)")
        self.assert_errors(lambda **keywords: kvrank.plot(self.path("gqa.json"), **keywords), [
            (dict(metric="bogus"), f'metric: expected {METRICS}, found "bogus"'),
            (dict(metric=""), f'metric: expected {METRICS}, found ""'),
            (dict(metric=1), "metric: expected text, found 1"),
            (dict(title=1), "title: expected text, found 1"),
            (dict(legend="left"), f'legend: expected {legends}, found "left"'),
            (dict(legend=""), f'legend: expected {legends}, found ""'),
            (dict(legend=1), "legend: expected text, found 1"),
        ])


if __name__ == "__main__":
    harness.main_unittest()
