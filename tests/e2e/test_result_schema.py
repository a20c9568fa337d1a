"""Every JSON that `analyze`, `merge` and `baseline` write validates against the JSON Schema of the
result file, docs/schema/kvrank-result.schema.json (draft 2020-12), with python3-jsonschema.

Usage: python3 tests/e2e/test_result_schema.py path/to/kvrank   (run from the repository root)
Skipped (visibly, exit 77) where python3-jsonschema is not installed; scripts/setup.sh installs it.
"""
import json
import os

import harness
from harness import run

MHA, GQA, MQA = (os.path.join("data", "tiny", name) for name in ("mha", "gqa", "mqa"))
SCHEMA = os.path.join(harness.ROOT, "docs", "schema", "kvrank-result.schema.json")
RESULT_V1 = os.path.join(harness.ROOT, "tests", "data", "result-v1.json")

try:
    import jsonschema
except ImportError:
    jsonschema = None


class ResultSchemaTest(harness.TestCase):
    def json_of(self, *args):
        result = run(*args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

    def test_the_schema_is_a_valid_draft_2020_12_schema(self):
        with open(SCHEMA) as handle:
            jsonschema.Draft202012Validator.check_schema(json.load(handle))

    def test_every_json_written_validates(self):
        with open(SCHEMA) as handle:
            validator = jsonschema.Draft202012Validator(json.load(handle))
        parts = [self.path("p0.json"), self.path("p1.json")]
        for index, part in enumerate(parts):
            run("analyze", MHA, "--layers", "0-2", "--layer-shard", f"{index}/2", "-q", "-o", part)
        documents = {
            "analyze": self.json_of("analyze", MHA, GQA, "--repr", "qk,ov", "--with-baseline",
                                    "--format", "json", "-q"),
            "analyze --similarity": self.json_of("analyze", MQA, "--similarity", "--layers", "1,3",
                                                 "--format", "json", "-q"),
            "analyze of the tiny lrkv and mla": self.json_of(
                "analyze", os.path.join("data", "tiny", "lrkv-r2"),
                os.path.join("data", "tiny", "mla"), "--format", "json", "-q"),
            "baseline": self.json_of("baseline", "--layers", "3", "--format", "json"),
            "merge": self.json_of("merge", *parts, "--layers", "0-2"),
            "merge of a version-1 file": self.json_of("merge", RESULT_V1),
        }
        for name, document in documents.items():
            with self.subTest(name=name):
                errors = [f"{list(error.absolute_path)}: {error.message}"
                          for error in validator.iter_errors(document)]
                self.assertEqual(errors, [])

    def test_a_wrong_document_fails_validation(self):
        """The schema is strict enough to catch a renamed or missing field."""
        with open(SCHEMA) as handle:
            validator = jsonschema.Draft202012Validator(json.load(handle))
        document = self.json_of("analyze", MHA, "--format", "json", "-q")
        document["models"][0]["layers"][0]["heads"] = document["models"][0]["layers"][0].pop(
            "kept_heads")
        self.assertFalse(validator.is_valid(document))
        with open(RESULT_V1) as handle:  # version 1 is read, but no longer written
            self.assertFalse(validator.is_valid(json.load(handle)))


if __name__ == "__main__":
    if jsonschema is None:
        harness.kvrank_from_argv()
        harness.skip("python3-jsonschema is not installed (scripts/setup.sh installs it)")
    harness.main_unittest()
