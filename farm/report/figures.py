"""Report figures with matplotlib (Agg, no pyplot state): SVG for the HTML page and files, PDF for
papers. Each point is a group's median over runs with its bootstrap 95% CI as error bars.

Text in figures comes from users (device names, factor levels): mathtext is off, so a `$` stays a
dollar, and the SVG writer escapes `<`, `>` and `&` in <text> elements (svg.fonttype none).
"""

from __future__ import annotations

import io
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from farm.analysis.aggregate import GroupStat, Observation, aggregate
from farm.analysis.catalogue import axis_label
from farm.analysis.pooling import pooled_factors, pooled_phrase
from farm.experiment.sections import FigureKind
from farm.report.model import OWN_CI, FigureSpec, ReportData, matches, where_text
from farm.safe_text import terminal
from farm.store.results import DEVICE, StoredResult

_RC: dict[str, Any] = {
    "svg.fonttype": "none",  # real <text>: small, searchable, escaped
    "svg.hashsalt": "farm",  # stable element ids: the same data gives the same file
    "text.parse_math": False,
    "font.size": 9,
}

# Axis labels for well-known factors (metrics carry their unit in the store).
FACTOR_LABELS: dict[str, str] = {
    "gpu_load": "background GPU load [fraction busy]",
    "hidden": "hidden units",
    "layers": "layers",
    "batch": "batch [windows per call]",
    "threads": "threads",
    DEVICE: "phone",
}


@dataclass(frozen=True)
class RenderedFigure:
    spec: FigureSpec
    title: str
    svg: str  # a complete SVG document
    pdf: bytes
    caption: str  # what each point is, which cells it keeps and what it pools

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def inline_svg(self) -> str:
        """The <svg> element alone, for embedding in HTML."""
        return self.svg[self.svg.index("<svg") :]


def rendered(spec: FigureSpec, title: str, caption_text: str, figure: Figure) -> RenderedFigure:
    """A drawn figure as SVG (for the page) and PDF (for papers). Call it inside rc_context(_RC):
    the writers read the rcParams (text as <text>, stable ids). No dates in either file, so the
    same data gives the same bytes."""
    svg = io.StringIO()
    figure.savefig(svg, format="svg", metadata={"Date": None})
    pdf = io.BytesIO()
    figure.savefig(pdf, format="pdf", metadata={"CreationDate": None})
    return RenderedFigure(spec, title, svg.getvalue(), pdf.getvalue(), caption_text)


def default_figures(data: ReportData) -> list[FigureSpec]:
    """Sensible figures when the experiment declares none, or beside the declared ones."""
    factors = [f for f in data.factor_names if _levels(data, f) > 1]
    color = "backend" if "backend" in factors else None
    # Net of the idle baseline when the engine measured one, else the gross energy.
    energy = "energy_per_inference_mj"
    if not any(energy in run.metrics for run in data.done_runs):
        energy = "energy_per_inference_gross_mj"
    specs: list[FigureSpec] = []
    if "gpu_load" in factors:
        facet = "hidden" if "hidden" in factors else None
        specs.append(FigureSpec(x="gpu_load", y="latency_median_ms", color=color, facet=facet))
        specs.append(FigureSpec(x="gpu_load", y=energy, color=color, facet=facet))
    if "hidden" in factors:
        specs.append(FigureSpec(x="hidden", y="latency_median_ms", color=color, facet=None))
    if not specs:
        numeric = [f for f in factors if f != color and _numeric_levels(data, f)]
        x = numeric[0] if numeric else (factors[0] if factors else DEVICE)
        kind = FigureKind.LINE if numeric else FigureKind.BAR
        by = color if x != color else None
        specs.append(FigureSpec(x=x, y="latency_median_ms", color=by, kind=kind))
        specs.append(FigureSpec(x=x, y=energy, color=by, kind=kind))
    if len({run.device_id for run in data.done_runs}) > 1:
        specs.append(FigureSpec(x=DEVICE, y="latency_median_ms", color=color, kind=FigureKind.BAR))
    return specs


def drawn_key(data: ReportData, spec: FigureSpec) -> tuple[object, ...]:
    """What a figure draws, whatever its title or `where`: two figures with one key repeat
    each other (a default beside the declared one, a study's figure beside the file's)."""
    return (
        spec.x,
        data.metric_name(spec.y),
        spec.color,
        spec.facet,
        spec.relative_to,
        spec.share_of,
    )


def _repeats(data: ReportData, default: FigureSpec, declared: FigureSpec) -> bool:
    """Whether an automatic figure shows what a declared one already shows: the same metric (or
    ratio, or share) along the same x, however coloured or faceted, or with x and colour swapped
    (latency by phone per backend vs by backend per phone)."""
    mine, theirs = drawn_key(data, default), drawn_key(data, declared)
    if (mine[1], mine[4], mine[5]) != (theirs[1], theirs[4], theirs[5]):
        return False
    return default.x == declared.x or {default.x, default.color} == {declared.x, declared.color}


def figures_for(data: ReportData) -> list[FigureSpec]:
    """Declared figures first, then defaults showing what no declared one shows; only those with
    data."""
    specs: list[FigureSpec] = []
    defaults = [
        spec for spec in default_figures(data) if not any(_repeats(data, spec, d) for d in data.figures)
    ]
    for spec in [*data.figures, *defaults]:
        if spec.name not in {s.name for s in specs} and _has_data(data, spec):
            specs.append(spec)
    return specs


def _levels(data: ReportData, factor: str) -> int:
    return len({_hashable(run.factor(factor)) for run in data.runs})


def _numeric_levels(data: ReportData, factor: str) -> bool:
    values = [run.factor(factor) for run in data.runs]
    return bool(values) and all(_is_number(v) for v in values)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _hashable(value: Any) -> Hashable:
    return value if isinstance(value, Hashable) else repr(value)


def _has_data(data: ReportData, spec: FigureSpec) -> bool:
    wanted = [*spec.share_of[0], *spec.share_of[1]] if spec.share_of else [data.metric_name(spec.y)]
    return any(
        all(name in run.metrics for name in wanted)
        for run in data.done_runs
        if matches(spec.where, run.factors)
    )


def _observations(runs: list[StoredResult], spec: FigureSpec, y: str) -> list[Observation]:
    own = OWN_CI.get(y)
    result = []
    for run in runs:
        own_ci = None
        if own and own[0] in run.metrics and own[1] in run.metrics:
            own_ci = (run.metrics[own[0]], run.metrics[own[1]])
        result.append(Observation((_hashable(run.factor(spec.x)),), run.metrics[y], own_ci))
    return result


def _level_order(value: Hashable) -> tuple[int, float, str]:
    """Numbers in numeric order before strings (hidden 32 < 128, not "128" < "32")."""
    return (0, float(value), "") if _is_number(value) else (1, 0.0, str(value))  # type: ignore[arg-type]


def _label(text: object) -> str:
    """Text drawn in a figure: no control characters (invalid in SVG), `$` not read as mathtext."""
    return terminal(text).replace("$", r"\$")


def level_colors(data: ReportData, factor: str | None) -> dict[Hashable, str]:
    """One colour per level of a factor, the same in every figure of the report: levels of the
    whole experiment in order, taking matplotlib's ten-colour cycle in turn."""
    if factor is None:
        return {None: "C0"}
    levels = sorted({_hashable(run.factor(factor)) for run in data.runs}, key=_level_order)
    return {level: f"C{i % 10}" for i, level in enumerate(levels)}


def best_stat(stats: Sequence[GroupStat]) -> GroupStat | None:
    """A line's point with the lowest median (`best_of`: the best level of x; the first of a tie,
    in the line's order), None for an empty line."""
    return min(stats, key=lambda g: g.median, default=None)


def _draw_best(ax: Axes, x: float, stat: GroupStat, color: str, gid: str) -> None:
    ax.plot([x], [stat.median], marker="*", markersize=14, color=color, markeredgecolor="black",
            linestyle="none", zorder=5, gid=gid)  # fmt: skip
    ax.annotate(_label(f"best {stat.key[0]}"), (x, stat.median), textcoords="offset points",
                xytext=(0, 9), ha="center", fontsize=7)  # fmt: skip


def _draw(
    ax: Axes,
    spec: FigureSpec,
    groups: dict[Hashable, list[GroupStat]],
    numeric_x: bool,
    palette: dict[Hashable, str],
    panel: int = 0,
) -> None:
    categories = sorted({g.key[0] for stats in groups.values() for g in stats}, key=_level_order)
    width = 0.8 / max(len(groups), 1)
    for index, (label, stats) in enumerate(groups.items()):
        color = palette.get(label, f"C{index % 10}")
        medians = [g.median for g in stats]
        errors = [[g.median - g.ci_low for g in stats], [g.ci_high - g.median for g in stats]]
        legend = None if label is None else _label(f"{spec.color}={label}")
        positions = [categories.index(g.key[0]) + (index - (len(groups) - 1) / 2) * width for g in stats]
        if spec.kind is FigureKind.LINE and numeric_x:
            xs = [float(g.key[0]) for g in stats]  # type: ignore[arg-type]
            ax.errorbar(xs, medians, yerr=errors, marker="o", capsize=3, label=legend, color=color)
        elif spec.kind is FigureKind.BOX:
            ax.boxplot(
                [list(g.values) for g in stats],
                positions=positions,
                widths=width * 0.9,
                patch_artist=True,
                boxprops={"facecolor": color, "alpha": 0.5},
                medianprops={"color": "black"},
            )
            if legend:
                ax.plot([], [], color=color, linewidth=6, alpha=0.5, label=legend)
        else:
            ax.bar(positions, medians, width=width, yerr=errors, capsize=3, label=legend, color=color)
        best = best_stat(stats) if spec.best_of is not None else None
        if best is not None:
            line = spec.kind is FigureKind.LINE and numeric_x
            at = float(best.key[0]) if line else positions[stats.index(best)]  # type: ignore[arg-type]
            # gid: the browser test finds the marks by id in the page's SVG
            _draw_best(ax, at, best, color, f"farm-mark-best-{panel}-{index}")
    if not (spec.kind is FigureKind.LINE and numeric_x):
        ax.set_xticks(range(len(categories)), [_label(c) for c in categories], rotation=20, ha="right")


def _values(runs: list[StoredResult], factor: str | None) -> list[Hashable]:
    """The levels of a factor among runs (numbers in order), or [None] when there is no factor."""
    if factor is None:
        return [None]
    return sorted({_hashable(run.factor(factor)) for run in runs}, key=_level_order)


def _with(runs: list[StoredResult], factor: str | None, level: Hashable) -> list[StoredResult]:
    return runs if factor is None else [r for r in runs if _hashable(r.factor(factor)) == level]


def _below_zero_energy(y: str, run: StoredResult) -> bool:
    """An energy below zero (a run that drew less than the idle baseline) is no energy: it is
    left out of figures, and quality_notes names the run."""
    return y.startswith("energy_") and run.metrics[y] < 0


def figure_runs(data: ReportData, spec: FigureSpec) -> list[StoredResult]:
    """The runs a figure draws: DONE, kept by its `where`, with a usable value of its metric."""
    y = data.metric_name(spec.y)
    return [
        run
        for run in data.done_runs
        if matches(spec.where, run.factors)
        and y in run.metrics
        and data.counts(run, y)
        and not _below_zero_energy(y, run)
    ]


POINT = "median over runs, error bars = bootstrap 95% CI of the median"


def caption(
    data: ReportData, spec: FigureSpec, runs: list[StoredResult], title: str, what: str = POINT
) -> str:
    """The figure's caption, from the runs it draws: what a point is, the cells kept (`where`),
    and every factor and phone a point pools (declared in `pool` or not: the runs say)."""
    rows = [{name: _hashable(run.factor(name)) for name in data.factor_names} for run in runs]
    pooled = pooled_factors(rows, spec.named, data.factor_names)
    phones = 1 if DEVICE in spec.named else len({run.device_id for run in runs})
    parts = [f"{title}: {what}"]
    if spec.where:
        parts.append(f"only {where_text(spec.where)}")
    pools = pooled_phrase(pooled, phones)
    if pools:
        parts.append(pools)
    return "; ".join(parts) + "."


def render_figure(data: ReportData, spec: FigureSpec) -> RenderedFigure | None:
    """Draw one figure from the DONE runs; None when no run has its metric."""
    y = data.metric_name(spec.y)
    runs = figure_runs(data, spec)
    if not runs:
        return None
    facets = _values(runs, spec.facet)
    numeric_x = all(_is_number(run.factor(spec.x)) for run in runs)
    if spec.kind is FigureKind.LINE and len({_hashable(run.factor(spec.x)) for run in runs}) < 2:
        # one x value: a line of single points says nothing a bar does not say better
        spec, numeric_x = replace(spec, kind=FigureKind.BAR), False
    unit = data.unit_of(y)
    title = spec.title or f"{y} vs {spec.x}" + (f" by {spec.color}" if spec.color else "")
    with rc_context(_RC):  # type: ignore[arg-type]  # keys are valid rcParams
        figure = Figure(figsize=(min(4.0 * len(facets) + 1.0, 16.0), 3.6), layout="constrained")
        axes = figure.subplots(1, len(facets), squeeze=False, sharey=True)[0]
        for panel, (ax, facet) in enumerate(zip(axes, facets, strict=True)):
            in_facet = _with(runs, spec.facet, facet)
            colors = (
                sorted({_hashable(r.factor(spec.color)) for r in in_facet}, key=str) if spec.color else [None]
            )
            groups = {
                color: aggregate(
                    _observations(
                        [
                            r
                            for r in in_facet
                            if spec.color is None or _hashable(r.factor(spec.color)) == color
                        ],
                        spec,
                        y,
                    )
                )
                for color in colors
            }
            _draw(ax, spec, groups, numeric_x, level_colors(data, spec.color), panel)
            if spec.facet:
                ax.set_title(_label(f"{spec.facet}={facet}"))
            ax.set_xlabel(FACTOR_LABELS.get(spec.x, spec.x))
            ax.grid(True, alpha=0.3)
            if spec.color:
                ax.legend(fontsize=7)
        axes[0].set_ylabel(_label(axis_label(y, unit)))
        figure.suptitle(_label(title))
        what = POINT
        if spec.best_of is not None:
            what += f"; star: each line's level of {spec.best_of} with the lowest median"
        return rendered(spec, title, caption(data, spec, runs, title, what), figure)


def undrawn_notes(data: ReportData) -> list[str]:
    """A declared figure of a measured metric that no run can be drawn in says so, and why: a
    figure that silently vanishes reads as "nothing to see" where the truth is "nothing valid to
    show" (e.g. energy on runs too short for the fuel gauge). Derived figures (speedups, shares)
    say their own reasons in their sections."""
    notes = []
    for spec in data.figures:
        if spec.relative_to or spec.share_of or spec.speedup or figure_runs(data, spec):
            continue
        y = data.metric_name(spec.y)
        measured = [r for r in data.done_runs if matches(spec.where, r.factors) and y in r.metrics]
        title = spec.title or f"{y} vs {spec.x}"
        if measured:
            why = (
                f"{len(measured)} run(s) measured {y}, none validly (see the notes above: charging on, "
                "too few fuel-gauge readings or below the idle power)"
            )
        else:
            why = f"no finished run has {y}"
        notes.append(f"Figure '{title}' is not drawn: {why}.")
    return notes
