#!/usr/bin/env python3
"""End-to-end: MLA (DeepSeek-V2/V3) and LRKV checkpoints analysed by the real binary agree with the
naive numpy reference built from explicit per-head matrices.

tests/writers/write_latent_checkpoints.py writes each checkpoint in its real tensor layout (with and
without q_lora_rank, rope rows, non-unit RMSNorm gains, FP8 block-scaled weights, LRKV at two
ranks, F32/BF16/F16) together with the explicit per-head W_Q^h, W_K^h, W_V^h, W_O^h it implies;
`scripts/reference.py heads` turns those into the metric by forming every d×d A_h. kvrank works in
the latent basis instead, so agreement checks the basis construction, the gains, the FP8 dequant and
the head slicing at once.

  python3 tests/e2e/test_latent_families.py build/kvrank
"""
import json
import os
import subprocess
import tempfile

import harness
from harness import PYTHON as PY
from harness import REFERENCE, close

WRITER = os.path.join(harness.WRITERS, "write_latent_checkpoints.py")
REPRS = ["qk", "ov", "k", "v"]

failures = harness.Failures()


def write(tmp, name, family, *options):
    out, ref = os.path.join(tmp, name), os.path.join(tmp, name + "_ref")
    subprocess.run([PY, WRITER, family, out, ref, *options], check=True)
    return out, ref


def analyze(kvrank, path, repr_name):
    proc = subprocess.run([kvrank, "analyze", path, "--format", "json", "--repr", repr_name],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"kvrank analyze {path} --repr {repr_name} exited "
                             f"{proc.returncode}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)["models"][0]


def reference(ref_dir, repr_name):
    proc = subprocess.run([PY, REFERENCE, "heads", os.path.join(ref_dir, repr_name + ".npz")],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)["layers"]


def compare(case, got, want):
    """got: kvrank's model JSON; want: the reference's layers."""
    if len(got["layers"]) != len(want):
        failures.append(f"{case}: {len(got['layers'])} layers, reference has {len(want)}")
        return
    for g, w in zip(got["layers"], want):
        where = f"{case} layer {w['layer']}"
        for key in ("erank", "erank_centered", "mean_similarity", "erank_pct",
                    "erank_centered_pct"):
            if not close(g[key], w[key]):
                failures.append(f"{where}: {key} {g[key]!r}, reference {w[key]!r}")
        for key in ("head_norm", "head_erank", "eigenvalues", "eigenvalues_centered"):
            pairs = list(zip(g[key], w[key]))
            if len(g[key]) != len(w[key]) or not all(close(a, b) for a, b in pairs):
                failures.append(f"{where}: {key} {g[key]!r}, reference {w[key]!r}")
        for key, want in (("pcs_90", "pcs_90"), ("kept_heads", "heads")):
            if g[key] != w[want]:
                failures.append(f"{where}: {key} {g[key]}, reference {w[want]}")


def expect_fields(case, model, **fields):
    for key, value in fields.items():
        if model[key] != value:
            failures.append(f"{case}: {key} {model[key]!r}, expected {value!r}")


def check_case(kvrank, tmp, name, family, options, fields, reprs=REPRS):
    out, ref = write(tmp, name, family, *options)
    for repr_name in reprs:
        case = f"{name} --repr {repr_name}"
        try:
            model = analyze(kvrank, out, repr_name)
        except AssertionError as error:
            failures.append(f"{case}: {error}")
            continue
        expect_fields(case, model, repr=repr_name, **fields)
        compare(case, model, reference(ref, repr_name))
    print(f"  {name}: {', '.join(reprs)} checked")


def check_missing(kvrank, tmp, name, family, options, tensor):
    out, _ = write(tmp, name, family, *options, "--drop", tensor)
    proc = subprocess.run([kvrank, "analyze", out, "--format", "json"], capture_output=True,
                          text=True)
    if proc.returncode != 2 or tensor not in proc.stderr or proc.stdout:
        failures.append(f"{name}: expected exit 2 naming {tensor} and no stdout, got exit "
                        f"{proc.returncode}, stderr {proc.stderr.strip()!r}")
    print(f"  {name}: missing {tensor} → exit {proc.returncode}")


def check_wrong_config(kvrank, tmp):
    """A config whose head count does not match the tensors: exit 2 naming the tensor and config."""
    out, _ = write(tmp, "mla_bad_config", "mla", "--heads", "6")
    path = os.path.join(out, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["num_attention_heads"] = 5
    with open(path, "w") as f:
        json.dump(config, f)
    proc = subprocess.run([kvrank, "analyze", out], capture_output=True, text=True)
    ok = (proc.returncode == 2 and "model.layers.0.self_attn." in proc.stderr
          and "num_attention_heads 5" in proc.stderr)
    if not ok:
        failures.append(f"mla_bad_config: expected exit 2 naming the tensor and "
                        f"num_attention_heads 5, got {proc.returncode}: {proc.stderr.strip()!r}")
    print(f"  mla_bad_config: exit {proc.returncode}")


def main():
    kvrank = harness.kvrank_from_argv()
    mla_fields = {"variant": "mla", "lrkv_rank": None}
    with tempfile.TemporaryDirectory() as tmp:
        check_case(kvrank, tmp, "mla_q_proj_f32", "mla", ["--dtype", "F32"],
                   dict(mla_fields, family="deepseek_v2", mla_kv_lora_rank=12, heads=6,
                        kv_heads=6, head_dim=10, d_model=48, num_layers=3))
        check_case(kvrank, tmp, "mla_q_lora_bf16", "mla",
                   ["--dtype", "BF16", "--q-lora-rank", "10", "--seed", "1", "--layers", "4"],
                   dict(mla_fields, mla_kv_lora_rank=12, num_layers=4))
        check_case(kvrank, tmp, "mla_q_lora_f16_inferred", "mla",
                   ["--dtype", "F16", "--q-lora-rank", "9", "--kv-lora-rank", "7", "--nope", "3",
                    "--rope", "2", "--v-head-dim", "4", "--seed", "2", "--minimal-config"],
                   dict(mla_fields, mla_kv_lora_rank=7, head_dim=5, num_layers=3))
        check_case(kvrank, tmp, "mla_no_rope", "mla", ["--rope", "0", "--seed", "3"],
                   dict(mla_fields, head_dim=6), reprs=["qk", "k"])
        # FP8 with DeepSeek-V3's 128×128 blocks: d 160 and kv_b 12·(8+4) = 144 rows cross them.
        check_case(kvrank, tmp, "mla_fp8_128", "mla",
                   ["--dtype", "F8_E4M3", "--hidden", "160", "--heads", "12", "--nope", "8",
                    "--rope", "4", "--v-head-dim", "4", "--kv-lora-rank", "24",
                    "--q-lora-rank", "20", "--layers", "2", "--seed", "4"],
                   dict(mla_fields, family="deepseek_v3", mla_kv_lora_rank=24, heads=12))
        check_case(kvrank, tmp, "mla_fp8_small_blocks", "mla",
                   ["--dtype", "F8_E4M3", "--block", "16", "8", "--q-lora-rank", "10",
                    "--seed", "5"], dict(mla_fields, family="deepseek_v3"))
        # Keys 0.99 and 0.999 alike (mean similarity 0.9999… with the shared rope rows): J S J is
        # then a small difference of numbers near 1, which float32 inner products lost (erank_centered
        # off by 3e-5 and 5e-2 relative before the products were centred, docs/metric.md).
        for share, dtype in (("0.99", "F32"), ("0.999", "F32"), ("0.999", "BF16")):
            check_case(kvrank, tmp, f"mla_alike_{share}_{dtype}", "mla",
                       ["--dtype", dtype, "--share", share, "--layers", "1", "--heads", "16",
                        "--hidden", "256", "--kv-lora-rank", "64", "--nope", "16", "--rope", "8",
                        "--v-head-dim", "16", "--seed", "9"], mla_fields)
        lrkv_fields = {"variant": "lrkv", "family": "lrkv", "mla_kv_lora_rank": None}
        check_case(kvrank, tmp, "lrkv_r2_f32", "lrkv", ["--rank", "2"],
                   dict(lrkv_fields, lrkv_rank=2, heads=6, kv_heads=6, head_dim=8, d_model=48))
        check_case(kvrank, tmp, "lrkv_r5_bf16", "lrkv",
                   ["--rank", "5", "--dtype", "BF16", "--heads", "4", "--seed", "6"],
                   dict(lrkv_fields, lrkv_rank=5, heads=4))
        check_case(kvrank, tmp, "lrkv_r3_f16_inferred", "lrkv",
                   ["--rank", "3", "--dtype", "F16", "--minimal-config", "--seed", "7"],
                   dict(lrkv_fields, lrkv_rank=3, heads=6, head_dim=8, num_layers=3))
        check_case(kvrank, tmp, "lrkv_fp8", "lrkv",
                   ["--rank", "4", "--dtype", "F8_E4M3", "--block", "16", "16", "--seed", "8"],
                   dict(lrkv_fields, lrkv_rank=4), reprs=["qk", "k"])
        check_missing(kvrank, tmp, "mla_missing_kv_b", "mla", [],
                      "model.layers.1.self_attn.kv_b_proj.weight")
        check_missing(kvrank, tmp, "mla_missing_gain", "mla", [],
                      "model.layers.2.self_attn.kv_a_layernorm.weight")
        check_missing(kvrank, tmp, "mla_missing_q_b", "mla", ["--q-lora-rank", "8"],
                      "model.layers.0.self_attn.q_b_proj.weight")
        check_missing(kvrank, tmp, "lrkv_missing_k_lora_b", "lrkv", [],
                      "model.layers.1.self_attn.k_lora_b.weight")
        check_wrong_config(kvrank, tmp)
    failures.finish("test_latent_families", "all MLA/LRKV cases agree with the reference")


if __name__ == "__main__":
    main()
