#!/usr/bin/env python3
"""End-to-end: how many threads `kvrank analyze` runs on (docs/choices.md, `--threads`). Without
--threads it takes OMP_NUM_THREADS, as OpenMP programs, OpenBLAS, numpy and PyTorch do: its first
number ("4,2" is nested OpenMP's), at most the processors this process may use (its CPU affinity),
and all of those when the variable is unset or not a positive number. --threads wins over the
variable. `-v` logs the count as `threads: N`; the results do not depend on where it came from.
A run on 2 threads gives the bytes of its run on one: the eigensolvers keep OpenBLAS on the calling
thread (metric/eigensolvers.cpp), where each of their level-2 calls used to wake the pool (20 times
slower than one thread, and the last digits moved), and a latent layer's sums are cut by its shape
(its latent Grams shared out by tiles, their Cholesky factor on one thread).

Run from the repository root: python3 tests/e2e/test_threads.py path/to/kvrank
"""
import os
import re
import unittest

import harness  # noqa: E402  (tests/e2e is on sys.path)

MHA = os.path.join(harness.TINY, "mha")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                    "KVRANK_THREADS_FITTED")


def environment(omp_num_threads=None):
    env = {name: value for name, value in os.environ.items() if name not in THREAD_VARIABLES}
    if omp_num_threads is not None:
        env["OMP_NUM_THREADS"] = omp_num_threads
    return env


class Threads(harness.TestCase):
    def threads_used(self, *args, omp_num_threads=None, cpus=None):
        """The `threads: N` that `kvrank -v analyze` logs, and its JSON result."""
        output = self.path("result.json")
        affinity = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        proc = harness.run("-v", "analyze", MHA, "--format", "json", "-o", output, *args,
                           env=environment(omp_num_threads), preexec_fn=affinity)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        counts = re.findall(r"^kvrank: debug: threads: (\d+)$", proc.stderr, re.MULTILINE)
        self.assertEqual(len(counts), 1, proc.stderr)
        with open(output, encoding="utf-8") as result:
            return int(counts[0]), result.read()

    def test_unset_takes_the_processors_this_process_may_use(self):
        usable = len(os.sched_getaffinity(0))
        self.assertEqual(self.threads_used()[0], usable)
        for text in ("", "0", "-3", "many", " "):
            with self.subTest(OMP_NUM_THREADS=text):
                self.assertEqual(self.threads_used(omp_num_threads=text)[0], usable)

    def test_omp_num_threads_is_the_default(self):
        usable = len(os.sched_getaffinity(0))
        _, reference = self.threads_used("--threads", "1")
        for text, expected in (("1", 1), ("2", min(2, usable)), ("3,1", min(3, usable)),
                               ("100000", usable)):  # capped at the processors, as OpenBLAS does
            with self.subTest(OMP_NUM_THREADS=text):
                threads, result = self.threads_used(omp_num_threads=text)
                self.assertEqual(threads, expected)
                if threads == 1:  # the same thread count: the same bytes (README)
                    self.assertEqual(result, reference)

    def test_threads_option_wins(self):
        self.assertEqual(self.threads_used("--threads", "2", omp_num_threads="1")[0], 2)
        self.assertEqual(self.threads_used("--threads", "1", omp_num_threads="2")[0], 1)

    def test_small_models_give_the_same_bytes_on_one_and_two_threads(self):
        for name in ("mha", "gqa", "mla", "lrkv-r8"):
            with self.subTest(model=name):
                results = []
                for threads in ("1", "2"):
                    output = self.path(f"{name}-{threads}.json")
                    proc = harness.run("analyze", os.path.join(harness.TINY, name), "--format",
                                       "json", "--similarity", "-o", output, "--threads", threads)
                    self.assertEqual(proc.returncode, 0, proc.stderr)
                    with open(output, encoding="utf-8") as result:
                        results.append(result.read())
                self.assertEqual(results[0], results[1])

    def synth(self, name, *flags):
        checkpoint = self.path(name)
        proc = harness.run("synth", *flags, "--layers", "1", "-o", checkpoint)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return checkpoint

    def assert_same_bytes_on_any_thread_count(self, checkpoint, *options):
        """`analyze` on 1, 2 and 3 threads, under `auto` and under `f32` (float32 Grams), and both
        again on OpenBLAS's Haswell kernels (OPENBLAS_CORETYPE; Zen 5's, where `auto` takes the
        float32 products to oneDNN), whose threaded products sum in another order than on one
        thread. Three threads share the tiles, slices and slabs out unevenly, and more threads than
        a 2-core machine has are still a team of three. A build without OpenMP (the sanitizer
        build) has no second thread to differ: there each backend runs once on the CPU's kernels,
        for the sanitizers' sake (a 4096-wide float32 layer takes a minute there)."""
        openmp = harness.built_with_openmp(harness.KVRANK)
        thread_counts = ("1", "2", "3") if openmp else ("1",)
        variants = [(backend, coretype) for coretype in ((None, "Haswell") if openmp else (None,))
                    for backend in ("auto", "f32")]
        for backend, coretype in variants:
            with self.subTest(KVRANK_GRAM_BACKEND=backend, OPENBLAS_CORETYPE=coretype):
                env = dict(os.environ, KVRANK_GRAM_BACKEND=backend)
                if coretype:
                    env["OPENBLAS_CORETYPE"] = coretype
                results = []
                for threads in thread_counts:
                    name = f"{os.path.basename(checkpoint)}-{backend}-{coretype}-{threads}.json"
                    output = self.path(name)
                    proc = harness.run("analyze", checkpoint, *options, "--format", "json",
                                       "--similarity", "-o", output, "--threads", threads,
                                       env=env)
                    self.assertEqual(proc.returncode, 0, proc.stderr)
                    with open(output, encoding="utf-8") as result:
                        results.append(result.read())
                for threads, result in zip(thread_counts[1:], results[1:]):
                    self.assertEqual(result, results[0], f"{threads} threads against 1")

    def test_a_threaded_latent_layer_gives_the_same_bytes_on_any_thread_count(self):
        # A DeepSeek-shaped layer of 2.1 M attention weights: past the line where a layer runs on
        # every thread, its contraction's H × H sum long enough to be cut into slices of the
        # depth. The slices follow the shape, not the threads (metric/blas.cpp's syrk_double);
        # one slice per thread moved the last digits between 1 and 2 threads. Under `f32` its
        # latent Grams are float32 products, which their library split by the thread count before
        # they were shared out by tiles (syrk_upper_tiled), as was their Cholesky factor (now on
        # one thread, as the eigensolvers).
        checkpoint = self.synth("mla", "--family", "deepseek_v2", "--heads", "32", "--d-model",
                                "1024", "--q-lora-rank", "256", "--kv-lora-rank", "128",
                                "--nope-dim", "64", "--rope-dim", "32", "--v-head-dim", "64",
                                "--dtype", "bf16")
        self.assert_same_bytes_on_any_thread_count(checkpoint, "--repr", "qk,ov")

    def test_a_threaded_float32_gqa_layer_gives_the_same_bytes_on_any_thread_count(self):
        # float32 weights: the Grams are float32 products, their sizes too far apart to be formed
        # side by side (4096 query rows, 1024 key rows), so each is shared over the threads, by
        # tiles of its triangle (syrk_upper_tiled); oneDNN's own split of one product moved the
        # last digits with the thread count.
        checkpoint = self.synth("gqa", "--family", "llama", "--heads", "32", "--kv-heads", "8",
                                "--head-dim", "128", "--d-model", "4096", "--dtype", "f32")
        self.assert_same_bytes_on_any_thread_count(checkpoint)

    def test_affinity_bounds_the_default(self):
        usable = sorted(os.sched_getaffinity(0))
        if len(usable) < 2:
            self.skipTest("one processor: no smaller affinity to set")
        self.assertEqual(self.threads_used(cpus={usable[0]})[0], 1)
        self.assertEqual(self.threads_used(omp_num_threads="2", cpus={usable[0]})[0], 1)


if __name__ == "__main__":
    harness.main_unittest()
