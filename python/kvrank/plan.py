"""kvrank.plan: the conversion plan of `kvrank plan` (docs/plan.md) from Python.

    plan = kvrank.plan("data/tiny/mha", kv_heads=4)
    plan.to_dict()      # the document of `kvrank plan --format json`
    plan.to_pandas()    # one row per model × layer: groups, errors, baselines, erank before/after
"""
import json
import os

from . import _kvrank


class PlanResult:
    """The plans of one or more checkpoints."""

    def __init__(self, text):
        self._text = text

    def to_json(self):
        return self._text

    def to_dict(self):
        return json.loads(self._text)

    def rows(self):
        """One dict per model and layer (the baselines' fields prefixed contiguous_, random_)."""
        out = []
        for model in self.to_dict()["models"]:
            for layer in model["layers"]:
                row = {"label": model["label"], "kv_heads": model["kv_heads"],
                       "kv_heads_after": model["kv_heads_after"], "objective": model["objective"]}
                for key, value in layer.items():
                    if key in ("contiguous", "random_median"):
                        prefix = "contiguous_" if key == "contiguous" else "random_"
                        row.update({prefix + k: v for k, v in value.items()})
                    else:
                        row[key] = value
                out.append(row)
        return out

    def to_pandas(self):
        """rows() as a DataFrame (needs pandas)."""
        import pandas
        return pandas.DataFrame(self.rows())


def plan(paths, kv_heads, gauge="auto", objective="qk", rope=None, layers=None,
         labels=None, latent_energy=None, random=32, seed=0):
    """Plans the conversion of each checkpoint to `kv_heads` KV heads (see `kvrank plan --help`).
    Raises kvrank.Error with the command line's message on bad input."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if gauge not in ("auto", "none"):
        raise _kvrank.Error(f"gauge must be 'auto' or 'none', found {gauge!r}")
    text = _kvrank.plan([os.fspath(p) for p in paths], list(labels or []), int(kv_heads),
                        gauge == "auto", objective, rope or "", layers or "", latent_energy,
                        int(random), int(seed))
    return PlanResult(text)
