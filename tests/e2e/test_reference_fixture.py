#!/usr/bin/env python3
"""End-to-end: `kvrank analyze` on real trained checkpoints agrees with the independent numpy
reference (scripts/reference.py llama: explicit d×d heads, eigvalsh, svd) on every layer's metrics,
for every representation qk, ov, k, v.

The checkpoints are the trained Llama MHA/GQA/MQA models in data/tiny (BF16, in the repository,
data/README.md); test_reference_shared.py runs the same check on ../shared/fixtures/stories260K.

Run from the repository root: python3 tests/e2e/test_reference_fixture.py path/to/kvrank
"""
import json
import os

import harness

REPRS = ["qk", "ov", "k", "v"]
SCALARS = ["erank", "erank_centered", "erank_pct", "erank_centered_pct", "mean_similarity"]
VECTORS = ["eigenvalues", "eigenvalues_centered", "head_norm", "head_erank"]
TINY_LLAMAS = ["mha", "gqa", "mqa"]


def close(got, want, rel=harness.REL):
    return harness.close(got, want, rel)


def compare(where, got, want, failures):
    for key, want_key in [("layer", "layer"), ("kept_heads", "heads"), ("pcs_90", "pcs_90"),
                          ("zero_heads", "zero_heads")]:
        if got[key] != want[want_key]:
            failures.append(f"{where}: {key} kvrank {got[key]!r} reference {want[want_key]!r}")
    for key in SCALARS:
        if not close(got[key], want[key]):
            failures.append(f"{where}: {key} kvrank {got[key]!r} reference {want[key]!r}")
    for key in VECTORS:
        # Per-head singular values come from float32 Grams: 1e-4 for head_erank.
        rel = 1e-4 if key == "head_erank" else harness.REL
        if len(got[key]) != len(want[key]) or not all(
                close(g, w, rel) for g, w in zip(got[key], want[key])):
            failures.append(f"{where}: {key} kvrank {got[key]!r} reference {want[key]!r}")


def check_against_reference(checkpoint, failures):
    """Compares kvrank with reference.py on every layer × representation; returns the count."""
    checked = 0
    for repr_name in REPRS:
        models = harness.analyze_json(checkpoint, "--repr", repr_name, "-q")["models"]
        assert len(models) == 1 and models[0]["repr"] == repr_name, models
        ref = harness.run_script("reference.py", "llama", checkpoint, "--repr", repr_name,
                                 check=False)
        assert ref.returncode == 0, f"reference.py failed: {ref.stderr}"
        want = json.loads(ref.stdout)["layers"]
        got = models[0]["layers"]
        name = os.path.basename(os.path.normpath(checkpoint))
        if len(got) != len(want):
            failures.append(f"{name} {repr_name}: {len(got)} layers, reference has {len(want)}")
            continue
        for g, w in zip(got, want):
            compare(f"{name} {repr_name} layer {w['layer']}", g, w, failures)
            checked += 1
    return checked


def main():
    harness.kvrank_from_argv()
    failures = harness.Failures()
    checked = sum(check_against_reference(os.path.join(harness.TINY, name), failures)
                  for name in TINY_LLAMAS)
    failures.finish("reference_fixture",
                    f"{checked} layer × repr results of data/tiny/{{{','.join(TINY_LLAMAS)}}} "
                    "match the reference")


if __name__ == "__main__":
    main()
