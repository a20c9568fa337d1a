"""End-to-end tests of `kvrank merge` and `analyze --layer-shard` on the demo models in data/tiny.

Usage: python3 tests/e2e/test_merge.py path/to/kvrank   (run from the repository root)
Parts made by `analyze --layers` / `--layer-shard` / one checkpoint each must merge into exactly
the bytes one `analyze` over the same inputs writes; broken sets of parts are refused with exit 2.
"""
import json
import os

import harness

MHA, GQA, MQA = (os.path.join("data", "tiny", name) for name in ("mha", "gqa", "mqa"))


def run(*args):
    """kvrank ARGS with stdout as bytes: merged files are compared byte for byte."""
    return harness.run(*args, text=False, timeout=120)


class MergeTest(harness.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(MHA, "config.json")) as config:
            cls.num_layers = json.load(config)["num_hidden_layers"]
        assert cls.num_layers >= 3, cls.num_layers

    def analyze(self, *args):
        result = run("analyze", *args, "--format", "json", "-q")
        self.assertEqual(result.returncode, 0, result.stderr.decode())
        return result.stdout

    def part(self, name, *args):
        """`analyze ARGS` written to a part file; returns its path."""
        output = self.path(name)
        result = run("analyze", *args, "--format", "json", "-q", "-o", output)
        self.assertEqual(result.returncode, 0, result.stderr.decode())
        return output

    def merge(self, *args):
        result = run("merge", *args)
        self.assertEqual(result.returncode, 0, result.stderr.decode())
        return result.stdout

    def assert_refused(self, *args):
        output = self.path("refused.json")
        result = run("merge", *args, "-o", output)
        self.assertEqual(result.returncode, 2, result.stderr.decode())
        self.assertEqual(result.stdout, b"")
        lines = result.stderr.decode().strip().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertTrue(lines[0].startswith("kvrank: error: "), lines[0])
        self.assertFalse(os.path.exists(output), "a refused merge must write no file")
        return lines[0]

    def test_layer_parts_merge_into_the_bytes_of_one_run(self):
        last = self.num_layers - 1
        common = ["--repr", "qk,k", "--similarity"]
        parts = [self.part("l-hi.json", MHA, f"--layers=2-{last}", *common),  # out of order
                 self.part("l-lo.json", MHA, "--layers", "0-1", *common),
                 self.part("l-gqa.json", GQA, *common)]
        self.assertEqual(self.merge(*parts), self.analyze(MHA, GQA, *common))

    def test_layer_shards_merge_into_the_bytes_of_one_run(self):
        for count in (1, 2, 3, self.num_layers + 2):  # the last has empty shards
            parts = [self.part(f"s{index}-{count}.json", MHA, GQA, "--layer-shard",
                               f"{index}/{count}") for index in range(count)]
            self.assertEqual(self.merge(*parts), self.analyze(MHA, GQA), f"{count} shards")

    def test_shards_of_a_layer_selection_merge_with_the_same_layers(self):
        parts = [self.part(f"sel{index}.json", MQA, "--layers", "0,2-3", "--layer-shard",
                           f"{index}/2") for index in range(2)]
        with open(parts[0]) as first:
            self.assertEqual([layer["layer"] for layer in json.load(first)["models"][0]["layers"]],
                             [0, 2])  # the first shard holds the larger half
        output = self.path("sel.json")
        self.merge(*parts, "--layers", "0,2-3", "-o", output)
        with open(output, "rb") as merged:
            self.assertEqual(merged.read(), self.analyze(MQA, "--layers", "0,2-3"))
        self.assertIn("layer 1 is in no part (the parts hold 0,2-3 of 0-3)",
                      self.assert_refused(*parts))

    def test_one_part_per_checkpoint_with_baseline(self):
        parts = [self.part(f"c{i}.json", path, "--with-baseline")
                 for i, path in enumerate((MHA, GQA, MQA))]
        self.assertEqual(self.merge(*parts), self.analyze(MHA, GQA, MQA, "--with-baseline"))

    def test_gap_and_overlap_are_refused(self):
        low = self.part("g-lo.json", MHA, "--layers", "0")
        high = self.part("g-hi.json", MHA, "--layers", f"2-{self.num_layers - 1}")
        self.assertEqual(self.assert_refused(low, high),
                         'kvrank: error: model "mha" (repr qk): layer 1 is in no part (the parts '
                         f'hold 0,2-{self.num_layers - 1} of 0-{self.num_layers - 1})')
        both = self.part("g-both.json", MHA, "--layers", "0-1")
        self.assertEqual(self.assert_refused(low, both),
                         f'kvrank: error: {both}: model "mha" (repr qk): layer 0 is also in {low} '
                         "(overlapping parts)")

    def test_one_label_on_two_checkpoints_is_refused(self):
        first = self.part("lab-a.json", MHA, "--label", "run", "--layers", "0-1")
        second = self.part("lab-b.json", GQA, "--label", "run", "--layers",
                           f"2-{self.num_layers - 1}")
        self.assertEqual(self.assert_refused(first, second),
                         f'kvrank: error: {second}: model "run" (repr qk): path is "{GQA}", but '
                         f'"{MHA}" in {first}: two checkpoints share this label (give each its own '
                         "--label)")

    def test_another_kvrank_version_is_refused(self):
        first = self.part("v-a.json", MHA, "--layers", "0-1")
        second = self.part("v-b.json", MHA, "--layers", f"2-{self.num_layers - 1}")
        with open(second) as part:
            document = json.load(part)
        document["tool"]["version"] = "0.0.0-other"
        with open(second, "w") as part:
            json.dump(document, part)
        message = self.assert_refused(first, second)
        self.assertTrue(message.startswith(f"kvrank: error: {second}: written by kvrank "
                                           "0.0.0-other, but"), message)

    def test_a_file_that_is_not_a_result_is_refused(self):
        junk = self.path("junk.json")
        with open(junk, "w") as out:
            out.write("[1, 2")
        self.assertTrue(self.assert_refused(junk).startswith(f"kvrank: error: {junk}: "))
        self.assertIn("cannot open", self.assert_refused(self.path("missing.json")))

    def test_bad_layer_shard_is_a_usage_error(self):
        result = run("analyze", MHA, "--layer-shard", "2/2")
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stdout, b"")
        self.assertEqual(result.stderr.decode().strip(),
                         'kvrank: error: --layer-shard: expected I/N with 0 <= I < N (e.g. 0/4), '
                         'found "2/2"')


if __name__ == "__main__":
    harness.main_unittest()
