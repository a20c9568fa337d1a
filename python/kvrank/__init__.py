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
           "plot", "concat", "plan"]

from .plan import plan  # noqa: E402  (kvrank plan: docs/plan.md)


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

    def to_csv(self, summary=False, sep=","):
        """The text of `kvrank analyze --format csv` (sep="\t": --format tsv); summary=True: one
        row per model and representation, the means (--summary)."""
        if sep not in (",", "\t"):
            raise Error(f"to_csv: sep must be \",\" or \"\\t\", found {sep!r}")
        return self._native.csv_text(bool(summary), sep)

    def to_pandas(self, summary=False):
        """The CSV table as a DataFrame: one row per model × representation × layer, or with
        summary=True per model × representation (needs pandas)."""
        import io

        import pandas
        return pandas.read_csv(io.StringIO(self.to_csv(summary)))

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
            activations=False, fold_input_norm=False):
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
    layout.fold_input_norm = bool(fold_input_norm)
    return layout


def _selection(repr, layers, layer_shard=None, attention="all"):
    """The --repr, --layers, --layer-shard and --attention options."""
    selection = _kvrank.Selection()
    selection.reprs, selection.layers = _names(repr), _layers(layers)
    selection.layer_shard, selection.attention = layer_shard, str(attention)
    return selection


def _step(value, option="--step"):
    """A training step: a whole number ≥ 0 (as --step takes it)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Error(f"{option}: expected a whole number ≥ 0, found {value!r}")
    return value


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


def analyze(paths, repr=None, layers=None, *, labels=None, steps=None, attention="all",
            layer_shard=None, similarity=False, with_baseline=False, threads=0, family=None,
            heads=None, kv_heads=None, head_dim=None, map=None, npy_dtype=None, activations=False,
            fold_input_norm=False, progress=None, note=None):
    """`kvrank analyze` on checkpoints (paths or Hugging Face repo ids in the local hub cache).

    repr: "qk", "ov", "k", "v" or a list/comma list (default qk; k,v for K/V-only inputs);
    layers: "0-11,20" or a list of indices; labels: one per path (default: each one's name);
    steps: the training step of each path, in order (--step; default: from checkpoint-N folder
    names or trainer_state.json); attention: "all", "self" or "cross" (encoders);
    progress(label, done, total) is called after each layer; note(message) receives what the
    command line logs as info. The other options are the command line's. Returns Results."""
    native = _kvrank.analyze(
        _paths(paths), [str(label) for label in (labels or [])],
        [_step(step) for step in (steps or [])], _selection(repr, layers, layer_shard, attention),
        bool(similarity), bool(with_baseline), int(threads),
        _layout(family, heads, kv_heads, head_dim, map, npy_dtype, activations, fold_input_norm),
        progress, note)
    return Results(native)


def _config_json(config):
    """The config as the JSON text the library parses; what JSON cannot hold (NaN, infinities,
    objects) is the caller's error, so a kvrank.Error, not json's ValueError/TypeError."""
    if config is None:
        return None
    if not isinstance(config, dict) and hasattr(config, "to_dict"):
        config = config.to_dict()
    try:
        return json.dumps(config, allow_nan=False)
    except (ValueError, TypeError) as error:
        raise Error(f"config: not a JSON document ({error}): pass numbers, strings, lists and "
                    f"dicts, with no NaN or infinity") from None


def analyze_state_dict(state_dict, config=None, *, label="model", step=None, repr=None,
                       layers=None, attention="all", layer_shard=None, similarity=False, threads=0, family=None,
                       heads=None, kv_heads=None, head_dim=None, map=None, activations=False,
                       fold_input_norm=False, progress=None, note=None):
    """`kvrank analyze` on tensors in memory: `state_dict` maps names (as in a checkpoint) to
    numpy arrays or CPU torch tensors (float32, float16, bfloat16, float64), `config` is a Hugging
    Face config (a dict, or an object with to_dict(), e.g. transformers' PretrainedConfig). The
    family is detected exactly as for files, and the tensors are read where they lie: nothing is
    copied but one layer at a time, converted to float32 while it is analysed. step: the training
    step recorded in the result (--step), for `kvrank plot --over-steps`."""
    from ._tensors import memory_tensors

    config_json = _config_json(config)
    tensors = memory_tensors(state_dict)  # views of the caller's memory, alive until we return
    native = _kvrank.analyze_state_dict(
        tensors, config_json, str(label), None if step is None else _step(step),
        _selection(repr, layers, layer_shard, attention), bool(similarity), int(threads),
        _layout(family, heads, kv_heads, head_dim, map, None, activations, fold_input_norm),
        progress, note)
    return Results(native)


def inspect(paths, *, family=None, heads=None, kv_heads=None, head_dim=None, map=None,
            npy_dtype=None, activations=False, fold_input_norm=False):
    """`kvrank inspect --format json` as a list of dicts, one per checkpoint."""
    layout = _layout(family, heads, kv_heads, head_dim, map, npy_dtype, activations,
                     fold_input_norm)
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


def _figure_settings(metric, title, size, width, height, font_size, dpi, cols, share_y, ylim,
                     legend, style):
    """The figure options of `kvrank plot`, checked by the library as the command line's are."""
    settings = _kvrank.FigureSettings()
    settings.metric, settings.title = str(metric), str(title)
    settings.size = "" if size is None else str(size)
    settings.width, settings.height, settings.font_size = width, height, font_size
    settings.dpi, settings.share_y = dpi, bool(share_y)
    settings.columns = None if cols is None else int(cols)  # 0 is refused, as by --cols
    if ylim is not None and not isinstance(ylim, str):
        low, high = ylim
        ylim = f"{float(low)!r},{float(high)!r}"
    settings.ylim = ylim or ""
    settings.legend = str(legend)
    settings.style_file = "" if style is None else os.fspath(style)
    return settings


def _plot_panels(inputs):
    """(title, Results) per input: a Results, a result JSON path, or a (title, Results) pair."""
    if isinstance(inputs, (str, os.PathLike, Results)) or \
            (isinstance(inputs, tuple) and len(inputs) == 2 and isinstance(inputs[1], Results)):
        inputs = [inputs]  # one input, not a list of them
    panels = []
    for item in inputs:
        if isinstance(item, tuple):
            panels.append((str(item[0]), item[1]))
        elif isinstance(item, Results):
            panels.append((item.labels[0] if item.labels else "", item))
        else:
            panels.append((os.path.splitext(os.path.basename(os.fspath(item)))[0],
                           Results.read(item)))
    return panels


def _heatmap_svg(panels, layer, model, title):
    name, results = panels[0]
    labels = results.labels
    if model is not None and model not in labels:
        raise Error(f"{name}: has no model labelled \"{model}\"")
    if not labels:
        raise Error(f"{name}: holds no model")
    index = labels.index(model) if model is not None else 0
    return _kvrank.heatmap_svg(results._native, index, int(layer), title)


def plot(inputs, output=None, *, metric="erank", title="", heatmap=None, model=None,
         over_steps=None, panel_titles=None, size=None, width=None, height=None, font_size=None,
         dpi=None, cols=None, share_y=False, ylim=None, legend="below", style=None):
    """`kvrank plot`: one panel per input (a Results, a result JSON path, or a (title, Results)
    pair); with over_steps="layers", "mean" or "heatmap", the metric against the training step of
    one input (its models need a step: analyze(steps=…), analyze_state_dict(step=…), or
    checkpoint-N folders); with heatmap=LAYER the similarity matrix of one layer of `model` (a
    label; default the first) of the first input. The figure options are the command line's:
    panel_titles (a list), size ("column" or "page"), width/height (inches), font_size (points),
    dpi (PNG), cols, share_y, ylim ("LOW,HIGH" or a pair), legend ("below", "right", "inside",
    "none"), style (a style file). Returns the SVG text; with `output`, also writes it there (PNG
    or PDF through rsvg-convert when the name ends in .png or .pdf)."""
    panels = _plot_panels(inputs)
    settings = _figure_settings(metric, title, size, width, height, font_size, dpi, cols, share_y,
                                ylim, legend, style)
    titles = [str(t) for t in (panel_titles or [])]
    natives = [(name, r._native) for name, r in panels]
    if heatmap is not None:
        svg = _heatmap_svg(panels, heatmap, model, title)
    elif over_steps is not None:
        svg = _kvrank.steps_svg(natives, titles, str(over_steps), settings)
    else:
        svg = _kvrank.curves_svg(natives, titles, settings)
    if output is not None:
        _kvrank.write_figure(svg, os.fspath(output), settings)
    return svg
