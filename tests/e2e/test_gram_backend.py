#!/usr/bin/env python3
"""End-to-end: the Gram backends (include/kvrank/metric/gram_backend.hpp) on BF16 checkpoints of three dense
layouts (llama GQA, gpt2's transposed fused c_attn, falcon's grouped fused query_key_value), written
by tests/writers/write_family_checkpoints.py. KVRANK_GRAM_BACKEND=bf16 (kvrank's AVX512-BF16 kernel
or, with AMX, oneDNN's), =f32 (the OpenBLAS fallback) and =auto must each match
scripts/reference.py, bf16 must match f32 to 1e-5 relative, and =bf16-onednn (oneDNN's kernel) must
give bf16's very results (the same float32 sums); a wrong value of the variable is a usage error. Where this build or CPU has no bf16 kernel,
asking for it must fail with the documented message, and the comparison is reported as skipped.
KVRANK_GRAM_BACKEND=onednn-f32 (every float32 product on oneDNN) must match f32 to 1e-6 relative on
dense and latent (MLA, LRKV) checkpoints, and be what auto does where OpenBLAS runs generic kernels.

Run from the repository root: python3 tests/e2e/test_gram_backend.py path/to/kvrank
"""
import collections
import itertools
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "writers"))
import reference  # noqa: E402  (scripts/reference.py: the naive numpy metric)
import write_family_checkpoints as writer  # noqa: E402

LATENT_WRITER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "writers",
                             "write_latent_checkpoints.py")

import harness  # noqa: E402  (tests/e2e is on sys.path)

KVRANK = None  # set in main

# 8 heads of 40: query rows 320, two column tiles of the bf16 kernel (one partial). gpt2 and falcon
# take head_dim = d_model / heads, hence their d_model 320; llama's head_dim is explicit, and its small
# d_model keeps scripts/reference.py (explicit d×d heads) fast. The f32 path of every family is
# checked against the reference in test_families.py; here bf16 is checked against f32 everywhere and
# against the reference on llama.
CASES = [
    ("llama", dict(heads=8, kv_heads=2, head_dim=40, d_model=64), True),
    ("gpt2", dict(heads=8, d_model=320), False),
    ("falcon_new", dict(heads=8, kv_heads=4, d_model=320), False),
]
REPRS = ["qk", "ov", "k"]
NO_KERNEL = ("kvrank: error: KVRANK_GRAM_BACKEND=bf16: this kvrank has no bf16 Gram kernel (it "
             "needs oneDNN at build time and a CPU with AVX512-BF16); use auto or f32\n")
NO_ONEDNN_F32 = ("kvrank: error: KVRANK_GRAM_BACKEND=onednn-f32: this kvrank has no oneDNN float32 "
                 "kernel (it needs oneDNN at build time and a CPU with AVX2); use auto or f32\n")
# The same latent-family shapes as test_latent_families.py, a little larger: MLA with a query latent
# (the contraction's GEMMs, TRMMs and SYRKs) and LRKV.
LATENT_CASES = [
    ("mla", ["--dtype", "BF16", "--q-lora-rank", "40", "--kv-lora-rank", "24", "--heads", "12",
             "--hidden", "96", "--layers", "2", "--seed", "7"]),
    ("lrkv", ["--dtype", "F32", "--heads", "8", "--hidden", "64", "--rank", "6", "--layers", "2",
              "--seed", "8"]),
]


def run(args, backend, threads=None, **environment):
    env = dict(os.environ, KVRANK_GRAM_BACKEND=backend, **environment)
    extra = ["--threads", str(threads)] if threads else []
    return subprocess.run([KVRANK] + args + extra, capture_output=True, text=True, env=env)


def analyze(path, backend, threads=None):
    result = run(["analyze", path, "--repr", ",".join(REPRS), "--format", "json"], backend, threads)
    assert result.returncode == 0, f"KVRANK_GRAM_BACKEND={backend} failed:\n{result.stderr}"
    return json.loads(result.stdout)["models"]


def close(found, expected, relative=1e-5):
    return abs(found - expected) <= relative * abs(expected) + relative / 10


def bf16_kernel_available(path):
    result = run(["analyze", path, "--format", "json"], "bf16")
    if result.returncode == 0:
        return True
    assert result.returncode == 2 and result.stderr == NO_KERNEL and result.stdout == "", result.stderr
    return False


def products_line(**environment):
    """The `-v` line that says what runs the products (and whether auto takes the bf16 kernel)."""
    with tempfile.TemporaryDirectory() as tmp:
        out, ref = os.path.join(tmp, "ckpt"), os.path.join(tmp, "ref")
        writer.write_family("llama", out, ref, dtype="BF16", seed=1, layers=1, heads=2)
        result = subprocess.run([KVRANK, "-v", "analyze", out, "--format", "json"],
                                capture_output=True, text=True, env=dict(os.environ, **environment))
    lines = [line for line in result.stderr.splitlines() if "products:" in line]
    assert len(lines) == 1, result.stderr
    return lines[0]


def onednn_f32_available(path):
    result = run(["analyze", path, "--format", "json"], "onednn-f32")
    if result.returncode == 0:
        return True
    assert (result.returncode, result.stdout, result.stderr) == (2, "", NO_ONEDNN_F32), result.stderr
    return False


class GramBackends(unittest.TestCase):
    def check_metrics(self, got_models, want_models, where, relative=1e-5):
        for got, want in zip(got_models, want_models):
            self.assertEqual(len(got["layers"]), len(want["layers"]), where)
            for a, b in zip(got["layers"], want["layers"]):
                at = f"{where} {got['repr']} layer {b['layer']}"
                self.assertEqual(a["pcs_90"], b["pcs_90"], at)
                for key in ("erank", "erank_centered", "mean_similarity"):
                    self.assertTrue(close(a[key], b[key], relative),
                                    f"{at}: {key} {a[key]!r} vs {b[key]!r}")
                for key in ("head_erank", "head_norm"):
                    for x, y in zip(a[key], b[key]):
                        self.assertTrue(close(x, y, relative), f"{at}: {key} {a[key]!r} vs {b[key]!r}")

    def test_backends_agree_on_bf16_checkpoints(self):
        kernel = None
        for family, kwargs, with_reference in CASES:
            with self.subTest(family=family), tempfile.TemporaryDirectory() as tmp:
                out, ref = os.path.join(tmp, "ckpt"), os.path.join(tmp, "ref")
                writer.write_family(family, out, ref, dtype="BF16", seed=11, layers=2, **kwargs)
                if kernel is None:
                    kernel = bf16_kernel_available(out)
                f32 = analyze(out, "f32")
                self.check_metrics(analyze(out, "auto"), f32, f"{family} auto vs f32")
                if not kernel:
                    continue
                bf16 = analyze(out, "bf16")
                self.check_metrics(bf16, f32, f"{family} bf16 vs f32")
                self.assertEqual(analyze(out, "bf16-onednn"), bf16, f"{family} bf16-onednn")
                self.check_metrics(analyze(out, "bf16", threads=1), bf16, f"{family} bf16 1 thread")
                if with_reference:
                    expected = [{"repr": r, "layers": reference.cmd_heads(os.path.join(ref, r + ".npz"))}
                                for r in REPRS]
                    self.check_metrics(bf16, expected, f"{family} bf16 vs reference")
        if not kernel:
            self.skipTest("no bf16 Gram kernel in this build or on this CPU (its error was checked)")

    def test_onednn_f32_agrees_with_f32(self):
        with tempfile.TemporaryDirectory() as tmp:
            checkpoints = []
            for dtype in ("F32", "BF16"):
                out = os.path.join(tmp, "llama_" + dtype)
                writer.write_family("llama", out, out + "_ref", dtype=dtype, seed=12, layers=2,
                                    heads=8, kv_heads=2, head_dim=40, d_model=320)
                checkpoints.append(("llama " + dtype, out))
            for family, options in LATENT_CASES:
                out = os.path.join(tmp, family)
                subprocess.run([sys.executable, LATENT_WRITER, family, out, out + "_ref", *options],
                               check=True)
                checkpoints.append((family, out))
            if not onednn_f32_available(checkpoints[0][1]):
                self.skipTest("no oneDNN float32 kernel in this build or on this CPU (its error "
                              "was checked)")
            generic = "float32 products on oneDNN" in products_line(OPENBLAS_CORETYPE="Prescott")
            for name, path in checkpoints:
                f32 = analyze(path, "f32")
                onednn = analyze(path, "onednn-f32")
                self.check_metrics(onednn, f32, f"{name} onednn-f32 vs f32", relative=1e-6)
                self.check_metrics(analyze(path, "onednn-f32", threads=1), f32,
                                   f"{name} onednn-f32 1 thread vs f32", relative=1e-6)
                if generic and "BF16" not in name:  # bf16 weights may take the bf16 kernel
                    # The same kernels for the double steps (LAPACK) too: bit for bit.
                    prescott = [run(["analyze", path, "--repr", ",".join(REPRS), "--format", "json"],
                                    backend, OPENBLAS_CORETYPE="Prescott")
                                for backend in ("auto", "onednn-f32")]
                    self.assertEqual(*[json.loads(p.stdout)["models"] for p in prescott], name)

    def test_cpu_without_bf16_falls_back_to_f32(self):
        # ONEDNN_MAX_CPU_ISA caps the ISA oneDNN reports, as on a CPU without AVX512-BF16.
        no_bf16 = dict(ONEDNN_MAX_CPU_ISA="AVX2")
        with tempfile.TemporaryDirectory() as tmp:
            out, ref = os.path.join(tmp, "ckpt"), os.path.join(tmp, "ref")
            # 512 × 512 rows of d 512: large enough for auto to take the bf16 kernel when it can.
            writer.write_family("llama", out, ref, dtype="BF16", seed=5, layers=1, heads=8,
                                head_dim=64, d_model=512)
            args = ["analyze", out, "--format", "json"]
            result = run(args, "bf16", **no_bf16)
            self.assertEqual((result.returncode, result.stdout, result.stderr), (2, "", NO_KERNEL))
            # Without bf16, auto is f32 or, where OpenBLAS runs generic kernels, onednn-f32 (-v
            # says which), bit for bit.
            on_onednn = "float32 products on oneDNN" in products_line(**no_bf16)
            expected = json.loads(run(args, "onednn-f32" if on_onednn else "f32",
                                      **no_bf16).stdout)["models"]
            f32 = json.loads(run(args, "f32").stdout)["models"]
            capped = run(args, "auto", **no_bf16)
            self.assertEqual(capped.returncode, 0, capped.stderr)
            self.assertEqual(json.loads(capped.stdout)["models"], expected)
            if not bf16_kernel_available(out):
                return
            # Where the float32 products run on generic kernels (forced here with OpenBLAS's own
            # variable) auto takes oneDNN (bf16 or onednn-f32): other round-off than f32.
            generic = run(args, "auto", OPENBLAS_CORETYPE="Prescott")
            self.assertNotEqual(json.loads(generic.stdout)["models"], f32)
            # On OpenBLAS's AVX2 kernels auto keeps the faster f32 path unless the CPU has AMX;
            # -v says which, and the results must agree with what it says.
            haswell = dict(OPENBLAS_CORETYPE="Haswell")
            says_f32 = "only when asked" in products_line(**haswell)
            vector = [json.loads(run(args, backend, **haswell).stdout)["models"]
                      for backend in ("auto", "f32")]
            self.assertEqual(vector[0] == vector[1], says_f32)

    def test_kernels_compiled_aside_only_for_a_gram_on_onednn(self):
        # With 2 threads a spare thread runs the coming Gram's first product, to compile oneDNN's
        # kernels while the first layer is read (gram_backend.hpp): on a dense bf16 model one
        # product more than on one thread, the same implementation, shape and layouts as the
        # Gram's first (so its kernel is the one compiled); none on a latent model, whose bases are
        # float32 products that take the BLAS. ONEDNN_VERBOSE lists every product, on stdout.
        # bf16-onednn: the bf16 Grams on oneDNN even where kvrank's own kernel (nothing to compile,
        # no oneDNN product at all) would take them.
        def onednn_products(path, threads, tmp, backend="bf16-onednn"):
            result = run(["analyze", path, "--format", "json", "-o", os.path.join(tmp, "r.json")],
                         backend, threads, ONEDNN_VERBOSE="1")
            self.assertEqual(result.returncode, 0, result.stderr)
            fields = [line.split(",") for line in result.stdout.splitlines()
                      if line.startswith("onednn_verbose,")]
            # Each product without its time (the last field).
            return [",".join(f[:-1]) for f in fields if {"exec", "matmul"} <= set(f)]

        with tempfile.TemporaryDirectory() as tmp:
            dense, ref = os.path.join(tmp, "ckpt"), os.path.join(tmp, "ref")
            writer.write_family("llama", dense, ref, dtype="BF16", seed=5, layers=2, heads=4,
                                head_dim=40, d_model=320)  # depth 320: two slices of 256
            if not bf16_kernel_available(dense):
                self.skipTest("no bf16 Gram kernel in this build or on this CPU")
            one_thread = onednn_products(dense, 1, tmp)
            self.assertGreater(len(one_thread), 0)  # the Grams themselves
            two_threads = onednn_products(dense, 2, tmp)
            self.assertEqual(collections.Counter(two_threads),
                             collections.Counter(one_thread + one_thread[:1]))
            self.assertEqual(onednn_products(os.path.join(harness.TINY, "mla"), 2, tmp), [])
            own = "kvrank's" in run(["-v", "analyze", dense, "--format", "json", "-o",
                                     os.path.join(tmp, "r.json")], "bf16").stderr
            self.assertEqual(onednn_products(dense, 2, tmp, "bf16") == [], own)

    def test_verbose_names_the_kernel_that_forms_the_grams(self):
        # -v names each model's Gram kernel from its weights: bf16 Grams only for BF16 weights; F16
        # and F32 values are not bfloat16s and take the float32 SYRK on the BLAS, as oneDNN's own
        # log confirms (no product on oneDNN). It once said "bf16 Grams" for every model. bf16
        # names its kernel, oneDNN's or kvrank's own (no oneDNN product); bf16-onednn is oneDNN's.
        with tempfile.TemporaryDirectory() as tmp:
            paths = {}
            for dtype in ("BF16", "F16", "F32"):
                paths[dtype] = os.path.join(tmp, dtype)
                writer.write_family("llama", paths[dtype], paths[dtype] + "_ref", dtype=dtype,
                                    seed=5, layers=1, heads=4, head_dim=40, d_model=320)
            kernel = bf16_kernel_available(paths["BF16"])
            for backend, dtype in itertools.product(["bf16-onednn", "bf16"] if kernel else ["f32"],
                                                    paths):
                path = paths[dtype]
                result = run(["-v", "analyze", path, "--format", "json", "-o",
                              os.path.join(tmp, "r.json")], backend, 1, ONEDNN_VERBOSE="1")
                self.assertEqual(result.returncode, 0, result.stderr)
                on_bf16 = backend != "f32" and dtype == "BF16"
                said = [line for line in result.stderr.splitlines() if "Grams" in line]
                self.assertEqual(len(said), 1, result.stderr)
                own = said[0].endswith("bf16 Grams (kvrank's AVX512-BF16 kernel)")
                self.assertFalse(own and backend != "bf16", said)
                want = f"kvrank: debug: {path}: {dtype} weights: " + (
                    "float32 Grams (SYRK) on the BLAS" if not on_bf16 else
                    "bf16 Grams (kvrank's" if own else "bf16 Grams on oneDNN")
                self.assertTrue(said[0].startswith(want), (said, want))
                self.assertEqual(result.stderr.count("bf16 Grams"), int(on_bf16), result.stderr)
                products = [line for line in result.stdout.splitlines()
                            if line.startswith("onednn_verbose,") and ",exec," in line]
                self.assertEqual(bool(products), on_bf16 and not own, (dtype, products[:2]))

    def test_verbose_names_the_kernel_of_mla_latent_grams(self):
        # MLA's q_a rows keep their bf16 values where kvrank's own kernel runs (the gain of
        # q_a_layernorm stays beside them): -v names that kernel for a BF16 checkpoint, and the
        # float32 SYRK where the Grams are float32. It once said float32 for every latent model.
        with tempfile.TemporaryDirectory() as tmp:
            out, ref = os.path.join(tmp, "mla"), os.path.join(tmp, "mla_ref")
            harness.run_writer("write_latent_checkpoints.py", "mla", out, ref, "--dtype", "BF16",
                               "--q-lora-rank", "10", "--layers", "1")
            for backend in ["bf16", "f32"] if bf16_kernel_available(out) else ["f32"]:
                result = run(["-v", "analyze", out, "--format", "json", "-o",
                              os.path.join(tmp, "r.json")], backend, 1)
                self.assertEqual(result.returncode, 0, result.stderr)
                said = [line for line in result.stderr.splitlines() if "Grams" in line]
                self.assertEqual(len(said), 1, result.stderr)
                want = ("bf16 Grams (kvrank's AVX512-BF16 kernel)" if backend == "bf16" else
                        "float32 Grams (SYRK) on the BLAS")
                self.assertTrue(said[0].endswith(want), (said, want))

    def test_wrong_backend_name_is_a_usage_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, ref = os.path.join(tmp, "ckpt"), os.path.join(tmp, "ref")
            writer.write_family("llama", out, ref, dtype="BF16", seed=3, layers=1, heads=4)
            result = run(["analyze", out, "--format", "json"], "fast")
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertEqual(result.stdout, "")
            self.assertEqual(result.stderr, "kvrank: error: KVRANK_GRAM_BACKEND: expected auto, f32, "
                                            "bf16, bf16-onednn or onednn-f32, found \"fast\"\n")


if __name__ == "__main__":
    harness.main_unittest(sys.modules[__name__])
