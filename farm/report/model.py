"""The report's data model: everything a report shows, assembled once (farm.report.query) from the
store, then rendered by pure functions (figures, render). Tests build a ReportData by hand. Its runs
are farm.store.results.StoredResult rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from farm.analysis.prediction_check import NetworkCheck
from farm.analysis.sustained import SustainedSeries
from farm.analysis.validity import Validity, below_zero, usable
from farm.experiment.expand import same_level
from farm.experiment.model import Experiment
from farm.experiment.sections import FigureKind
from farm.report.notes import QualityNote
from farm.store.layers import LayerResult
from farm.store.results import StoredResult
from farm.store.runs import RunState

# Metric names a figure may use by their short name (the spec's default y is `latency_ms`).
METRIC_ALIASES: dict[str, str] = {
    "latency_ms": "latency_median_ms",
    "latency": "latency_median_ms",
    "energy_mj": "energy_per_inference_mj",
    "energy": "energy_per_inference_mj",
    "power_mw": "power_mean_mw",
    "power": "power_mean_mw",
    "load": "gpu_load_mean",
    "rss_mb": "rss_peak_mb",
    "memory": "rss_peak_mb",
}

# Each metric's own CI, where the per-run metrics carry one (used when a cell has a single run).
OWN_CI: dict[str, tuple[str, str]] = {
    "latency_median_ms": ("latency_median_ci_low_ms", "latency_median_ci_high_ms"),
}


Level = bool | int | float | str
# A view's filter: (factor, levels it may take), in the order the spec wrote them.
Where = tuple[tuple[str, tuple[Level, ...]], ...]


def where_of(where: dict[str, Level | tuple[Level, ...]]) -> Where:
    """A spec's `where` mapping as a FigureSpec / TableSpec field."""
    return tuple((name, value if isinstance(value, tuple) else (value,)) for name, value in where.items())


def where_text(where: Where) -> str:
    """`backend=gpu, g=1 or 2`: the cells a view keeps, for its caption."""
    return ", ".join(f"{name}={' or '.join(str(v) for v in levels)}" for name, levels in where)


def matches(where: Where, factors: Mapping[str, object]) -> bool:
    """Whether a run with these factor levels is one a view with `where` keeps."""
    return all(
        name in factors and any(same_level(factors[name], level) for level in levels)  # type: ignore[arg-type]
        for name, levels in where
    )


@dataclass(frozen=True)
class FigureSpec:
    """One figure: y is a metric, x / color / facet name factors or `device`; `where` keeps only
    runs with those levels, `pool` names the factors the figure averages over on purpose."""

    x: str
    y: str = "latency_median_ms"
    color: str | None = None
    facet: str | None = None
    kind: FigureKind = FigureKind.LINE
    title: str | None = None
    where: Where = ()
    pool: tuple[str, ...] = ()
    # Derived figures (farm.report.derived_figures), per phone: y against a reference level of a
    # factor (speedup: reference / level), or each run's part / whole (metric names summed).
    relative_to: tuple[str, Level] | None = None
    speedup: bool = False
    share_of: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    # Marks (farm.report.derived_figures): where a relative_to figure's ratio crosses 1 along x,
    # with its CI; a plain figure's best level of x per line.
    crossover: str | None = None
    best_of: str | None = None

    @property
    def derived(self) -> bool:
        return self.relative_to is not None or self.share_of is not None

    @property
    def named(self) -> tuple[str, ...]:
        derived = (*(self.relative_to[:1] if self.relative_to else ()), "device") if self.derived else ()
        return tuple(dict.fromkeys(a for a in (self.x, self.color, self.facet, *derived) if a is not None))

    @property
    def name(self) -> str:
        parts = [self.y, "vs", self.x]
        if self.relative_to is not None:
            kind = "speedup" if self.speedup else "ratio"
            parts = [self.y, kind, "over", self.relative_to[0], str(self.relative_to[1]), "vs", self.x]
        elif self.share_of is not None:
            parts = ["share", "+".join(self.share_of[0]), "vs", self.x]
        if self.crossover:
            parts += ["crossover"]
        if self.best_of:
            parts += ["best"]
        if self.color:
            parts += ["by", self.color]
        if self.facet:
            parts += ["per", self.facet]
        for factor, levels in self.where:
            parts += ["at", factor, "-".join(str(v) for v in levels)]
        return re.sub(r"[^A-Za-z0-9_.+-]", "-", "_".join(parts))


@dataclass(frozen=True)
class TableSpec:
    """One declared table (farm.experiment.sections.Table): rows name factors; derived tables show one
    metric relative to a reference level, where that ratio crosses 1, or the best level."""

    rows: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ("latency_median_ms",)
    title: str | None = None
    where: Where = ()
    pool: tuple[str, ...] = ()
    relative_to: tuple[str, Level] | None = None
    speedup: bool = False
    crossover: str | None = None
    best_of: str | None = None

    @property
    def named(self) -> tuple[str, ...]:
        derived = [self.relative_to[0] if self.relative_to else None, self.crossover, self.best_of]
        return (*self.rows, *(name for name in derived if name is not None))


@dataclass(frozen=True)
class PhoneInfo:
    """A phone that ran (or was meant to run) part of the experiment, with its environment."""

    device_id: str
    model: str | None = None
    virtual: bool = False
    abi: str | None = None
    properties: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ReportData:
    experiment: str
    benchmark: str | None
    spec: Experiment | None  # what was asked (the stored spec, validated again), None if unreadable
    factor_names: tuple[str, ...]
    phones: tuple[PhoneInfo, ...]
    runs: tuple[StoredResult, ...]
    figures: tuple[FigureSpec, ...] = ()  # declared in the experiment's report section
    tables: tuple[TableSpec, ...] = ()  # declared in the experiment's report section
    notes: tuple[QualityNote, ...] = ()  # data-quality notes found by the query (e.g. charging stayed on)
    # Regressions flagged on this experiment (a nightly) by its schedule or `farm regress`, one line each.
    regressions: tuple[str, ...] = ()
    generated_at: str = ""
    description: str = ""
    # Figures and cell statistics use valid runs only (farm.analysis.validity) unless this is set.
    include_invalid: bool = False
    # run_id -> its per-layer results (farm.store.layers), for programs that report layers (cnn).
    layers: Mapping[str, tuple[LayerResult, ...]] = field(default_factory=dict)
    # run_id -> its latency, clocks and temperature over time, for sustained runs whose folder is
    # readable here (farm.report.run_files; the store holds only their summary metrics).
    sustained: Mapping[str, SustainedSeries] = field(default_factory=dict)
    # A kernel predictor file (`farm report --model`) held against the networks the runs measured
    # (farm.analysis.prediction_check), and the file's name for the captions.
    predictions: tuple[NetworkCheck, ...] = ()
    predictor_source: str = ""

    def metric_name(self, name: str) -> str:
        """A figure's y as stored: the name itself if some run has it, else its alias."""
        if any(name in run.metrics for run in self.runs):
            return name
        return METRIC_ALIASES.get(name, name)

    def unit_of(self, metric: str) -> str:
        for run in self.runs:
            if metric in run.units:
                return run.units[metric]
        return ""

    @property
    def done_runs(self) -> tuple[StoredResult, ...]:
        return tuple(run for run in self.runs if run.state is RunState.DONE)

    def counts(self, run: StoredResult, metric: str) -> bool:
        """Whether a DONE run's `metric` goes into figures and cell statistics."""
        return (self.include_invalid or usable(run.metrics, metric)) and not below_zero(run.metrics, metric)

    @property
    def invalid_runs(self) -> tuple[StoredResult, ...]:
        """DONE runs whose latency validity failed (farm.analysis.validity)."""
        return tuple(run for run in self.done_runs if not Validity.from_metrics(run.metrics).valid())
