"""kvrank.plan: the conversion plan of `kvrank plan` (docs/plan.md) from Python.

    plan = kvrank.plan("data/tiny/mha", kv_heads=4)
    plan.to_dict()      # the document of `kvrank plan --format json`
    plan.to_pandas()    # one row per model × layer: groups, errors, baselines, erank before/after
"""
import json

from . import _kvrank
from . import _options as options


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


def plan(paths, kv_heads, gauge=None, objective=None, rope=None, layers=None,
         labels=None, latent_energy=None, random=None, seed=None, refit=None):
    """Plans the conversion of each checkpoint to `kv_heads` KV heads (see `kvrank plan --help`).
    Raises kvrank.Error with the command line's message, in Python's words, on bad input: the
    arguments are only converted here; the request checks their values. An argument left None
    keeps the command line's default (gauge "auto", objective "qk", random 8, seed 0). refit:
    None (the default: the refit, or the plain mean-pool under gauge="none"), True (the refit) or
    False (the aligned mean-pool, the command line's --no-refit)."""
    with options.in_python_words({"label": "labels"}):
        text = _kvrank.plan(options.paths(paths), options.names("labels", labels),
                            options.integer("kv_heads", kv_heads), options.optional_text("gauge", gauge),
                            options.optional_text("objective", objective),
                            "" if rope is None else options.text("rope", rope),
                            options.layers(layers) or "",
                            options.optional_number("latent_energy", latent_energy),
                            options.optional_integer("random", random),
                            options.optional_integer("seed", seed, 0, options.UINT64_MAX),
                            options.optional_flag("refit", refit))
    return PlanResult(text)
