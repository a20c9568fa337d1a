"""Helper of test_plan.py: loads a checkpoint written by `kvrank plan --write-checkpoint` into
train_tiny.py's plain PyTorch GQA model and checks its validation loss is the loss the plan
predicts — the original model with each layer's keys and values aligned and mean-pooled over the
plan's groups (computed here with scripts/plan_reference.py's alignment, in MHA form), or with
--refit the refit conversion of those groups (plan_reference.refit_conversion).

    python3 tests/e2e/plan_torch_check.py ORIGINAL WRITTEN PLAN_LAYERS_JSON [--refit]
Exit 0 when they agree, 1 when not, 77 when torch is missing.
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

try:
    import torch
except ImportError:
    print("torch is not installed")
    sys.exit(77)

import numpy as np  # noqa: E402
import plan_reference as ref  # noqa: E402
import train_tiny as tt  # noqa: E402
import validate_plan as vp  # noqa: E402


def main():
    original, written, layers_json = sys.argv[1:4]
    refit = sys.argv[4:] == ["--refit"]
    plan_layers = json.loads(layers_json)
    torch.set_num_threads(1)
    ev = vp.Evaluator(original, 64)
    _, layers, _, _ = ref.load_layers(original, None)
    convert = (lambda layer, groups: vp.refit_weights(layer, groups)) if refit else (  # noqa: E731
        lambda layer, groups: vp.kv_weights(layer, groups, True))
    replaced = {p["layer"]: convert(layers[p["layer"]], p["groups"]) for p in plan_layers}
    predicted = ev.loss(replaced)
    if refit:  # the refit must beat the aligned mean-pool of the same groups
        plain = ev.loss({p["layer"]: vp.kv_weights(layers[p["layer"]], p["groups"], True) for p in plan_layers})
        print(f"aligned mean-pool of the same groups {plain:.4f}")
        if not predicted < plain:
            sys.exit(1)
    base = ev.loss()
    with open(os.path.join(written, "config.json")) as f:
        config = json.load(f)
    g = config["num_key_value_heads"]
    tt.VARIANTS["plan-check"] = {"kind": "llama", "kv_heads": g}
    model = tt.build_model("plan-check", ev.context)
    tensors = ref.read_safetensors(os.path.join(written, "model.safetensors"))
    model.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in tensors.items()})
    model.eval()
    with torch.no_grad():
        logits = model(ev.x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, tt.VOCAB), ev.y.reshape(-1)).item()
    print(f"original {base:.4f}, predicted {predicted:.4f}, written checkpoint {loss:.4f} (G={g})")
    # The written tensors are bf16 like the original: allow their rounding, far below the
    # conversion's own effect.
    ok = abs(loss - predicted) <= 0.01 and abs(predicted - base) > 0.05 and np.isfinite(loss)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
