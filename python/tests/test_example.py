#!/usr/bin/env python3
"""examples/train_with_kvrank.py, briefly: a few training steps of a tiny model with PyTorch,
measured from its callback; the trajectory it writes is a result file `kvrank plot` and
`kvrank check` read, and its last measurement equals the command line on the same weights.
Skipped (exit 77) where Debian's python3-torch is absent.

  python3 python/tests/test_example.py build/kvrank   (ctest: python.test_example, PYTHONPATH set)
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402

EXAMPLE = os.path.join(ROOT, "examples", "train_with_kvrank.py")


def main():
    harness.kvrank_from_argv()
    try:
        import torch  # noqa: F401
    except ImportError:
        harness.skip("PyTorch is not installed (Debian: python3-torch, scripts/setup.sh)")
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run([sys.executable, EXAMPLE, "--steps", "6", "--every", "3", "--batch",
                               "2", "--context", "32", "--corpus-bytes", "100000", "--out", out],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            sys.exit(f"the example failed:\n{proc.stdout}\n{proc.stderr}")
        trajectory = os.path.join(out, "trajectory.json")
        with open(trajectory) as f:
            labels = [model["label"] for model in json.load(f)["models"]]
        if labels != ["step 0", "step 3", "step 6"]:
            sys.exit(f"unexpected measurements {labels}")
        plot = harness.run("plot", trajectory, "-o", os.path.join(out, "cli.svg"))
        check = harness.run("check", trajectory, "--baseline", trajectory)
        if plot.returncode != 0 or check.returncode != 0:
            sys.exit(f"kvrank plot/check refused the trajectory: {plot.stderr}{check.stderr}")
        if not os.path.getsize(os.path.join(out, "trajectory.svg")):
            sys.exit("no trajectory.svg")
    print("test_example.py: the training example logs, saves and plots its trajectory: ok")


if __name__ == "__main__":
    main()
