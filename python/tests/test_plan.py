#!/usr/bin/env python3
"""kvrank.plan: the same document as `kvrank plan --format json`, rows for a DataFrame, and bad
input as kvrank.Error with the command line's message.

  python3 python/tests/test_plan.py build/kvrank   (ctest: python.test_plan, PYTHONPATH set)
"""
import importlib.util
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402

import kvrank  # noqa: E402

MHA = os.path.join(harness.TINY, "mha")


class PlanTest(harness.TestCase):
    def test_same_document_as_the_command_line(self):
        got = kvrank.plan(MHA, kv_heads=4, layers="0,2", latent_energy=0.9).to_dict()
        proc = harness.run("plan", MHA, "--kv-heads", "4", "--layers", "0,2", "--latent-energy",
                           "0.9", "--format", "json", "-q")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        want = json.loads(proc.stdout)
        self.assertEqual(got["models"], want["models"])

    def test_refit_is_the_command_lines(self):
        got = kvrank.plan(MHA, kv_heads=4, layers="1", refit=True).to_dict()
        proc = harness.run("plan", MHA, "--kv-heads", "4", "--layers", "1", "--refit",
                           "--format", "json", "-q")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(got["models"], json.loads(proc.stdout)["models"])
        self.assertTrue(got["models"][0]["refit"])
        self.assertEqual(kvrank.plan(MHA, kv_heads=4, layers="1").to_dict()["models"], got["models"])
        plain = kvrank.plan(MHA, kv_heads=4, layers="1", refit=False).to_dict()["models"][0]
        self.assertFalse(plain["refit"])
        proc = harness.run("plan", MHA, "--kv-heads", "4", "--layers", "1", "--no-refit",
                           "--format", "json", "-q")
        self.assertEqual([plain], json.loads(proc.stdout)["models"])
        none = kvrank.plan(MHA, kv_heads=4, layers="1", gauge="none").to_dict()["models"][0]
        self.assertFalse(none["refit"])  # gauge="none": the plain mean-pool by default

    def test_kv_only_input_asks_for_refit_false(self):
        """The default refit needs queries and outputs: without them, one line naming refit=False
        (never a silent fallback to the mean-pool), which then plans."""
        import test_plan  # tests/e2e's random checkpoints
        path = test_plan.without(test_plan.random_llama(self.path("kv"), 4, 4, 4, seed=4),
                                 "q_proj", "o_proj")
        with self.assertRaises(kvrank.Error) as raised:
            kvrank.plan(path, kv_heads=2)
        self.assertTrue(str(raised.exception).endswith(
            "no query projections: give refit=False for the mean-pool conversion"), raised.exception)
        self.assertFalse(kvrank.plan(path, kv_heads=2, refit=False).to_dict()["models"][0]["refit"])

    def test_rows(self):
        rows = kvrank.plan([MHA], kv_heads=2, objective="qk", labels=["tiny"]).rows()
        self.assertEqual(len(rows), 4)
        self.assertEqual(rows[0]["label"], "tiny")
        self.assertIn("contiguous_qk_error", rows[0])
        self.assertIn("random_qk_error", rows[0])
        if importlib.util.find_spec("pandas") is None:
            return  # to_pandas() needs pandas
        self.assertEqual(len(kvrank.plan(MHA, kv_heads=4).to_pandas()), 4)

    def test_errors(self):
        with self.assertRaisesRegex(kvrank.Error, "must divide the model's 8 key/value heads"):
            kvrank.plan(MHA, kv_heads=3)
        # Python checks the types; the names and ranges are the request's, in Python's words.
        cases = (
            (dict(rope="yarn"), 'rope: expected none, rotate_half or interleaved, found "yarn"'),
            (dict(gauge="maybe"), 'gauge: expected auto or none, found "maybe"'),
            (dict(gauge=1), "gauge: expected text, found 1"),
            (dict(objective="loss"), 'objective: expected merge or qk, found "loss"'),
            (dict(kv_heads=0),
             "kv_heads: the key/value heads after the conversion (1 or more) are required"),
            (dict(kv_heads=2.5), "kv_heads: expected a whole number, found 2.5"),
            (dict(random=0), "random: must be 1 to 100000, found 0"),
            (dict(seed=-1), "seed: -1 is out of range (at least 0)"),
            (dict(latent_energy=float("nan")), "latent_energy: must lie in (0, 1]"),
            (dict(refit=True, gauge="none"),
             'refit: fits queries within the RoPE layout, which gauge="none" turns off'),
            (dict(refit=1), "refit: expected True, False or None, found 1"),
        )
        for arguments, message in cases:
            with self.subTest(**arguments):
                with self.assertRaises(kvrank.Error) as raised:
                    kvrank.plan(MHA, **dict(dict(kv_heads=4), **arguments))
                self.assertEqual(str(raised.exception), message)
        # None keeps the command line's default; an empty name is a name, and refused.
        with self.assertRaises(kvrank.Error) as raised:
            kvrank.plan(MHA, kv_heads=4, objective="")
        self.assertEqual(str(raised.exception), 'objective: expected merge or qk, found ""')


if __name__ == "__main__":
    harness.main_unittest()
