"""kvrank for Python: per-layer effective rank of attention heads, on checkpoints and on models in
memory (docs/python.md).

    import kvrank
    result = kvrank.analyze(["data/tiny/gqa"], repr="qk,ov")
    result.to_dict()      # the same document as `kvrank analyze --format json`
    result.to_pandas()    # one row per model × representation × layer

    result = kvrank.analyze_state_dict(model.state_dict(), config)   # no checkpoint written

The work is done by kvrank's C++ library (the extension kvrank._kvrank); this package only
converts arguments and results. Every problem with the inputs raises kvrank.Error with the
message the command line prints; Ctrl-C interrupts between layers.
"""
import json
import os

from . import _kvrank
from ._kvrank import Error

Error.__module__ = __name__  # shown as kvrank.Error

__version__ = _kvrank.__version__
__all__ = ["Error", "Results", "CheckResult", "analyze", "analyze_state_dict", "inspect", "check",
           "plot", "concat"]


class Results:
    """The result of an analysis: one entry per model and representation (`labels`)."""

    def __init__(self, native):
        self._native = native

    @classmethod
    def read(cls, path):
        """A result JSON written by `kvrank analyze --format json` (or by save())."""
        return cls(_kvrank.Results.read(os.fspath(path)))

    @property
    def labels(self):
        return self._native.labels()

    def to_json(self):
        """The text of `kvrank analyze --format json`."""
        return self._native.json_text()

    def to_dict(self):
        """The document of `kvrank analyze --format json`."""
        return json.loads(self._native.json_text())

    def to_csv(self):
        """The text of `kvrank analyze --format csv`."""
        return self._native.csv_text()

    def to_pandas(self):
        """The CSV table as a DataFrame: one row per model × representation × layer (needs
        pandas)."""
        import io

        import pandas
        return pandas.read_csv(io.StringIO(self.to_csv()))

    def save(self, path):
        """Writes the result JSON to `path` (atomically), for `kvrank plot` and `kvrank check`."""
        _kvrank.write_text(self.to_json(), os.fspath(path))

    def __str__(self):
        return self._native.table_text()

    def __repr__(self):
        return f"<kvrank.Results {self.labels}>"


def concat(results):
    """One Results holding the models of all `results`, in order (e.g. one per training step,
    each with its own label)."""
    results = list(results)
    if not results:
        raise Error("concat: no results given")
    native = results[0]._native
    for more in results[1:]:
        native = _kvrank.Results(native, more._native)
    return Results(native)


def _layout(family=None, heads=None, kv_heads=None, head_dim=None, map=None, npy_dtype=None,
            activations=False):
    """The --family … --activations options, checked as the command line checks them."""
    layout = _kvrank.Layout()
    for name, value in (("--heads", heads), ("--kv-heads", kv_heads), ("--head-dim", head_dim)):
        if value is not None and (not isinstance(value, int) or value <= 0):
            raise Error(f"{name}: expected a positive whole number, found {value!r}")
    if npy_dtype not in (None, "bf16"):
        raise Error(f"--npy-dtype: expected bf16, found {npy_dtype!r}")
    layout.family = family
    layout.heads, layout.kv_heads, layout.head_dim = heads, kv_heads, head_dim
    layout.map_file = None if map is None else os.fspath(map)
    layout.npy_bf16 = npy_dtype == "bf16"
    layout.activations = bool(activations)
    return layout


def _names(value):
    """"qk,ov", ["qk", "ov"] or None → ["qk", "ov"] / []."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part for part in value.split(",") if part]
    return [str(part) for part in value]


def _layers(layers):
    """None, "0-11,20", or an iterable of layer indices → the --layers text."""
    if layers is None or isinstance(layers, str):
        return layers
    return ",".join(str(int(layer)) for layer in layers)


def _paths(paths):
    return [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else \
        [os.fspath(path) for path in paths]


def analyze(paths, repr=None, layers=None, *, labels=None, layer_shard=None, similarity=False,
            with_baseline=False, threads=0, family=None, heads=None, kv_heads=None,
            head_dim=None, map=None, npy_dtype=None, activations=False, progress=None, note=None):
    """`kvrank analyze` on checkpoints (paths or Hugging Face repo ids in the local hub cache).

    repr: "qk", "ov", "k", "v" or a list/comma list (default qk; k,v for K/V-only inputs);
    layers: "0-11,20" or a list of indices; labels: one per path (default: each one's name);
    progress(label, done, total) is called after each layer; note(message) receives what the
    command line logs as info. The other options are the command line's. Returns Results."""
    native = _kvrank.analyze(
        _paths(paths), [str(label) for label in (labels or [])], _names(repr), _layers(layers),
        layer_shard, bool(similarity), bool(with_baseline), int(threads),
        _layout(family, heads, kv_heads, head_dim, map, npy_dtype, activations), progress, note)
    return Results(native)


def analyze_state_dict(state_dict, config=None, *, label="model", repr=None, layers=None,
                       similarity=False, threads=0, family=None, heads=None, kv_heads=None,
                       head_dim=None, map=None, activations=False, progress=None, note=None):
    """`kvrank analyze` on tensors in memory: `state_dict` maps names (as in a checkpoint) to
    numpy arrays or CPU torch tensors (float32, float16, bfloat16, float64), `config` is a Hugging
    Face config (a dict, or an object with to_dict(), e.g. transformers' PretrainedConfig). The
    family is detected exactly as for files, and the tensors are read where they lie: nothing is
    copied but one layer at a time, converted to float32 while it is analysed."""
    from ._tensors import memory_tensors

    if config is not None and not isinstance(config, dict) and hasattr(config, "to_dict"):
        config = config.to_dict()
    config_json = None if config is None else json.dumps(config, allow_nan=False)
    tensors = memory_tensors(state_dict)  # views of the caller's memory, alive until we return
    native = _kvrank.analyze_state_dict(
        tensors, config_json, str(label), _names(repr), _layers(layers), bool(similarity),
        int(threads), _layout(family, heads, kv_heads, head_dim, map, None, activations),
        progress, note)
    return Results(native)


def inspect(paths, *, family=None, heads=None, kv_heads=None, head_dim=None, map=None,
            npy_dtype=None, activations=False):
    """`kvrank inspect --format json` as a list of dicts, one per checkpoint."""
    layout = _layout(family, heads, kv_heads, head_dim, map, npy_dtype, activations)
    return json.loads(_kvrank.inspect_json(_paths(paths), layout))


class CheckResult:
    """What `kvrank check` finds: `ok`, and `violations` as dicts (label, repr, layer, metric,
    golden, current); str() is the command line's table of them."""

    def __init__(self, rows, table):
        keys = ("label", "repr", "layer", "metric", "golden", "current")
        self.violations = [dict(zip(keys, row)) for row in rows]
        self.table = table

    @property
    def ok(self):
        return not self.violations

    def __bool__(self):
        return self.ok

    def __str__(self):
        return self.table


def _results_and_name(value, fallback):
    if isinstance(value, Results):
        return value, fallback
    return Results.read(value), os.fspath(value)


def check(current, baseline, *, metric="erank,erank_centered", abs_tol=0.05, rel_tol=None):
    """`kvrank check CURRENT --baseline BASELINE`: each is a Results or a result JSON path.
    Returns a CheckResult (true when within tolerance); results that do not correspond raise
    kvrank.Error."""
    current, current_name = _results_and_name(current, "current")
    baseline, baseline_name = _results_and_name(baseline, "baseline")
    rows, table = _kvrank.check(current._native, baseline._native, _names(metric),
                                float(abs_tol), None if rel_tol is None else float(rel_tol),
                                current_name, baseline_name)
    return CheckResult(rows, table)


def plot(inputs, output=None, *, metric="erank", title="", heatmap=None, model=None):
    """`kvrank plot`: one panel per input (a Results, a result JSON path, or a (title, Results)
    pair), or with heatmap=LAYER the similarity matrix of one layer of `model` (a label; default
    the first) of the first input. Returns the SVG text; with `output`, also writes it there
    (PNG through rsvg-convert when the name ends in .png)."""
    if isinstance(inputs, (str, os.PathLike, Results)):
        inputs = [inputs]
    panels = []
    for item in inputs:
        if isinstance(item, tuple):
            panels.append((str(item[0]), item[1]))
        elif isinstance(item, Results):
            panels.append((item.labels[0] if item.labels else "", item))
        else:
            panels.append((os.path.splitext(os.path.basename(os.fspath(item)))[0],
                           Results.read(item)))
    if heatmap is None:
        svg = _kvrank.curves_svg([(name, r._native) for name, r in panels], metric, title)
    else:
        name, results = panels[0]
        labels = results.labels
        if model is not None and model not in labels:
            raise Error(f"{name}: has no model labelled \"{model}\"")
        if not labels:
            raise Error(f"{name}: holds no model")
        index = labels.index(model) if model is not None else 0
        svg = _kvrank.heatmap_svg(results._native, index, int(heatmap), title)
    if output is not None:
        _kvrank.write_figure(svg, os.fspath(output))
    return svg
