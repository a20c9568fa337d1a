"""Values from files are quoted as excerpts in error lines (docs/input-limits.md): a 10 MB label in
a result file, a 1 MB global_step in trainer_state.json, a 1 MB key, must each give one short
line, never a line as long as the value; numbers near the double range print short; and `check`'s
tolerances are numbers >= 0 (NaN is a usage error, not "every value changed").

Usage: python3 tests/e2e/test_message_excerpts.py path/to/kvrank   (run from the repository root)
"""
import json
import os
import shutil

import harness
from harness import run

MHA = os.path.join(harness.TINY, "mha")
SHORT = 400  # bytes: what one error line may take here (the file names are in it)


class MessageExcerptsTest(harness.TestCase):
    def result(self):
        """A valid result document of data/tiny/mha (layers 0-1), parsed."""
        return self.result_document("0-1")

    def write(self, name, document):
        path = self.path(name)
        with open(path, "w") as handle:
            json.dump(document, handle)
        return path

    def assert_one_short_error(self, result, *fragments):
        self.assertEqual(result.returncode, 2, result.stderr[:SHORT])
        lines = result.stderr.splitlines()
        self.assertEqual(len(lines), 1, result.stderr[:SHORT])
        self.assertLess(len(lines[0]), SHORT, lines[0][:SHORT])
        for fragment in fragments:
            self.assertIn(fragment, lines[0])

    def test_check_quotes_an_unmatched_label_as_an_excerpt(self):
        golden = self.write("golden.json", self.result())
        document = self.result()
        document["models"][0]["label"] = "x" * 10_000_000
        current = self.write("current.json", document)
        self.assert_one_short_error(run("check", current, "--baseline", golden),
                                    "golden.json", "bytes)")
        document["models"].append(json.loads(json.dumps(document["models"][0])))
        twice = self.write("twice.json", document)
        self.assert_one_short_error(run("check", twice, "--baseline", golden),
                                    "twice.json", "two models labelled")

    def test_merge_quotes_an_unknown_key_as_an_excerpt(self):
        document = self.result()
        document["models"][0]["k" * 1_000_000] = 1
        part = self.write("part.json", document)
        self.assert_one_short_error(run("merge", part), "part.json", "unexpected key")

    def test_a_style_file_quotes_labels_keys_and_values_as_excerpts(self):
        results = self.write("results.json", self.result())
        huge = "x" * 1_000_000
        for style in ({huge: {"colour": "red"}}, {"mha": {huge: "#000000"}},
                      {"mha": {"colour": huge}}, {"mha": {"marker": huge}},
                      {"mha": {"dash": huge}}):
            path = self.write("style.json", style)
            self.assert_one_short_error(
                run("plot", results, "--style", path, "-o", self.path("f.svg")),
                "style.json", "bytes)")
            self.assertFalse(os.path.exists(self.path("f.svg")))

    def test_a_huge_global_step_is_quoted_as_an_excerpt(self):
        checkpoint = self.path("run")
        shutil.copytree(MHA, checkpoint)
        with open(os.path.join(checkpoint, "trainer_state.json"), "w") as handle:
            json.dump({"global_step": "9" * 1_000_000}, handle)
        self.assert_one_short_error(run("analyze", checkpoint, "-q"), "trainer_state.json",
                                    "global_step", "bytes)")

    def test_check_tolerance_nan_is_a_usage_error(self):
        golden = self.write("golden.json", self.result())
        for option in ("--abs-tol", "--rel-tol"):
            with self.subTest(option=option):
                self.assert_one_short_error(
                    run("check", golden, "--baseline", golden, option, "nan"), option)

    def test_check_prints_values_near_the_double_range_short(self):
        golden_document = self.result()
        golden_document["models"][0]["layers"][0]["erank"] = 1.7976931348623157e308
        golden = self.write("golden.json", golden_document)
        current = self.write("current.json", self.result())
        result = run("check", current, "--baseline", golden)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("1.79769e+308", result.stdout)
        self.assertLess(max(len(line) for line in result.stdout.splitlines()), 200)


if __name__ == "__main__":
    harness.main_unittest()
