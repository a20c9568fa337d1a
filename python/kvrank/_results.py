"""Results, CheckResult and Figure: what kvrank's functions return, as text, dicts, DataFrames and
— in a notebook — as an HTML table or an SVG that displays itself."""
import csv
import html
import io
import itertools
import json
import re

from . import _kvrank
from ._kvrank import Error

# The summary columns a notebook's table shows (the CSV's, less the geometry and provenance).
_SUMMARY_COLUMNS = ("label", "run", "step", "family", "variant", "repr", "heads", "kv_heads",
                    "layers_analysed", "erank_mean", "erank_pct_mean", "erank_centered_mean")
_LAYER_COLUMNS = ("label", "step", "repr", "layer", "erank", "erank_pct", "erank_centered",
                  "mean_similarity", "pcs_90")


class Results:
    """The result of an analysis: one entry per model and representation (`labels`)."""

    def __init__(self, native=None):
        self._native = _kvrank.Results() if native is None else native

    @classmethod
    def read(cls, path):
        """A result JSON written by `kvrank analyze --format json` (or by save())."""
        from ._options import path as checked_path

        return cls(_kvrank.Results.read(checked_path("path", path)))

    @property
    def labels(self):
        return self._native.labels()

    def __len__(self):
        return len(self.labels)

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
        return self._native.csv_text(bool(summary), sep == "\t")

    def to_pandas(self, summary=False):
        """The CSV table as a DataFrame: one row per model × representation × layer, or with
        summary=True per model × representation (needs pandas)."""
        import pandas

        return pandas.read_csv(io.StringIO(self.to_csv(summary)))

    def save(self, path):
        """Writes the result JSON to `path` (atomically), for `kvrank plot` and `kvrank check`."""
        from ._options import path as checked_path

        _kvrank.write_text(self.to_json(), checked_path("path", path))

    def __str__(self):
        return self._native.table_text()

    def __repr__(self):
        return f"<kvrank.Results {self.labels}>"

    def _repr_html_(self):
        """A notebook's view: the summary per model and representation, then (folded) the
        per-layer table."""
        runs = {(model["label"], model["repr"]): model.get("run")
                for model in self.to_dict()["models"]}
        summary = _csv_rows(self.to_csv(summary=True))
        for row in summary:
            row["run"] = runs.get((row["label"], row["repr"])) or ""
        layers = _csv_rows(self.to_csv())
        return (f"<div class=\"kvrank-results\"><strong>kvrank results</strong>: "
                f"{len(summary)} model(s) × representation(s)"
                f"{_html_table(summary, _SUMMARY_COLUMNS)}"
                f"<details><summary>per layer ({len(layers)} rows)</summary>"
                f"{_html_table(layers, _LAYER_COLUMNS)}</details></div>")


def concat(results):
    """One Results holding the models of all `results`, in order (e.g. one per training step,
    each with its own label)."""
    results = list(results)
    if not results:
        raise Error("concat: no results given")
    native = results[0]._native
    for more in results[1:]:
        if not isinstance(more, Results):
            raise Error(f"concat: expected kvrank.Results, found {type(more).__name__}")
        native = _kvrank.Results(native, more._native)
    return Results(native)


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

    def __repr__(self):
        return f"<kvrank.CheckResult {'ok' if self.ok else f'{len(self.violations)} violation(s)'}>"

    def _repr_html_(self):
        if self.ok:
            return "<div class=\"kvrank-check\"><strong>kvrank check</strong>: ok, every layer " \
                   "within tolerance</div>"
        rows = [dict(v, change=v["current"] - v["golden"]) for v in self.violations]
        columns = ("label", "repr", "layer", "metric", "golden", "current", "change")
        return (f"<div class=\"kvrank-check\"><strong>kvrank check</strong>: "
                f"{len(rows)} violation(s) beyond tolerance{_html_table(rows, columns)}</div>")


class Figure(str):
    """A figure's SVG text (a str, as plot() has always returned), which a notebook displays as
    the figure itself. save(path) writes it (PNG and PDF through rsvg-convert, as plot(output=)
    does)."""

    _displayed = itertools.count()

    def __new__(cls, svg, settings=None):
        figure = super().__new__(cls, svg)
        figure._settings = settings
        return figure

    @property
    def svg(self):
        return str(self)

    def save(self, path):
        from ._options import path as checked_path

        settings = self._settings or _kvrank.FigureSettings()
        _kvrank.save_figure(str(self), checked_path("path", path), settings)

    def __repr__(self):
        return f"<kvrank.Figure: SVG, {len(self)} characters>"

    def _repr_svg_(self):
        # Figures shown in one page share its ids: each display gets its own, or the second
        # figure's panels would clip to the first one's frames.
        prefix = f"kvrank-{next(self._displayed)}-"
        return re.sub(r'(id="|url\(#)kvrank-', lambda m: m.group(1) + prefix, str(self))


def _csv_rows(text):
    return list(csv.DictReader(io.StringIO(text)))


def _cell(value):
    """A table cell: numbers with many digits to 3 decimals, text escaped."""
    long_number = isinstance(value, str) and re.fullmatch(r"-?\d+\.\d{4,}", value)
    if isinstance(value, float) or long_number:
        return f"{float(value):.3f}"
    return html.escape(str(value))


def _html_table(rows, columns):
    columns = [column for column in columns if any(column in row for row in rows)]
    head = "".join(f"<th>{html.escape(column)}</th>" for column in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(row.get(column, ''))}</td>" for column in columns)
                   + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
