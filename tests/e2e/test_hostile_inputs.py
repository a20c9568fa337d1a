"""End-to-end: kvrank's inputs against hostile and broken files (docs/input-limits.md).

Usage: python3 tests/e2e/test_hostile_inputs.py path/to/kvrank   (run from the repository root)

Each case is an input an attacker (or a broken export) could hand kvrank. Every refused input must
give exit 2, nothing on stdout and one line on stderr, `kvrank: error: <the file>...`, within a
bounded time (the timeout of each run) and memory (peak RSS measured with wait4, under 2 GB and far
less where the input is small); valid inputs give exit 0. Never a signal, never exit 3. Class 6
(truncation while mapped → SIGBUS) needs a file shrunk mid-run and is tested in
tests/io/hostile_inputs_test.cpp, like the unit-level side of the others.

Checkpoints are written here with numpy (tests/writers/write_family_checkpoints.py's safetensors
writer, tests/writers/write_latent_checkpoints.py); nothing is written by kvrank's own synth.
"""
import json
import os
import struct
import subprocess
import tempfile
import threading
import zipfile

import numpy as np

import harness  # puts scripts/ on sys.path
from write_family_checkpoints import write_safetensors_entries

MB = 1 << 20
DEEP = 100_000  # nesting levels of the deep-JSON cases


class Run:
    def __init__(self, code, out, err, peak_rss):
        self.code, self.out, self.err, self.peak_rss = code, out, err, peak_rss


def kvrank(*args, timeout=60):
    """Runs kvrank; the peak RSS comes from wait4 on this one child."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen([harness.KVRANK, *args], stdout=out, stderr=err,
                                   stdin=subprocess.DEVNULL)
        timer = threading.Timer(timeout, process.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Run(process.returncode, out.read().decode(errors="replace"),
                   err.read().decode(errors="replace"), usage.ru_maxrss * 1024)


def f32(values):
    values = np.ascontiguousarray(values, dtype="<f4")
    return ("F32", list(values.shape), values.tobytes())


def write_llama(folder, layers=2, heads=2, head_dim=4, d_model=8, scale=1.0, extra=None, seed=0):
    """A small llama-layout folder (config.json + model.safetensors); `extra`: more entries."""
    rng = np.random.default_rng(seed)
    entries = {}
    for i in range(layers):
        base = f"model.layers.{i}.self_attn."
        for name, shape in (("q_proj", (heads * head_dim, d_model)),
                            ("k_proj", (heads * head_dim, d_model)),
                            ("v_proj", (heads * head_dim, d_model)),
                            ("o_proj", (d_model, heads * head_dim))):
            entries[base + name + ".weight"] = f32(rng.standard_normal(shape) * scale)
    entries.update(extra or {})
    os.makedirs(folder, exist_ok=True)
    write_safetensors_entries(os.path.join(folder, "model.safetensors"), entries)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "hidden_size": d_model, "num_attention_heads": heads,
                   "num_key_value_heads": heads, "head_dim": head_dim,
                   "num_hidden_layers": layers}, f)
    return folder


def write_raw_safetensors(path, header_text):
    data = header_text.encode()
    data += b" " * (-len(data) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(data)) + data)


def deep_array(levels):
    return "[" * levels + "]" * levels


class Case(harness.TestCase):
    def assertRefused(self, run, file, *fragments, max_rss=2 << 30):
        """Exit 2, no stdout, one line `kvrank: error: <file>...` holding every fragment."""
        self.assertEqual(run.code, 2, run.err)
        self.assertEqual(run.out, "")
        lines = run.err.splitlines()
        self.assertEqual(len(lines), 1, run.err[:2000])
        self.assertTrue(lines[0].startswith("kvrank: error: " + file), lines[0][:500])
        for fragment in fragments:
            self.assertIn(fragment, lines[0])
        self.assertLess(len(lines[0]), 1000, "the message must not print the input")
        self.assertLess(run.peak_rss, max_rss)

    def assertSucceeded(self, run, max_rss=2 << 30):
        self.assertEqual(run.code, 0, run.err[:2000])
        self.assertLess(run.peak_rss, max_rss)

    def analyze_json(self, *args):
        run = kvrank("analyze", "-q", "--format", "json", *args)
        self.assertSucceeded(run)
        return json.loads(run.out)


class DeepJsonNesting(Case):
    """Class 1: a value nested 100,000 levels deep in every JSON input."""

    def test_safetensors_header_shape_and_offsets(self):
        for key in ("shape", "data_offsets"):
            with self.subTest(key=key):
                entry = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
                text = json.dumps({"t": entry}).replace(json.dumps(entry[key]), deep_array(DEEP))
                path = self.path(f"deep_{key}.safetensors")
                write_raw_safetensors(path, text)
                self.assertRefused(kvrank("inspect", path), path, "nests deeper than 64 levels")

    def test_config_index_and_map(self):
        model = write_llama(self.path("model"))
        config = os.path.join(model, "config.json")
        with open(config, "w") as f:
            f.write('{"num_attention_heads": ' + deep_array(DEEP) + "}")
        self.assertRefused(kvrank("analyze", model), config, "nests deeper than 64 levels")

        model = write_llama(self.path("indexed"))
        index = os.path.join(model, "model.safetensors.index.json")
        with open(index, "w") as f:
            f.write('{"weight_map": {"x": ' + deep_array(DEEP) + "}}")
        self.assertRefused(kvrank("inspect", model), index, "nests deeper than 64 levels")

        map_file = self.path("map.json")
        with open(map_file, "w") as f:
            f.write('{"k": ' + deep_array(DEEP) + "}")
        model = write_llama(self.path("mapped"))
        self.assertRefused(kvrank("analyze", model, "--map", map_file), map_file,
                           "nests deeper than 64 levels")

    def test_result_json_for_check_and_plot(self):
        result = self.path("result.json")
        with open(result, "w") as f:
            f.write('{"schema_version": 1, "models": ' + deep_array(DEEP) + "}")
        self.assertRefused(kvrank("check", result, "--baseline", result), result,
                           "nests deeper than 64 levels")
        self.assertRefused(kvrank("plot", result, "-o", self.path("fig.svg")), result,
                           "nests deeper than 64 levels")
        self.assertFalse(os.path.exists(self.path("fig.svg")))

    def test_a_deep_wrong_value_is_not_printed(self):
        # 60 levels pass the bound; the message must quote an excerpt, not the whole value.
        model = write_llama(self.path("model"))
        config = os.path.join(model, "config.json")
        with open(config, "w") as f:
            f.write('{"num_attention_heads": ' + deep_array(60) + "}")
        run = kvrank("analyze", model)
        self.assertRefused(run, config, "num_attention_heads")
        self.assertIn("...", run.err)


class RegexRecursion(Case):
    """Class 2: 100,000-character tensor names beside a valid model."""

    def test_long_names_beside_a_valid_model(self):
        extra = {"x." * 50_000 + "k_proj": f32([1.0]),
                 "model." + "layers." * 14_000 + "0.self_attn.k_proj.bias": f32([1.0]),
                 "a" * 100_000: f32([1.0])}
        model = write_llama(self.path("model"), extra=extra)
        report = self.analyze_json(model)
        self.assertEqual(len(report["models"][0]["layers"]), 2)


class UnboundedReads(Case):
    """Class 7: devices, FIFOs and folders where a JSON file is expected."""

    def test_devices(self):
        for device in ("/dev/zero", "/dev/urandom"):
            with self.subTest(device=device):
                self.assertRefused(kvrank("check", device, "--baseline", device, timeout=20),
                                   device, "not a regular file", max_rss=200 * MB)
                self.assertRefused(kvrank("plot", device, "-o", self.path("f.svg"), timeout=20),
                                   device, "not a regular file", max_rss=200 * MB)
        model = write_llama(self.path("model"))
        self.assertRefused(kvrank("analyze", model, "--map", "/dev/zero", timeout=20),
                           "/dev/zero", "not a regular file", max_rss=200 * MB)

    def test_fifo_without_a_writer_does_not_block(self):
        fifo = self.path("results.json")
        os.mkfifo(fifo)
        self.assertRefused(kvrank("check", fifo, "--baseline", fifo, timeout=20), fifo,
                           "not a regular file")
        self.assertRefused(kvrank("plot", fifo, "-o", self.path("f.svg"), timeout=20), fifo,
                           "not a regular file")

    def test_folder(self):
        self.assertRefused(kvrank("check", self.dir, "--baseline", self.dir), self.dir,
                           "is a folder")


class NpzDeflateBomb(Case):
    """Class 8: a ~1 MB .npz whose unused member inflates to 256 MiB."""

    def write_bomb(self):
        path = self.path("bomb.npz")
        rng = np.random.default_rng(1)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            for i in range(2):
                for role in ("k_proj", "v_proj"):
                    with archive.open(f"layers.{i}.{role}.npy", "w") as member:
                        np.lib.format.write_array(member, rng.standard_normal((8, 8)).astype("<f4"))
            header = {"descr": "<f4", "fortran_order": False, "shape": (64 * MB,)}
            with archive.open("unused.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array_header_1_0(member, header)
                zeros = bytes(4 * MB)
                for _ in range(64):
                    member.write(zeros)
        self.assertLess(os.path.getsize(path), 4 * MB)
        return path

    def test_unused_member_is_never_inflated(self):
        path = self.write_bomb()
        run = kvrank("inspect", path)
        self.assertSucceeded(run, max_rss=200 * MB)
        self.assertIn("unused", run.out)
        report = self.analyze_json(path, "--heads", "2")
        self.assertEqual(len(report["models"][0]["layers"]), 2)
        run = kvrank("analyze", "-q", path, "--heads", "2")
        self.assertSucceeded(run, max_rss=200 * MB)


class TrustingConfigCounts(Case):
    """Class 9: LRKV / MLA num_hidden_layers cross-checked with the tensors."""

    def write_latent(self, family):
        folder, ref = self.path(family), self.path(family + "_ref")
        harness.run_writer("write_latent_checkpoints.py", family, folder, ref, "--layers", "3")
        return folder

    def set_layers(self, folder, count):
        config_path = os.path.join(folder, "config.json")
        with open(config_path) as f:
            config = json.load(f)
        config["num_hidden_layers"] = count
        with open(config_path, "w") as f:
            json.dump(config, f)
        return config_path

    def test_huge_count_names_the_missing_tensor(self):
        for family, marker in (("lrkv", "k_lora_a"), ("mla", "kv_a_proj_with_mqa")):
            with self.subTest(family=family):
                folder = self.write_latent(family)
                self.set_layers(folder, 2_000_000_000)
                self.assertRefused(kvrank("analyze", folder), folder,
                                   f"model.layers.3.self_attn.{marker}.weight",
                                   "says 2000000000 layers", max_rss=300 * MB)

    def test_small_count_analyses_every_layer_the_tensors_hold(self):
        for family in ("lrkv", "mla"):
            for count in (0, 1):
                with self.subTest(family=family, count=count):
                    folder = self.write_latent(family)
                    self.set_layers(folder, count)
                    report = self.analyze_json(folder)
                    self.assertEqual(len(report["models"][0]["layers"]), 3)


class ScaleDependentResults(Case):
    """Class 10: the metric is scale-invariant; huge or tiny weights are not "all zero"."""

    def test_huge_and_tiny_weights_give_the_unscaled_numbers(self):
        base = self.analyze_json(write_llama(self.path("base"), seed=3))["models"][0]
        for scale in (1e19, 1e30, 1e-25):
            with self.subTest(scale=scale):
                model = write_llama(self.path(f"scaled{scale}"), seed=3, scale=scale)
                scaled = self.analyze_json(model)["models"][0]
                for want, got in zip(base["layers"], scaled["layers"]):
                    self.assertEqual(got["zero_heads"], [])
                    self.assertAlmostEqual(got["erank"], want["erank"], delta=1e-4)
                    self.assertAlmostEqual(got["erank_centered"], want["erank_centered"],
                                           delta=1e-4)
                    # qk: A_h = W_Q W_Kᵀ scales with the square of the weights.
                    for norm, base_norm in zip(got["head_norm"], want["head_norm"]):
                        self.assertAlmostEqual(norm / (base_norm * scale * scale), 1.0, delta=1e-4)

    def test_multiples_of_one_head_have_similarity_at_most_one(self):
        rng = np.random.default_rng(5)
        q0, k0 = rng.standard_normal((4, 8)), rng.standard_normal((4, 8))
        entries = {}
        factors = (1.0, 3.0, 0.1, 7.0)
        q = np.concatenate([c * q0 for c in factors])
        k = np.concatenate([k0 for _ in factors])
        entries["model.layers.0.self_attn.q_proj.weight"] = f32(q)
        entries["model.layers.0.self_attn.k_proj.weight"] = f32(k)
        entries["model.layers.0.self_attn.v_proj.weight"] = f32(k)
        entries["model.layers.0.self_attn.o_proj.weight"] = f32(q.T)
        folder = self.path("multiples")
        os.makedirs(folder)
        write_safetensors_entries(os.path.join(folder, "model.safetensors"), entries)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({"hidden_size": 8, "num_attention_heads": 4, "head_dim": 4}, f)
        layer = self.analyze_json(folder)["models"][0]["layers"][0]
        self.assertLessEqual(layer["mean_similarity"], 1.0)
        self.assertAlmostEqual(layer["mean_similarity"], 1.0, delta=1e-6)
        self.assertAlmostEqual(layer["erank"], 1.0, delta=1e-6)


class HugeCounts(Case):
    """Class 14: counts bounded before anything is allocated for them."""

    def test_baseline_counts(self):
        for args in (["--layers", "1000000000"], ["--layers", "2", "--heads", "30000"],
                     ["--layers", "100000", "--heads", "1000"]):
            with self.subTest(args=args):
                run = kvrank("baseline", *args, timeout=20)
                self.assertRefused(run, "", "fully-redundant baseline is limited to",
                                   max_rss=200 * MB)
        self.assertSucceeded(kvrank("baseline", "--layers", "4", "--heads", "32"))

    def test_layers_flag(self):
        model = write_llama(self.path("model"))
        self.assertRefused(kvrank("analyze", model, "--layers", "1234567"), "",
                           "--layers: layer index 1234567 is too large")

    def test_many_zero_size_tensors_are_refused_quickly(self):
        path = self.path("many.safetensors")
        entry = '{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'
        write_raw_safetensors(path, "{" + ",".join(f'"{i:x}":{entry}' for i in range(300_000))
                              + "}")
        self.assertLess(os.path.getsize(path), 20 * MB)
        self.assertRefused(kvrank("analyze", path, timeout=30), path, "found no attention")

    def test_seven_digit_layer_index_is_named(self):
        name = "model.layers.1234567.self_attn.k_proj.weight"
        model = write_llama(self.path("model"), extra={name: f32(np.ones((8, 8)))})
        self.assertRefused(kvrank("analyze", model), os.path.join(model, "model.safetensors"),
                           name, "layer index 1234567 is too large")


class IndexShardsOutsideTheFolder(Case):
    """Class 16: an index may only name shards inside its own folder."""

    def test_absolute_and_parent_paths(self):
        outside = write_llama(self.path("outside"))
        shard = os.path.join(outside, "model.safetensors")
        for name in (shard, "../outside/model.safetensors", "sub/../../outside/model.safetensors"):
            with self.subTest(name=name):
                folder = self.path("indexed")
                os.makedirs(folder, exist_ok=True)
                index = os.path.join(folder, "model.safetensors.index.json")
                with open(index, "w") as f:
                    json.dump({"weight_map": {"model.layers.0.self_attn.k_proj.weight": name}}, f)
                self.assertRefused(kvrank("inspect", folder), index, "not a file name inside")


class ActivationsAndRepr(Case):
    """Class 17: zero activation tokens and a representation listed twice."""

    def test_zero_tokens(self):
        folder = self.path("capture")
        os.makedirs(folder)
        empty = np.zeros((0, 2, 4), dtype="<f4")
        for which in ("q", "k", "v"):
            np.save(os.path.join(folder, f"layers.0.{which}.npy"), empty)
        self.assertRefused(kvrank("analyze", folder, "--activations"), folder, "layers.0.",
                           "holds no activations")

    def test_repr_listed_twice(self):
        model = write_llama(self.path("model"))
        self.assertRefused(kvrank("analyze", model, "--repr", "qk,qk"), "",
                           "--repr lists qk more than once")
        self.assertEqual(len(self.analyze_json(model, "--repr", "qk,ov")["models"]), 2)


if __name__ == "__main__":
    harness.main_unittest()
