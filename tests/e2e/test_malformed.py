"""End-to-end: `kvrank inspect` on the malformed corpus and on the valid files of the readers.

Usage: python3 tests/e2e/test_malformed.py path/to/kvrank   (run from the repository root)
Both sets come from tests/writers/write_test_files.py (an independent numpy writer). Every malformed
input must give exit code 2, nothing on stdout and one line on stderr starting with
`kvrank: error: <the file>`; every valid input must be listed with the tensors the writer wrote.
"""
import json
import os
import tempfile
import unittest

import harness



def generate(kind, folder):
    harness.run_writer("write_test_files.py", kind, folder)
    with open(os.path.join(folder, kind + ".json")) as manifest:
        return json.load(manifest)["cases"]


def inspect(*args):
    return harness.run("inspect", *args, timeout=60)


class MalformedInputs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        cls.cases = generate("malformed", cls.folder.name)

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def test_corpus_is_large_enough(self):
        self.assertGreaterEqual(len(self.cases), 25)

    def test_each_input_is_refused_with_one_line_naming_it(self):
        for case in self.cases:
            path = os.path.join(self.folder.name, case["path"])
            with self.subTest(case=case["path"]):
                result = inspect(path)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertEqual(result.stdout, "")
                lines = result.stderr.splitlines()
                self.assertEqual(len(lines), 1, result.stderr)
                self.assertTrue(lines[0].startswith("kvrank: error: " + path), lines[0])
                self.assertIn(case["expect"], lines[0])


class ValidInputs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        cls.cases = generate("valid", cls.folder.name)

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def test_every_tensor_is_listed(self):
        for case in self.cases:
            path = os.path.join(self.folder.name, case["path"])
            with self.subTest(case=case["path"]):
                flags = ["--npy-dtype", "bf16"] if case.get("bf16_void") else []
                result = inspect(path, "--format", "json", *flags)
                self.assertEqual(result.returncode, 0, result.stderr)
                report = json.loads(result.stdout)
                self.assertEqual(report["schema_version"], 1)
                [checkpoint] = report["checkpoints"]
                listed = {t["name"]: t for t in checkpoint["tensors"]}
                self.assertEqual(sorted(listed), sorted(t["name"] for t in case["tensors"]))
                for tensor in case["tensors"]:
                    self.assertEqual(listed[tensor["name"]]["dtype"], tensor["dtype"])
                    self.assertEqual(listed[tensor["name"]]["shape"], tensor["shape"])

    def test_void_arrays_need_the_bf16_flag(self):
        result = inspect(os.path.join(self.folder.name, "bf16.npy"))
        self.assertEqual(result.returncode, 2)
        self.assertIn("--npy-dtype bf16", result.stderr)


if __name__ == "__main__":
    harness.main_unittest()
