#!/usr/bin/env python3
"""End-to-end: `kvrank analyze` on the real stories260K checkpoint (Llama GQA, F32) agrees with the
independent numpy reference (scripts/reference.py llama: explicit d×d heads, eigvalsh, svd) on every
layer's metrics, for every representation qk, ov, k, v.

Run from the repository root: python3 tests/e2e/test_reference_fixture.py path/to/kvrank
Skips (exit 0, with a message) when ../shared/fixtures/stories260K is absent.
"""
import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FIXTURE = os.path.join(REPO, "..", "shared", "fixtures", "stories260K")
REPRS = ["qk", "ov", "k", "v"]
SCALARS = ["erank", "erank_centered", "erank_pct", "erank_centered_pct", "mean_similarity"]
VECTORS = ["eigenvalues", "eigenvalues_centered", "head_norm", "head_erank"]
REL = 1e-5
ABS = 1e-6  # for values near 0 (mean similarity, small eigenvalues)


def close(got, want, rel=REL):
    return abs(got - want) <= max(ABS, rel * abs(want))


def compare(where, got, want, failures):
    for key in ["layer", "heads", "pcs_90", "zero_heads"]:
        if got[key] != want[key]:
            failures.append(f"{where}: {key} kvrank {got[key]!r} reference {want[key]!r}")
    for key in SCALARS:
        if not close(got[key], want[key]):
            failures.append(f"{where}: {key} kvrank {got[key]!r} reference {want[key]!r}")
    for key in VECTORS:
        # Per-head singular values come from float32 Grams: 1e-4 for head_erank.
        rel = 1e-4 if key == "head_erank" else REL
        if len(got[key]) != len(want[key]) or not all(
                close(g, w, rel) for g, w in zip(got[key], want[key])):
            failures.append(f"{where}: {key} kvrank {got[key]!r} reference {want[key]!r}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: test_reference_fixture.py path/to/kvrank")
    kvrank = sys.argv[1]
    if not os.path.isdir(FIXTURE):
        print(f"reference_fixture: skipped, {FIXTURE} is absent")
        return
    failures = []
    checked = 0
    for repr_name in REPRS:
        run = subprocess.run([kvrank, "analyze", FIXTURE, "--repr", repr_name, "--format", "json",
                              "-q"], capture_output=True, text=True)
        assert run.returncode == 0, f"kvrank analyze --repr {repr_name} failed: {run.stderr}"
        models = json.loads(run.stdout)["models"]
        assert len(models) == 1 and models[0]["repr"] == repr_name, models
        ref = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "reference.py"), "llama",
                              FIXTURE, "--repr", repr_name], capture_output=True, text=True)
        assert ref.returncode == 0, f"reference.py failed: {ref.stderr}"
        want = json.loads(ref.stdout)["layers"]
        got = models[0]["layers"]
        if len(got) != len(want):
            failures.append(f"{repr_name}: {len(got)} layers, reference has {len(want)}")
            continue
        for g, w in zip(got, want):
            compare(f"{repr_name} layer {w['layer']}", g, w, failures)
            checked += 1
    for failure in failures:
        print(failure)
    if failures:
        sys.exit(f"reference_fixture: {len(failures)} disagreements")
    print(f"reference_fixture: {checked} layer × repr results of stories260K match the reference")


if __name__ == "__main__":
    main()
