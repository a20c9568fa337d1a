"""kvrank for Python: per-layer effective rank of attention heads, on checkpoints and on models in
memory (docs/python.md).

    import kvrank
    result = kvrank.analyze(["data/tiny/gqa"], repr="qk,ov")
    result.to_dict()      # the same document as `kvrank analyze --format json`
    result.to_pandas()    # one row per model × representation × layer

    result = kvrank.analyze_state_dict(model, config, run="baseline", step=100)   # in memory
    tracker = kvrank.Tracker(config, run="baseline", every=100)   # in a training loop

The work is done by kvrank's C++ library (the extension kvrank._kvrank); this package only
converts arguments and results. Every problem with the inputs raises kvrank.Error with the
message the command line prints; Ctrl-C interrupts between layers.
"""
import collections.abc
import dataclasses
import json
import os

from . import _kvrank
from . import _options as options
from ._kvrank import Error
from ._options import in_python_words
from ._results import CheckResult, Figure, Results, concat
from ._tracker import Tracker

Error.__module__ = __name__  # shown as kvrank.Error
for _class in (Results, CheckResult, Figure, Tracker):
    _class.__module__ = __name__

__version__ = _kvrank.__version__
__all__ = ["Error", "Results", "CheckResult", "Figure", "Tracker", "analyze",
           "analyze_state_dict", "inspect", "check", "plot", "concat", "diff", "plan"]

_PROGRESS = "progress(label, done, total)"
_NOTE = "note(message)"

from .plan import plan  # noqa: E402  (kvrank plan: docs/plan.md)


def analyze(paths, repr=None, layers=None, *, labels=None, steps=None, runs=None,
            attention=None, layer_shard=None, similarity=False, with_baseline=False, threads=None,
            family=None, heads=None, kv_heads=None, head_dim=None, map=None, npy_dtype=None,
            activations=False, fold_input_norm=False, progress=None, note=None):
    """`kvrank analyze` on checkpoints (paths or Hugging Face repo ids in the local hub cache).

    repr: "qk", "ov", "k", "v" or a list/comma list (default qk; k,v for K/V-only inputs);
    layers: "0-11,20" or a list of indices; labels: one per path (default: each one's name);
    steps: the training step of each path, in order (--step; default: from checkpoint-N folder
    names or trainer_state.json); runs: the training run of each path, in order (default: the
    folder holding the checkpoint folders); attention: "all", "self" or "cross" (encoders;
    None: the command line's default, all); threads: a count, 0 for automatic (None: the command
    line's default, 0: OMP_NUM_THREADS or every processor); progress(label, done, total) is
    called after each layer; note(message) receives what the command line logs as info. The other
    options are the command line's. Returns Results."""
    arguments = options.paths(paths)
    with in_python_words({"step": "steps", "label": "labels", "run": "runs"}):
        native = _kvrank.analyze(
            arguments, options.names("labels", labels),
            [options.step(step, "steps") for step in options.sequence("steps", steps or [])],
            options.names("runs", runs),
            options.selection(repr, layers, layer_shard, attention), bool(similarity),
            bool(with_baseline), options.threads(threads),
            options.layout(family, heads, kv_heads, head_dim, map, npy_dtype, activations,
                           fold_input_norm),
            options.callback("progress", progress, _PROGRESS),
            options.callback("note", note, _NOTE))
    return Results(native)


def _config_dict(config):
    """A config as a dict: a dict (any mapping), an object with to_dict() (transformers'
    PretrainedConfig), a dataclass, or an object's attributes (SimpleNamespace)."""
    if isinstance(config, collections.abc.Mapping):
        return dict(config)
    if callable(getattr(config, "to_dict", None)):
        return config.to_dict()
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    if hasattr(config, "__dict__") and not callable(config):
        return vars(config)
    raise Error(f"config: expected a dict or a config object (with to_dict()), found "
                f"{type(config).__name__}")


def _config_json(config, model):
    """The config as the JSON text the library parses — by default a model's own `config`
    (transformers' models carry theirs); what JSON cannot hold (NaN, infinities, objects) is the
    caller's error, so a kvrank.Error, not json's ValueError/TypeError."""
    if config is None:
        config = getattr(model, "config", None)
    if config is None:
        return None
    try:
        return json.dumps(_config_dict(config), allow_nan=False)
    except (ValueError, TypeError) as error:
        raise Error(f"config: not a JSON document ({options.one_line(error)}): pass numbers, "
                    f"strings, lists and dicts, with no NaN or infinity") from None


def analyze_state_dict(state_dict, config=None, *, label=None, step=None, run=None, repr=None,
                       layers=None, attention=None, layer_shard=None, similarity=False,
                       threads=None, family=None, heads=None, kv_heads=None, head_dim=None,
                       map=None, activations=False, fold_input_norm=False, progress=None,
                       note=None):
    """`kvrank analyze` on a model in memory: `state_dict` is a torch.nn.Module (its
    state_dict()) or a mapping of names (as in a checkpoint) to numpy arrays or torch tensors;
    `config` a Hugging Face config (a dict, an object with to_dict(), e.g. transformers'
    PretrainedConfig; default: the model's own `config`). The family is detected exactly as for
    files. Only the attention tensors are read, one layer at a time, where they lie; one on a GPU
    or not contiguous is copied to the CPU for its layer. step: the training step recorded in the
    result (--step); run: the training run it belongs to (default "in memory"), by which
    plot(over_steps=…) groups and names its lines; label: the model's name (default: the run
    and step, or "model"). attention, threads and the other options are analyze()'s (None:
    the command line's default)."""
    from ._tensors import memory_tensors, state_dict_of

    step = None if step is None else options.step(step)
    run = "in memory" if run is None else options.text("run", run)
    if label is None:
        label = "model" if run == "in memory" else run
        label += "" if step is None else f" step {step}"
    config_json = _config_json(config, state_dict)
    tensors = memory_tensors(state_dict_of(state_dict))  # alive until the library returns
    with in_python_words(in_memory=True):
        native = _kvrank.analyze_state_dict(
            tensors, config_json, options.text("label", label), step, run,
            options.selection(repr, layers, layer_shard, attention), bool(similarity),
            options.threads(threads),
            options.layout(family, heads, kv_heads, head_dim, map, None, activations,
                           fold_input_norm),
            options.callback("progress", progress, _PROGRESS),
            options.callback("note", note, _NOTE))
    return Results(native)


def diff(a, b, repr=None, layers=None, *, labels=None, attention=None, top=None, figure=None,
         colour_map=None, family=None, heads=None, kv_heads=None, head_dim=None, map=None,
         npy_dtype=None, activations=False, fold_input_norm=False):
    """`kvrank diff A B` (docs/diff.md): two checkpoints of one shape, or result files (then the
    per-layer changes only). Returns the JSON document of `kvrank diff --format json` as a dict:
    per layer the metrics of both and their change, and per head `head_similarity`, the cosine of
    head h's form in A and in B. repr: default qk,ov; attention: as analyze()'s (None: the command
    line's default, all); top: how many of the heads that moved most "moved_heads" lists (None:
    the command line's default, 10); figure: a .svg/.png/.pdf path for the layers × heads heatmap,
    in colour_map (as plot's: viridis, rdbu or greys; default rdbu)."""
    with in_python_words({"label": "labels"}):
        document = _kvrank.diff(
            options.path("a", a), options.path("b", b), options.names("labels", labels),
            options.selection(repr, layers, None, attention),
            options.optional_integer("top", top),
            options.layout(family, heads, kv_heads, head_dim, map, npy_dtype, activations,
                           fold_input_norm),
            "" if figure is None else options.path("figure", figure),
            options.optional_text("colour_map", colour_map) or "")
    return json.loads(document)


def inspect(paths, *, family=None, heads=None, kv_heads=None, head_dim=None, map=None,
            npy_dtype=None, activations=False, fold_input_norm=False):
    """`kvrank inspect --format json` as a list of dicts, one per checkpoint."""
    layout = options.layout(family, heads, kv_heads, head_dim, map, npy_dtype, activations,
                            fold_input_norm)
    with in_python_words():
        return json.loads(_kvrank.inspect_json(options.paths(paths), layout))


def _results_and_name(value, fallback):
    if isinstance(value, Tracker):
        return value.results, fallback
    if isinstance(value, Results):
        return value, fallback
    return Results.read(value), os.fspath(value)


def check(current, baseline, *, metric=None, abs_tol=None, rel_tol=None):
    """`kvrank check CURRENT --baseline BASELINE`: each is a Results or a result JSON path.
    metric: the metrics compared, a comma list or a list (None: the command line's default,
    erank,erank_centered); abs_tol: the absolute tolerance (None: the command line's default,
    0.05); rel_tol: the relative tolerance (None: none). Returns a CheckResult (true when within
    tolerance); results that do not correspond raise kvrank.Error."""
    with in_python_words():
        metrics = None if metric is None else options.comma_list("metric", metric)
        abs_tol = options.optional_number("abs_tol", abs_tol)
        rel_tol = options.optional_number("rel_tol", rel_tol)
        current, current_name = _results_and_name(current, "current")
        baseline, baseline_name = _results_and_name(baseline, "baseline")
        rows, table = _kvrank.check(current._native, baseline._native, metrics, abs_tol, rel_tol,
                                    current_name, baseline_name)
    return CheckResult(rows, table)


def _figure_settings(metric, title, size, width, height, font_size, dpi, cols, share_y, ylim,
                     legend, style, colour_map=None, head_order=None):
    """The figure options of `kvrank plot`, checked by the library as the command line's are; one
    left None keeps FigureSettings' default, the command line's."""
    settings = _kvrank.FigureSettings()
    if metric is not None:
        settings.metric = options.text("metric", metric)
    if title is not None:
        settings.title = options.text("title", title)
    settings.size = "" if size is None else options.text("size", size)
    settings.width = options.optional_number("width", width)
    settings.height = options.optional_number("height", height)
    settings.font_size = options.optional_number("font_size", font_size)
    settings.dpi = options.optional_integer("dpi", dpi)
    settings.share_y = bool(share_y)
    settings.columns = options.optional_integer("cols", cols)
    if ylim is not None and not isinstance(ylim, str):
        low, high = (options.number("ylim", value) for value in options.sequence("ylim", ylim))
        ylim = f"{low!r},{high!r}"
    settings.ylim = ylim or ""
    if legend is not None:
        settings.legend = options.text("legend", legend)
    settings.style_file = "" if style is None else options.path("style", style)
    settings.colour_map = options.optional_text("colour_map", colour_map) or ""
    settings.head_order = options.optional_text("head_order", head_order) or ""
    return settings


def _plot_panels(inputs):
    """(title, Results) per input: a Results, a Tracker, a result JSON path, or a (title, Results)
    pair."""
    one = (str, os.PathLike, Results, Tracker)
    if isinstance(inputs, one) or \
            (isinstance(inputs, tuple) and len(inputs) == 2 and isinstance(inputs[1], Results)):
        inputs = [inputs]  # one input, not a list of them
    panels = []
    for item in options.sequence("inputs", inputs):
        if isinstance(item, Tracker):
            panels.append((item.run, item.results))
        elif isinstance(item, tuple):
            panels.append((str(item[0]), item[1]))
        elif isinstance(item, Results):
            panels.append((item.labels[0] if item.labels else "", item))
        else:
            path = options.path("inputs", item)
            panels.append((os.path.splitext(os.path.basename(path))[0], Results.read(path)))
    return panels


def _steps_panel(panels):
    """Every input's models together as one panel, its title naming them all: over training
    steps, their runs (ModelReport's run, or their folders) share one figure."""
    name = " + ".join(title for title, _ in panels)
    return [(name, concat(results for _, results in panels))]


def plot(inputs, output=None, *, metric=None, title=None, heatmap=None, model=None,
         over_steps=None, panel_titles=None, size=None, width=None, height=None, font_size=None,
         dpi=None, cols=None, share_y=False, ylim=None, legend=None, style=None,
         colour_map=None, head_order=None):
    """`kvrank plot`: one panel per input (a Results, a Tracker, a result JSON path, or a (title,
    Results) pair); with over_steps="layers", "mean" or "heatmap", the metric against the
    training step of the models of all inputs, one panel ("layers", "heatmap") or line ("mean")
    per training run, named after it (their models need a step: analyze(steps=…),
    analyze_state_dict(step=…), or checkpoint-N folders); with heatmap=LAYER the similarity
    matrix of one layer of `model` (a label; default the first) of the first input. The figure
    options are the command line's, None keeping its default: metric (the y axis, a result
    field; None: erank), title (None: none), panel_titles (a list), size ("column" or "page"),
    width/height (inches), font_size (points), dpi (PNG), cols, share_y, ylim ("LOW,HIGH" or a
    pair), legend ("below", "right", "inside", "none"; None: below), style (a style file),
    colour_map (heatmaps: "viridis", "rdbu" or "greys"), head_order (the similarity heatmap's
    heads: "index" or "cluster", similar heads side by side). Returns the Figure (its SVG text,
    which a notebook displays); with `output`, also writes it there (PNG or PDF through
    rsvg-convert when the name ends in .png or .pdf)."""
    with in_python_words():
        settings = _figure_settings(metric, title, size, width, height, font_size, dpi, cols,
                                    share_y, ylim, legend, style, colour_map, head_order)
        titles = [options.text("panel_titles", panel_title)
                  for panel_title in options.sequence("panel_titles", panel_titles or [])]
        layer = options.optional_integer("heatmap", heatmap)
        model = "" if model is None else options.text("model", model)
        over_steps = "" if over_steps is None else options.text("over_steps", over_steps)
        panels = _plot_panels(inputs)  # read once the arguments are known to be good
        if over_steps and layer is None:
            panels = _steps_panel(panels)
        svg = _kvrank.plot_svg([(name, results._native) for name, results in panels], titles,
                               settings, over_steps, layer, model)
        figure = Figure(svg, settings)
        if output is not None:
            figure.save(output)
    return figure
