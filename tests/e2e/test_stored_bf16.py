#!/usr/bin/env python3
"""End-to-end: bf16 weights read in place (docs/performance.md, "bf16 weights read where they lie").

Where kvrank's own AVX512-BF16 kernel runs, `analyze` hands a dense q, k or v projection stored as
bf16 to it as the file holds it, with no float32 copy. Checked through the command line on
checkpoints written by numpy (tests/writers/write_family_checkpoints.py):
- the same numbers, bit for bit, as the same values stored as F32 (read through the float32 copy,
  whose bf16-exact values take the same kernel), with auto and bf16 Grams, on 1 and 2 threads;
- tensors whose data start at an odd byte of the file: the same numbers;
- a NaN or an Inf in a projection: exit 2 and the reader's one line, the same as for the F32 file;
- weights times 2^60 (beyond the float32 Gram's range: scaled first): the same eranks, norms ×2^60;
- MLA's q_b_proj and kv_b_proj, which the latent contraction reads as stored (block_floats in
  contraction.cpp), and q_a_proj and kv_a_proj_with_mqa, whose Grams kvrank's own kernel takes as
  stored with their norm gains beside them: the same numbers as F32 storage, a NaN or an Inf in
  any of them gets the reader's one line, the same as for the F32 file, and q_a and kv_a ×2^60 the
  same numbers to float32's round-off.
Where this build or CPU has no such kernel the same must hold through the copy (then it is not the
in-place path that is checked: the test says so in its output).

Run from the repository root: python3 tests/e2e/test_stored_bf16.py path/to/kvrank
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import harness  # puts scripts/ and tests/writers on sys.path
import reference
import write_family_checkpoints as writer

SHAPE = dict(heads=8, kv_heads=2, head_dim=40, d_model=96)
PROJECTION = "model.layers.1.self_attn.{}_proj.weight"


def analyze(path, backend="auto", threads=2):
    env = dict(os.environ, KVRANK_GRAM_BACKEND=backend)
    return subprocess.run([harness.KVRANK, "analyze", path, "--repr", "qk,ov,k,v", "--format", "json",
                           "--threads", str(threads), "-q"], capture_output=True, text=True, env=env)


def numbers(result):
    """Each model's layers and summary: what the weights decide (not the path or the dtype)."""
    assert result.returncode == 0, result.stderr
    return [(model["repr"], model["layers"], model["summary"])
            for model in json.loads(result.stdout)["models"]]


def rewrite(source, target, dtype, change=None, header_pad=0):
    """Checkpoint folder `source` copied to `target` with its tensors stored as `dtype`, `change`
    applied to the float values first (name → array), the JSON header `header_pad` bytes longer
    than the 8-byte multiple (an odd count: every tensor's data at an odd file offset)."""
    os.makedirs(target)
    shutil.copy(os.path.join(source, "config.json"), target)
    tensors = reference.read_safetensors(os.path.join(source, "model.safetensors"))
    if change:
        change(tensors)
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        blob = writer.tensor_bytes(np.asarray(tensors[name], np.float64), dtype)
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * ((-len(text) % 8) + header_pad)
    with open(os.path.join(target, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return target


def bf16_grams_available(path):
    result = analyze(path, "bf16")
    return result.returncode == 0


class StoredBf16Cases:
    """What every stored-bf16 checkpoint must show; a subclass writes `source` in setUpClass."""

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def folder(self, name):
        return os.path.join(self.tmp.name, self.id().rsplit(".", 1)[-1], name)

    def test_the_same_numbers_as_float32_storage_and_at_odd_offsets(self):
        bf16 = rewrite(self.source, self.folder("bf16"), "BF16")
        f32 = rewrite(self.source, self.folder("f32"), "F32")
        odd = rewrite(self.source, self.folder("odd"), "BF16", header_pad=1)
        for backend in self.backends:
            for threads in (1, 2):
                with self.subTest(backend=backend, threads=threads):
                    want = numbers(analyze(f32, backend, threads))
                    self.assertEqual(numbers(analyze(bf16, backend, threads)), want)
                    self.assertEqual(numbers(analyze(odd, backend, threads)), want)

    def check_readers_error(self, name, label, entry, value, word):
        """`value` at `entry` of tensor `name`: exit 2 and the reader's one line, naming the
        tensor and `word`, the same from BF16 storage as from F32 storage."""

        def poison(tensors):
            tensors[name] = tensors[name].copy()
            tensors[name][entry] = value

        results = {}
        for dtype in ("BF16", "F32"):
            path = rewrite(self.source, self.folder(f"{label}_{dtype}"), dtype, poison)
            results[dtype] = [analyze(path, backend) for backend in self.backends]
        for result in results["BF16"]:
            with self.subTest(tensor=name):
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertEqual(result.stdout, "")
                lines = result.stderr.splitlines()
                self.assertEqual(len(lines), 1, result.stderr)
                self.assertIn(name, lines[0])
                self.assertIn(word, lines[0])
                want = results["F32"][0].stderr.replace(f"{label}_F32", f"{label}_BF16")
                self.assertEqual(result.stderr, want)


    def check_scaled_weights(self, names, power, exponents, rel):
        """Tensors `names` ×2^power, beyond the float32 Gram's range: the same eranks (to `rel`),
        head norms ×2^(exponents[repr]·power) (layer 1's)."""

        def scale(tensors):
            for name in names:
                tensors[name] = tensors[name] * 2.0 ** power

        plain = rewrite(self.source, self.folder("plain"), "BF16")
        huge = rewrite(self.source, self.folder("huge"), "BF16", scale)
        for backend in self.backends:
            with self.subTest(backend=backend):
                want = numbers(analyze(plain, backend))
                got = numbers(analyze(huge, backend))
                for (repr_a, layers_a, _), (repr_b, layers_b, _) in zip(got, want):
                    a, b = layers_a[1], layers_b[1]
                    self.assertEqual(repr_a, repr_b)
                    self.assertAlmostEqual(a["erank"], b["erank"], delta=rel * b["erank"])
                    factor = 2.0 ** (exponents[repr_a] * power)
                    for x, y in zip(a["head_erank"], b["head_erank"]):
                        self.assertAlmostEqual(x, y, delta=rel * y, msg=repr_a)
                    for x, y in zip(a["head_norm"], b["head_norm"]):
                        self.assertAlmostEqual(x, y * factor, delta=rel * y * factor, msg=repr_a)


class StoredBf16(StoredBf16Cases, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.source = os.path.join(cls.tmp.name, "source")
        writer.write_family("llama", cls.source, os.path.join(cls.tmp.name, "ref"), dtype="BF16",
                            seed=5, layers=2, **SHAPE)
        cls.backends = ["auto"] + (["bf16"] if bf16_grams_available(cls.source) else [])
        if cls.backends == ["auto"]:
            print("no bf16 Gram kernel here: the bf16 checkpoints are read through the float32 copy")

    def test_nan_and_inf_get_the_readers_error(self):
        for role, value, word in (("q", np.nan, "NaN"), ("k", -np.inf, "Inf")):
            self.check_readers_error(PROJECTION.format(role), role, (5, 7), value, word)

    def test_weights_beyond_the_float32_gram_range_are_scaled_first(self):
        # q and k scaled for qk, v alone for ov, k (v) on both sides of k (v).
        self.check_scaled_weights([PROJECTION.format(role) for role in ("q", "k", "v")], 60,
                                  {"qk": 2, "ov": 1, "k": 2, "v": 2}, rel=1e-12)


MLA_ATTENTION = "model.layers.1.self_attn.{}.weight"


class StoredBf16Mla(StoredBf16Cases, unittest.TestCase):
    """MLA with a q_lora rank: q_b_proj and kv_b_proj are the heads' coefficient rows."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.source = os.path.join(cls.tmp.name, "source")
        subprocess.run([sys.executable, os.path.join(harness.WRITERS, "write_latent_checkpoints.py"),
                        "mla", cls.source, os.path.join(cls.tmp.name, "ref"), "--dtype", "BF16",
                        "--q-lora-rank", "10", "--seed", "4", "--layers", "2"], check=True)
        cls.backends = ["auto"] + (["bf16"] if bf16_grams_available(cls.source) else [])

    def test_nan_and_inf_in_the_stored_rows_get_the_readers_error(self):
        # q_b and kv_b in the last head's rows; q_a and kv_a (their rows beside their norm gains)
        # in the last (kv_a: rope) row.
        for tensor, value, word in (("q_b_proj", np.nan, "NaN"), ("kv_b_proj", np.inf, "Inf"),
                                    ("q_a_proj", -np.inf, "Inf"),
                                    ("kv_a_proj_with_mqa", np.nan, "NaN")):
            self.check_readers_error(MLA_ATTENTION.format(tensor), tensor, (-1, 3), value, word)

    def test_latent_rows_beyond_the_float32_gram_range_are_scaled_first(self):
        # q_a (queries) and kv_a (keys and values) ×2^70, whose squares overflow float32: the
        # latent Grams' rows, their norm gains beside them. Their gains are then folded first, so
        # the float32 roundings differ from the plain file's: the same numbers to its round-off.
        names = [MLA_ATTENTION.format(t) for t in ("q_a_proj", "kv_a_proj_with_mqa")]
        self.check_scaled_weights(names, 70, {"qk": 2, "ov": 1, "k": 2, "v": 2}, rel=1e-5)


if __name__ == "__main__":
    harness.main_unittest(sys.modules[__name__])
