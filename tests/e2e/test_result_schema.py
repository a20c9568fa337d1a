"""Every JSON that `analyze`, `merge` and `baseline` write validates against the JSON Schema of the
result file, docs/schema/kvrank-result.schema.json (draft 2020-12), with python3-jsonschema; and
every file kvrank reads is checked to the same rules: what the schema forbids, `merge` and `check`
refuse with one line naming the file and the field (exit 2), and never write out.

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


def set_in(document, path, value):
    """document with the key at `path` (a list of keys and indices) set to value (or removed)."""
    *parents, last = path
    target = document
    for key in parents:
        target = target[key]
    if value is REMOVE:
        del target[last]
    else:
        target[last] = value


REMOVE = object()
MODEL = ["models", 0]
LAYER = MODEL + ["layers", 1]

# What the schema forbids, each a change to a valid file: (name, path, value, the field's place
# the error names). The schema rejects every one; kvrank's reader must too.
FORBIDDEN = [
    ("tool.name other than kvrank", ["tool", "name"], "kvrank-fork", "tool.name"),
    ("tool without version", ["tool", "version"], REMOVE, "tool"),
    ("an unknown top-level key", ["extra"], 1, "unexpected key"),
    ("an unknown model key", MODEL + ["colour"], "red", "models[0]: unexpected key"),
    ("an unknown layer key", LAYER + ["erank2"], 1.0, "models[0].layers[1]: unexpected key"),
    ("an unknown qk_norm_gain", MODEL + ["options", "qk_norm_gain"], "2*weight",
     "models[0].options.qk_norm_gain"),
    ("an unknown input_norm_gain", MODEL + ["options", "input_norm_gain"], "w",
     "models[0].options.input_norm_gain"),
    ("an unknown options key", MODEL + ["options", "dpi"], 300, "models[0].options"),
    ("an unknown source key", MODEL + ["source", "url"], "x", "models[0].source"),
    ("repr zz", MODEL + ["repr"], "zz", "models[0].repr"),
    ("a negative step", MODEL + ["step"], -5, "models[0].step"),
    ("negative heads", MODEL + ["heads"], -8, "models[0].heads"),
    ("negative kv_heads", MODEL + ["kv_heads"], -1, "models[0].kv_heads"),
    ("negative head_dim", MODEL + ["head_dim"], -16, "models[0].head_dim"),
    ("negative d_model", MODEL + ["d_model"], -1, "models[0].d_model"),
    ("negative num_layers", MODEL + ["num_layers"], -4, "models[0].num_layers"),
    ("lrkv_rank 0", MODEL + ["lrkv_rank"], 0, "models[0].lrkv_rank"),
    ("mla_kv_lora_rank -5", MODEL + ["mla_kv_lora_rank"], -5, "models[0].mla_kv_lora_rank"),
    ("a negative layer index", LAYER + ["layer"], -1, "models[0].layers[1].layer"),
    ("negative kept_heads", LAYER + ["kept_heads"], -1, "models[0].layers[1].kept_heads"),
    ("negative pcs_90", LAYER + ["pcs_90"], -2, "models[0].layers[1].pcs_90"),
    ("a negative zero head", LAYER + ["zero_heads"], [-1], "models[0].layers[1].zero_heads[0]"),
    ("a missing curve", LAYER + ["mean_similarity"], REMOVE, "models[0].layers[1]"),
    ("an unknown summary key", MODEL + ["summary", "pcs_90_mean"], 1.0, "models[0].summary"),
    ("a missing summary mean", MODEL + ["summary", "erank_mean"], REMOVE, "models[0].summary"),
    ("an unknown attention key", MODEL + ["attention"], {"stack": "encoder", "kind": "self",
                                                         "x": 1}, "models[0].attention"),
    ("a negative attention layer", MODEL + ["attention_layers"], [-1, 2],
     "models[0].attention_layers"),
]

# Rules the schema cannot state (it does not compare two fields), which the reader keeps too.
FORBIDDEN_BEYOND_THE_SCHEMA = [
    ("kept_heads > heads", LAYER + ["kept_heads"], 9, "models[0].layers[1].kept_heads"),
]


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
        t5, jamba = self.path("t5"), self.path("jamba")
        harness.run_writer("write_encoder_checkpoints.py", "t5", t5)
        harness.run_writer("write_family_checkpoints.py", "jamba", jamba, self.path("ref"),
                           "--layers", "8")
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
            "analyze of an encoder-decoder (attention)": self.json_of(
                "analyze", t5, "--format", "json", "-q"),
            "analyze of a hybrid (attention_layers)": self.json_of(
                "analyze", jamba, "--format", "json", "-q"),
            "baseline": self.json_of("baseline", "--layers", "3", "--format", "json"),
            "merge": self.json_of("merge", *parts, "--layers", "0-2"),
            "merge of a version-1 file": self.json_of("merge", RESULT_V1),
        }
        for name, document in documents.items():
            with self.subTest(name=name):
                errors = [f"{list(error.absolute_path)}: {error.message}"
                          for error in validator.iter_errors(document)]
                self.assertEqual(errors, [])
            with self.subTest(name=name, read_back="merge"):  # what kvrank writes, it reads
                part = self.path("written.json")
                with open(part, "w") as handle:
                    json.dump(document, handle)
                self.assertEqual(self.json_of("merge", part, *(
                    ["--layers", document["models"][0]["options"]["layers"]]
                    if document["models"][0]["options"]["layers"] else [])), document)

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

    def assert_refused(self, document, where, name):
        """merge and check refuse `document` (exit 2) with one line naming the file and `where`,
        and merge writes nothing."""
        bad = self.path("bad.json")
        with open(bad, "w") as handle:
            json.dump(document, handle)
        good = self.path("good.json")
        output = self.path("merged.json")
        for args in (("merge", bad, "-o", output), ("check", bad, "--baseline", good),
                     ("check", good, "--baseline", bad)):
            result = run(*args)
            with self.subTest(rule=name, command=args[0]):
                self.assertEqual(result.returncode, 2, result.stderr)
                lines = result.stderr.splitlines()
                self.assertEqual(len(lines), 1, result.stderr)
                self.assertIn(bad, lines[0])
                self.assertIn(where, lines[0])
                self.assertFalse(os.path.exists(output))

    def valid_document(self):
        return self.result_document("0-2")

    def test_what_the_schema_forbids_kvrank_refuses_to_read(self):
        with open(SCHEMA) as handle:
            validator = jsonschema.Draft202012Validator(json.load(handle))
        valid = self.valid_document()
        self.assertTrue(validator.is_valid(valid))
        for name, path, value, where in FORBIDDEN + FORBIDDEN_BEYOND_THE_SCHEMA:
            document = json.loads(json.dumps(valid))
            set_in(document, path, value)
            if (name, path, value, where) in FORBIDDEN:
                with self.subTest(rule=name, by="the schema"):
                    self.assertFalse(validator.is_valid(document))
            self.assert_refused(document, where, name)

    def test_what_the_schema_allows_kvrank_reads(self):
        """Optional fields absent or null, and a file of kvrank 0.1.0 without input_norm_gain and
        model_type, still merge (into files that validate)."""
        with open(SCHEMA) as handle:
            validator = jsonschema.Draft202012Validator(json.load(handle))
        valid = self.valid_document()
        changes = [
            (MODEL + ["options", "input_norm_gain"], REMOVE),
            (MODEL + ["attention"], None),
            (MODEL + ["attention_layers"], None),
            (MODEL + ["options", "qk_norm_gain"], "1+weight"),
            (MODEL + ["step"], None),
        ]
        document = json.loads(json.dumps(valid))
        for path, value in changes:
            set_in(document, path, value)
        self.assertTrue(validator.is_valid(document))
        part = self.path("part.json")
        with open(part, "w") as handle:
            json.dump(document, handle)
        merged = self.json_of("merge", part, "--layers", "0-2")
        self.assertTrue(validator.is_valid(merged))


if __name__ == "__main__":
    if jsonschema is None:
        harness.kvrank_from_argv()
        harness.skip("python3-jsonschema is not installed (scripts/setup.sh installs it)")
    harness.main_unittest()
