"""Tracker: a model's head diversity during training, measured in memory every N steps."""
from ._options import text, whole
from ._results import Results, concat


class Tracker:
    """Measures a model in memory during training, for one named run:

        tracker = kvrank.Tracker(config, run="mha-baseline", every=100)
        for step in range(steps):
            tracker.measure(model, step)      # analyses at steps 0, 100, 200 …; else returns None
            ...
        tracker.results.save("mha-baseline.json")   # a result file: kvrank plot --over-steps
        tracker.plot()                              # each layer's metric against the step

    Each measurement is analyze_state_dict(model, config, run=run, step=step,
    label=f"{run} step {step}", **options): `options` are analyze_state_dict's (repr, layers,
    threads, heads …). Several trackers' results, concatenated, plot as several runs in one
    figure."""

    def __init__(self, config=None, *, run="run", every=1, **options):
        self.config = config
        self.run = text("run", run)
        self.every = whole("every", every, 1)
        self.options = options
        self._measured = []
        self.steps = []  # the steps measured, in order

    def measure(self, model, step, *, force=False):
        """Analyses `model` (an nn.Module or a state dict) when `step` is a multiple of `every`
        (or `force`); returns that step's Results, else None."""
        from . import analyze_state_dict

        step = whole("step", step)
        if step % self.every != 0 and not force:
            return None
        result = analyze_state_dict(model, self.config, run=self.run, step=step,
                                    label=f"{self.run} step {step}", **self.options)
        self._measured.append(result)
        self.steps.append(step)
        return result

    @property
    def results(self):
        """Every measurement so far, in order, as one Results (empty before the first)."""
        return concat(self._measured) if self._measured else Results()

    def plot(self, output=None, *, over_steps="layers", **figure):
        """plot(self.results, over_steps=…): by default each layer's metric against the step."""
        from . import plot

        return plot(self.results, output, over_steps=over_steps, **figure)

    def to_pandas(self, summary=False):
        return self.results.to_pandas(summary)

    def __repr__(self):
        return f"<kvrank.Tracker run={self.run!r} every={self.every}: {len(self._measured)} " \
               f"measurement(s)>"

    def _repr_html_(self):
        return self.results._repr_html_()
