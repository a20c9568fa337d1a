#!/usr/bin/env python3
"""End-to-end: the reference check of test_reference_fixture.py on the real stories260K
checkpoint (Llama GQA, F32) from ../shared/fixtures. Where that folder is absent (a fresh clone,
GitHub Actions) the test exits 77 and ctest reports it as skipped, not passed.

Run from the repository root: python3 tests/e2e/test_reference_shared.py path/to/kvrank
"""
import harness
from test_reference_fixture import check_against_reference


def main():
    harness.kvrank_from_argv()
    fixture = harness.shared_fixture("stories260K")
    if fixture is None:
        harness.skip("../shared/fixtures/stories260K is absent")
    failures = harness.Failures()
    checked = check_against_reference(fixture, failures)
    model = harness.analyze_json(fixture)["models"][0]
    geometry = (model["family"], model["variant"], model["heads"], model["kv_heads"],
                model["head_dim"], model["d_model"], model["num_layers"])
    if geometry != ("llama", "gqa", 8, 4, 8, 64, 5):  # ../shared/fixtures/README.md
        failures.append(f"stories260K detected as {geometry}")
    if harness.run("inspect", fixture, "--format", "json").returncode != 0:
        failures.append("kvrank inspect stories260K failed")
    failures.finish("reference_shared", f"{checked} layer × repr results of stories260K match")


if __name__ == "__main__":
    main()
