#!/usr/bin/env python3
"""Measures how far the contraction path (MLA) lands from the float64 reference, for docs/metric.md.

  measure_latent_precision.py KVRANK [KVRANK ...]

Writes six small MLA checkpoints with tests/writers/write_latent_checkpoints.py (32 random heads, a
bf16 one with q_lora_rank, and 16 heads whose keys share 50 to 99.9 % of a common part), runs
`kvrank analyze --repr R` with each binary given for R in qk, k, ov, and prints per case the worst
relative error of erank, erank_centered and mean_similarity against `scripts/reference.py heads`
(which forms every d × d A_h in float64). stdlib + numpy only.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRITER = os.path.join(ROOT, "tests", "writers", "write_latent_checkpoints.py")
REFERENCE = os.path.join(ROOT, "scripts", "reference.py")
SMALL = ["--heads", "16", "--hidden", "256", "--kv-lora-rank", "64", "--nope", "16", "--rope", "8",
         "--v-head-dim", "16", "--layers", "1", "--seed", "9"]
CASES = {
    "random32": ["--heads", "32", "--hidden", "256", "--kv-lora-rank", "64", "--nope", "16",
                 "--rope", "8", "--v-head-dim", "16", "--layers", "1", "--seed", "11",
                 "--q-lora-rank", "48"],
    "bf16_q_lora": ["--dtype", "BF16", "--q-lora-rank", "10", "--seed", "1", "--layers", "2"],
    **{f"share{share}": ["--share", share, *SMALL] for share in ("0.5", "0.9", "0.99", "0.999")},
}
KEYS = ("erank", "erank_centered", "mean_similarity")


def run_json(command):
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def worst_error(got_layers, want_layers):
    return max(abs(g[k] - w[k]) / max(abs(w[k]), 1e-12)
               for g, w in zip(got_layers, want_layers) for k in KEYS)


def main():
    binaries = sys.argv[1:]
    if not binaries:
        sys.exit(__doc__)
    print("| case | repr | " + " | ".join(os.path.basename(b) for b in binaries) + " |")
    print("|---|---|" + "---|" * len(binaries))
    with tempfile.TemporaryDirectory() as tmp:
        for name, options in CASES.items():
            checkpoint, ref = os.path.join(tmp, name), os.path.join(tmp, name + "_ref")
            subprocess.run([sys.executable, WRITER, "mla", checkpoint, ref, *options], check=True)
            for rep in ("qk", "k", "ov"):
                want = run_json([sys.executable, REFERENCE, "heads",
                                 os.path.join(ref, rep + ".npz")])["layers"]
                cells = []
                for binary in binaries:
                    got = run_json([binary, "analyze", checkpoint, "--format", "json", "--repr",
                                    rep])["models"][0]["layers"]
                    cells.append(f"{worst_error(got, want):.1e}")
                print(f"| {name} | {rep} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
