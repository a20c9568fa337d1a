#!/usr/bin/env python3
"""End-to-end: encoders and encoder-decoders (bert, roberta, vit, t5, whisper, bart, mbart, clip,
siglip, and a clip or siglip tower alone), written in their Hugging Face names by tests/writers/write_encoder_checkpoints.py
(independent numpy). Each attention series — every stack's self-attention, a decoder's
cross-attention — is its own model in the result, with an "attention" field and (when the model has
several series) a label suffix; every number matches `reference.py encoder`, which builds each d×d
form itself.
Plus `--attention self|cross|all`, the CSV and table columns, and the errors.

Run from the repository root: python3 tests/e2e/test_encoder_families.py path/to/kvrank
"""
import csv
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import reference  # noqa: E402  (scripts/reference.py)
import write_encoder_checkpoints as writer  # noqa: E402

REPRS = ["qk", "ov", "k", "v"]
SERIES = {
    "bert": ["encoder self"],
    "roberta": ["encoder self"],
    "vit": ["encoder self"],
    "t5": ["encoder self", "decoder self", "decoder cross"],
    "whisper": ["encoder self", "decoder self", "decoder cross"],
    "bart": ["encoder self", "decoder self", "decoder cross"],
    "mbart": ["encoder self", "decoder self", "decoder cross"],
    "clip": ["text self", "vision self"],
    "siglip": ["text self", "vision self"],
    # One tower alone: config.json holds its text_config / vision_config keys at the top level.
    "clip_text_model": ["text self"],
    "clip_vision_model": ["vision self"],
    "siglip_text_model": ["text self"],
    "siglip_vision_model": ["vision self"],
}
FAMILY = {"roberta": "bert", "siglip": "clip", "bart": "whisper", "mbart": "whisper",
          "clip_text_model": "clip", "clip_vision_model": "clip", "siglip_text_model": "clip",
          "siglip_vision_model": "clip"}


class EncoderFamilies(harness.TestCase):
    def write(self, model_type, seed=0):
        out = os.path.join(self.dir, model_type)
        writer.write_encoder(model_type, out, seed=seed)
        return out

    def assert_layers(self, got, want, where):
        self.assertEqual([g["layer"] for g in got], [w["layer"] for w in want], where)
        for g, w in zip(got, want):
            self.assertEqual(g["pcs_90"], w["pcs_90"], where)
            for key in ("erank", "erank_centered", "mean_similarity"):
                self.assertTrue(harness.close(g[key], w[key]), f"{where} layer {w['layer']}: {key} "
                                f"kvrank {g[key]!r} reference {w[key]!r}")

    def test_every_series_against_the_reference(self):
        for seed, (model_type, series) in enumerate(SERIES.items()):
            with self.subTest(model_type=model_type):
                out = self.write(model_type, seed)
                models = harness.analyze_json(out, "--repr", ",".join(REPRS), "--label", "m")["models"]
                several = len(series) > 1
                expected = [(s, r) for s in series for r in REPRS]
                found = [(f"{m['attention']['stack']} {m['attention']['kind']}", m["repr"]) for m in models]
                self.assertEqual(found, expected)
                for model in models:
                    text = f"{model['attention']['stack']} {model['attention']['kind']}"
                    self.assertEqual(model["label"], f"m [{text}]" if several else "m")
                    self.assertEqual((model["family"], model["model_type"], model["variant"]),
                                     (FAMILY.get(model_type, model_type), model_type, "mha"))
                    self.assert_layers(model["layers"], reference.cmd_encoder(out, text, model["repr"]),
                                       f"{model_type} {text} {model['repr']}")

    def test_inspect_lists_every_series(self):
        out = self.write("t5")
        text = harness.run("inspect", out)
        self.assertEqual(text.returncode, 0, text.stderr)
        geometry = "heads 5, kv_heads 5, head_dim 4, d_model 16"
        self.assertIn("\n  family t5, variant mha\n"
                      f"  encoder self: {geometry}, layers 3\n"
                      f"  decoder self: {geometry}, layers 2\n"
                      f"  decoder cross: {geometry}, layers 2\n", text.stdout)
        entry = json.loads(harness.run("inspect", out, "--format", "json").stdout)["checkpoints"][0]
        self.assertEqual([(s["attention"]["stack"], s["attention"]["kind"], s["num_layers"])
                          for s in entry["series"]],
                         [("encoder", "self", 3), ("decoder", "self", 2), ("decoder", "cross", 2)])
        self.assertEqual(entry["num_layers"], 3)  # the top level is the first series'

    def test_attention_option_selects_series(self):
        out = self.write("whisper")
        kinds = {}
        for choice in ("self", "cross", "all"):
            models = harness.analyze_json(out, "--attention", choice)["models"]
            kinds[choice] = [m["label"] for m in models]
        self.assertEqual(kinds["self"], ["whisper [encoder self]", "whisper [decoder self]"])
        self.assertEqual(kinds["cross"], ["whisper [decoder cross]"])
        self.assertEqual(kinds["all"], kinds["self"] + kinds["cross"])

    def test_cross_on_a_model_without_cross_attention_is_an_error(self):
        bert = self.write("bert")
        llama = os.path.join(harness.TINY, "gqa")
        for path in (bert, llama):
            with self.subTest(path=path):
                proc = harness.run("analyze", path, "--attention", "cross")
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
                self.assertIn("--attention cross: the model has no such attention", proc.stderr)
        proc = harness.run("analyze", bert, "--attention", "both")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(proc.stderr, 'kvrank: error: --attention: expected self, cross or all, '
                                      'found "both"\n')

    def test_decoder_only_outputs_have_no_attention_field_or_column(self):
        llama = os.path.join(harness.TINY, "gqa")
        document = harness.analyze_json(llama)
        self.assertNotIn("attention", document["models"][0])
        header = harness.run("analyze", llama, "--format", "csv").stdout.splitlines()[0]
        self.assertNotIn("attention", header)

    def test_csv_and_table_show_the_series(self):
        out = self.write("t5")
        proc = harness.run("analyze", out, "--format", "csv", "--summary")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        rows = list(csv.DictReader(io.StringIO(proc.stdout)))
        self.assertEqual([(r["attention_stack"], r["attention_kind"]) for r in rows],
                         [("encoder", "self"), ("decoder", "self"), ("decoder", "cross")])
        table = harness.run("analyze", out).stdout
        self.assertIn("attention decoder cross", table)

    def test_result_reads_back_and_merges(self):
        out = self.write("clip")
        result = os.path.join(self.dir, "clip.json")
        proc = harness.run("analyze", out, "-o", result)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        proc = harness.run("merge", result, "-o", os.path.join(self.dir, "merged.json"))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(os.path.join(self.dir, "merged.json")) as f:
            merged = json.load(f)
        self.assertEqual([m["attention"] for m in merged["models"]],
                         [{"stack": "text", "kind": "self"}, {"stack": "vision", "kind": "self"}])

    def test_one_stack_alone_and_a_missing_family(self):
        out = self.write("t5")
        tensors, config = writer.write_encoder("t5", os.path.join(self.dir, "scratch"))
        encoder_only = {n: t for n, t in tensors.items() if n.startswith("encoder.")}
        writer.write_safetensors(os.path.join(out, "model.safetensors"), encoder_only, "F32")
        models = harness.analyze_json(out)["models"]
        self.assertEqual([m["label"] for m in models], ["t5"])  # one series: no suffix
        writer.write_safetensors(os.path.join(out, "model.safetensors"),
                                 {"shared.weight": tensors["encoder.block.0.layer.0.SelfAttention.q.weight"]},
                                 "F32")
        proc = harness.run("analyze", out)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("found no attention tensors of family t5", proc.stderr)


if __name__ == "__main__":
    harness.main_unittest()
