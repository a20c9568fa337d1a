#!/usr/bin/env python3
"""analyze_state_dict on a PyTorch model: the same numbers as the command line on the same
weights saved to safetensors (float32 and bfloat16), and memory of one layer beyond the caller's
tensors (no float32 copy of the model). Skipped (exit 77) where Debian's python3-torch is absent.

  python3 python/tests/test_torch.py build/kvrank   (ctest: python.test_torch, PYTHONPATH set)
"""
import json
import os
import sys
import types
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402

try:
    import torch
except ImportError:
    harness.skip("PyTorch is not installed (Debian: python3-torch, scripts/setup.sh)")

import kvrank  # noqa: E402
import reference  # noqa: E402  (scripts/)
from write_family_checkpoints import write_safetensors_entries  # noqa: E402


class Attention(torch.nn.Module):
    def __init__(self, d_model, heads, kv_heads, head_dim):
        super().__init__()
        self.q_proj = torch.nn.Linear(d_model, heads * head_dim, bias=False)
        self.k_proj = torch.nn.Linear(d_model, kv_heads * head_dim, bias=False)
        self.v_proj = torch.nn.Linear(d_model, kv_heads * head_dim, bias=False)
        self.o_proj = torch.nn.Linear(heads * head_dim, d_model, bias=False)


class Layer(torch.nn.Module):
    def __init__(self, *geometry):
        super().__init__()
        self.self_attn = Attention(*geometry)


class Model(torch.nn.Module):
    """Llama's attention tensor names: model.layers.{i}.self_attn.{q,k,v,o}_proj.weight."""

    def __init__(self, layers, d_model, heads, kv_heads, head_dim):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            Layer(d_model, heads, kv_heads, head_dim) for _ in range(layers))
        self.config = {"model_type": "llama", "num_hidden_layers": layers,
                       "hidden_size": d_model, "num_attention_heads": heads,
                       "num_key_value_heads": kv_heads, "head_dim": head_dim}


def build(dtype, layers=4, d_model=64, heads=8, kv_heads=2, head_dim=8):
    torch.manual_seed(7)
    wrapper = torch.nn.Module()
    wrapper.model = Model(layers, d_model, heads, kv_heads, head_dim)
    return wrapper.to(dtype), wrapper.model.config


def save_safetensors(state_dict, config, folder):
    """The same weights as a Hugging Face folder, written byte for byte from the tensors."""
    os.makedirs(folder)
    names = {torch.float32: "F32", torch.bfloat16: "BF16"}
    def raw(t):  # bf16 through its bit patterns: numpy has no bfloat16
        t = t.contiguous()
        return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()

    entries = {name: (names[t.dtype], list(t.shape), raw(t)) for name, t in state_dict.items()}
    write_safetensors_entries(os.path.join(folder, "model.safetensors"), entries)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    return folder


def without_paths(document):
    for model in document["models"]:
        model.pop("path")
        model.pop("run", None)  # "in memory" unless named; files have none
        model["source"].pop("input")  # the argument as given: a folder, or nothing in memory
    return document


def peak_rss_since_reset():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def reset_peak_rss():
    """Linux: VmHWM starts again from the current resident size."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


class TorchTest(harness.TestCase):
    def test_state_dict_equals_the_command_line_on_the_saved_weights(self):
        for dtype in (torch.float32, torch.bfloat16):
            with self.subTest(dtype=str(dtype)):
                model, config = build(dtype)
                state_dict = model.state_dict()
                folder = save_safetensors(state_dict, config, self.path(str(dtype)))
                for repr_name in ("qk", "ov"):
                    got = kvrank.analyze_state_dict(state_dict, config, label="m",
                                                    repr=repr_name).to_dict()
                    want = harness.analyze_json(folder, "--label", "m", "--repr", repr_name)
                    self.assertEqual(without_paths(got), without_paths(want))
                    # and against the independent float64 reference on the saved file
                    expected = reference.cmd_llama(folder, repr_name)
                    for layer, ref in zip(got["models"][0]["layers"], expected):
                        self.assertTrue(harness.close(layer["erank"], ref["erank"]),
                                        (layer["layer"], layer["erank"], ref["erank"]))

    def test_to_pandas_rows(self):
        model, config = build(torch.float32, layers=3)
        result = kvrank.analyze_state_dict(model.state_dict(), config, repr="qk,ov,k")
        try:
            table = result.to_pandas()
        except ImportError:
            self.fail("pandas is missing (Debian: python3-pandas, scripts/setup.sh)")
        self.assertEqual(len(table), 3 * 3)  # one model × 3 layers × 3 representations
        self.assertEqual(sorted(set(table["repr"])), ["k", "ov", "qk"])
        document = result.to_dict()
        for model_doc in document["models"]:
            rows = table[table["repr"] == model_doc["repr"]]
            self.assertEqual(list(rows["layer"]), [layer["layer"] for layer in model_doc["layers"]])
            for (_, row), layer in zip(rows.iterrows(), model_doc["layers"]):
                self.assertTrue(harness.close(row["erank"], layer["erank"]))

    def test_tensors_never_read_are_never_touched(self):
        """Whatever the tensors kvrank does not read are — strided, on no device at all (meta),
        sparse, of a dtype it cannot read, not tensors — the numbers are the clean model's."""
        model, config = build(torch.float32, layers=2)
        clean = kvrank.analyze_state_dict(model.state_dict(), config, repr="qk,ov").to_dict()
        state_dict = dict(model.state_dict())
        state_dict.update({
            "model.layers.0.mlp.up_proj.weight": torch.randn(64, 32).t(),  # strided
            "model.layers.0.mlp.down_proj.weight": torch.empty(64, 64, device="meta"),
            "model.layers.1.mlp.up_proj.weight": torch.randn(8, 8).to_sparse(),
            "model.layers.1.mlp.down_proj.weight": torch.randn(8, 8, dtype=torch.complex64),
            "model.layers.1.mlp._extra_state": None,
        })
        got = kvrank.analyze_state_dict(state_dict, config, repr="qk,ov").to_dict()
        self.assertEqual(got, clean)

    def test_needed_tensors_are_read_whatever_their_layout(self):
        """A strided view (w.t().contiguous().t(): the same values) is copied for its layer; a
        tensor that cannot be read is a one-line kvrank.Error naming it."""
        for dtype in (torch.float32, torch.bfloat16):
            with self.subTest(dtype=str(dtype)):
                model, config = build(dtype, layers=2)
                clean = kvrank.analyze_state_dict(model.state_dict(), config, repr="qk,ov")
                strided = {name: t.t().contiguous().t() if t.dim() == 2 else t
                           for name, t in model.state_dict().items()}
                self.assertFalse(strided["model.layers.1.self_attn.k_proj.weight"].is_contiguous())
                got = kvrank.analyze_state_dict(strided, config, repr="qk,ov")
                self.assertEqual(got.to_dict(), clean.to_dict())
        model, config = build(torch.float32, layers=1)
        name = "model.layers.0.self_attn.k_proj.weight"
        weight = model.state_dict()[name]
        cases = [(weight.to("meta"), "could not copy the tensor to the CPU"),
                 (weight.to_sparse(), r"a sparse tensor \(torch.sparse_coo\) is not read"),
                 (weight.to(torch.complex64), "unsupported dtype torch.complex64")]
        for value, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(kvrank.Error) as raised:
                    kvrank.analyze_state_dict(dict(model.state_dict(), **{name: value}), config)
                self.assertRegex(str(raised.exception), f"^<in memory>: {name}: {message}")
                self.assertNotIn("\n", str(raised.exception))

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
    def test_gpu_tensors_are_copied_per_layer(self):
        model, config = build(torch.bfloat16, layers=2)
        clean = kvrank.analyze_state_dict(model, config, repr="qk,ov").to_dict()
        self.assertEqual(kvrank.analyze_state_dict(model.to("cuda"), config,
                                                   repr="qk,ov").to_dict(), clean)

    def test_a_module_and_config_objects(self):
        """An nn.Module is read through its state_dict(); the config may be a dict, an object
        with to_dict(), a dataclass-like namespace, or the module's own `config`."""
        model, config = build(torch.float32, layers=2)
        want = kvrank.analyze_state_dict(model.state_dict(), config).to_dict()

        class PretrainedConfig:  # transformers' configs have to_dict()
            def to_dict(self):
                return dict(config)

        for given in (config, PretrainedConfig(), types.SimpleNamespace(**config)):
            with self.subTest(config=type(given).__name__):
                self.assertEqual(kvrank.analyze_state_dict(model, given).to_dict(), want)
        model.config = PretrainedConfig()  # as a transformers model carries its config
        self.assertEqual(kvrank.analyze_state_dict(model).to_dict(), want)
        with self.assertRaisesRegex(kvrank.Error, "^config: expected a dict or a config object"):
            kvrank.analyze_state_dict(model, 42)
        with self.assertRaisesRegex(kvrank.Error, "^state_dict: expected a mapping of names to "
                                    "tensors or a torch.nn.Module, found int"):
            kvrank.analyze_state_dict(42, config)

    def test_memory_is_one_layer_beyond_the_callers_tensors(self):
        """A 256 MB bf16 model: a float32 copy would add 512 MB; one layer is 16 MB in float32.
        Also when every tensor is a strided view: each is copied for its layer only."""
        model, config = build(torch.bfloat16, layers=32, d_model=1024, heads=16, kv_heads=16,
                              head_dim=64)
        for strided in (False, True):
            with self.subTest(strided=strided):
                state_dict = model.state_dict()
                if strided:
                    state_dict = {name: t.t().contiguous().t() for name, t in state_dict.items()}
                self.check_peak_memory(state_dict, config)

    def check_peak_memory(self, state_dict, config):
        model_bytes = sum(t.numel() * t.element_size() for t in state_dict.values())
        # Warm up on one layer of the same shapes (the BLAS's buffers, the allocator's pools), so
        # that what is measured below is the 32-layer run itself.
        one_layer, one_config = build(torch.bfloat16, layers=1, d_model=1024, heads=16,
                                      kv_heads=16, head_dim=64)
        kvrank.analyze_state_dict(one_layer.state_dict(), one_config, threads=1)
        reset_peak_rss()
        before = peak_rss_since_reset()
        result = kvrank.analyze_state_dict(state_dict, config, threads=1)
        grown = peak_rss_since_reset() - before
        self.assertEqual(len(result.to_dict()["models"][0]["layers"]), 32)
        self.assertLess(grown, model_bytes / 4, f"peak grew by {grown >> 20} MB for a "
                        f"{model_bytes >> 20} MB model")


if __name__ == "__main__":
    harness.main_unittest()
