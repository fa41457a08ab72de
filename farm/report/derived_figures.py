"""Derived figures (pure): the ratios and shares a study argues with, drawn per phone, and the
report's list of figures (plain ones from farm.report.figures, derived ones from here).

- `relative_to: {backend: cpu}`: per phone and level of x, every other level's ratio of medians of
  y against the reference (`speedup`: reference / level), with its bootstrap 95% CI as error bars
  and a dashed line at 1 (farm.analysis.derived.relative_to).
- `share_of: {part: [...], whole: [...]}`: per phone, level of x and level of color, the median
  over runs of each run's part / whole with its bootstrap CI (farm.analysis.derived.share_of).
- `crossover: x` on a relative_to figure: per phone and compared level, a dotted line where the
  ratio crosses 1 and its bootstrap CI shaded (farm.analysis.derived.crossovers); the caption
  gives the numbers.

Phones are never pooled: one panel each. A numeric x draws lines, anything else grouped bars.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from farm.analysis.catalogue import describe
from farm.analysis.derived import CrossoverOf, Ratio, crossovers, relative_to, share_of
from farm.experiment.sections import FigureKind
from farm.report.export import factor_columns
from farm.report.figures import (
    _RC,
    FACTOR_LABELS,
    RenderedFigure,
    _is_number,
    _label,
    _level_order,
    caption,
    figures_for,
    level_colors,
    render_figure,
    rendered,
)
from farm.report.frame import tidy_frame
from farm.report.model import FigureSpec, ReportData, matches
from farm.report.views import select
from farm.store.results import StoredResult

SHORT_LABEL = 40  # characters of a y label that fit beside a 3.6-inch-high panel


@dataclass(frozen=True)
class Point:
    """One drawn value: on a phone's panel, at level x of one line, with its CI."""

    device: str
    line: tuple[Hashable, ...]  # the line's key: its colour level first
    label: str | None  # legend text of the line
    x: Hashable
    value: float
    low: float
    high: float


@dataclass(frozen=True)
class Band:
    """A mark at x on a phone's panel, in its line's colour: where a ratio crosses 1, with its CI
    (low, high) shaded; no CI when no resample crossed."""

    device: str
    line: Hashable  # the colour level of the line it belongs to
    at: float
    low: float | None
    high: float | None


def crossover_bands(found: Sequence[CrossoverOf]) -> list[Band]:
    """The crossings (farm.analysis.derived.crossovers) that were found, as marks."""
    return [
        Band(
            c.device,
            c.level,
            c.found.at,
            *((c.found.ci.low, c.found.ci.high) if c.found.ci else (None, None)),
        )
        for c in found
        if c.found.at is not None
    ]


def _draw_bands(ax: Axes, bands: Sequence[Band], palette: dict[Hashable, str]) -> None:
    # gid: the browser test finds the marks by id in the page's SVG
    for index, band in enumerate(bands):
        color = palette.get(band.line, "grey")
        ax.axvline(band.at, color=color, linestyle=":", linewidth=1.4, gid=f"farm-mark-crossover-{index}")
        if band.low is not None and band.high is not None:
            ax.axvspan(band.low, band.high, color=color, alpha=0.15, gid=f"farm-mark-crossover-ci-{index}")


def _draw_panel(ax: Axes, points: Sequence[Point], palette: dict[Hashable, str], kind: FigureKind) -> None:
    lines: dict[tuple[Hashable, ...], list[Point]] = {}
    for point in points:
        lines.setdefault(point.line, []).append(point)
    numeric = all(_is_number(p.x) for p in points)
    categories = sorted({p.x for p in points}, key=_level_order)
    width = 0.8 / max(len(lines), 1)
    for index, (key, line) in enumerate(lines.items()):
        line.sort(key=lambda p: _level_order(p.x))
        color = palette.get(key[0], f"C{index % 10}")
        errors = [[p.value - p.low for p in line], [p.high - p.value for p in line]]
        label = _label(line[0].label) if line[0].label else None
        ys = [p.value for p in line]
        if numeric and kind is FigureKind.LINE:
            xs = [float(p.x) for p in line]  # type: ignore[arg-type]  # numeric x
            ax.errorbar(xs, ys, yerr=errors, marker="o", capsize=3, label=label, color=color)
        else:
            offset = (index - (len(lines) - 1) / 2) * width
            positions = [categories.index(p.x) + offset for p in line]
            ax.bar(positions, ys, width=width, yerr=errors, capsize=3, label=label, color=color)
    if not (numeric and kind is FigureKind.LINE):
        ax.set_xticks(range(len(categories)), [_label(c) for c in categories], rotation=20, ha="right")


def draw_per_phone(
    data: ReportData,
    spec: FigureSpec,
    points: Sequence[Point],
    *,
    palette_factor: str | None,
    ylabel: str,
    caption_text: str,
    title: str,
    ratio: bool,
    bands: Sequence[Band] = (),
) -> RenderedFigure | None:
    """One panel per phone of points (lines or bars by their key) and its `bands`; `ratio` adds
    the line at 1, else the y axis starts at 0 (shares). None without points."""
    if not points:
        return None
    phones = sorted({p.device for p in points})
    palette = level_colors(data, palette_factor)
    with rc_context(_RC):  # type: ignore[arg-type]  # keys are valid rcParams
        figure = Figure(figsize=(min(4.0 * len(phones) + 1.0, 16.0), 3.6), layout="constrained")
        axes = figure.subplots(1, len(phones), squeeze=False, sharey=True)[0]
        for ax, phone in zip(axes, phones, strict=True):
            _draw_panel(ax, [p for p in points if p.device == phone], palette, spec.kind)
            _draw_bands(ax, [b for b in bands if b.device == phone], palette)
            if ratio:
                ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
            else:
                ax.set_ylim(bottom=0.0)
            ax.set_title(_label(f"device={phone}"))
            ax.set_xlabel(FACTOR_LABELS.get(spec.x, spec.x))
            ax.grid(True, alpha=0.3)
            if any(p.label for p in points):
                ax.legend(fontsize=7)
        axes[0].set_ylabel(ylabel)
        figure.suptitle(_label(title))
        return rendered(spec, title, caption_text, figure)


def ratio_points(ratios: Sequence[Ratio], x: str) -> list[Point]:
    """Ratios (farm.analysis.derived.relative_to) as points at their level of x (a column of
    their cells), one line per compared level and remaining cell."""
    points = []
    for r in ratios:
        cell = dict(r.cell)
        if x not in cell:
            continue
        rest = tuple(v for k, v in r.cell if k != x)
        # name each level's factor: "(hidden=128, layers=2)", not "(128, 2)"
        rest_label = ", ".join(f"{k}={v}" for k, v in r.cell if k != x)
        label = f"{r.factor}={r.level}" + (f" ({rest_label})" if rest_label else "")
        points.append(Point(r.device, (r.level, *rest), label, cell[x], r.value, r.ci.low, r.ci.high))
    return points


def render_ratio_figure(
    data: ReportData, spec: FigureSpec, ratios: Sequence[Ratio], *, ylabel: str, caption_text: str
) -> RenderedFigure | None:
    """Ratios against spec.x, one panel per phone, CI error bars and the line where the ratio is 1
    (the study sections' figures)."""
    title = spec.title or f"{ylabel} vs {spec.x}"
    return draw_per_phone(
        data,
        spec,
        ratio_points(ratios, spec.x),
        palette_factor=ratios[0].factor if ratios else None,
        ylabel=ylabel,
        caption_text=f"{title}: {caption_text}.",
        title=title,
        ratio=True,
    )


def _figure_runs(data: ReportData, spec: FigureSpec, metrics: Sequence[str]) -> list[StoredResult]:
    """The runs a derived figure counts: DONE, kept by `where`, with usable values of `metrics`."""
    return [
        run
        for run in data.done_runs
        if matches(spec.where, run.factors) and all(m in run.metrics and data.counts(run, m) for m in metrics)
    ]


def relative_points(data: ReportData, spec: FigureSpec) -> list[Point]:
    """What a `relative_to` figure draws: per phone, level of x and compared level, the ratio of
    medians over the counted runs with its bootstrap CI."""
    assert spec.relative_to is not None
    factor, reference = spec.relative_to
    column = dict(factor_columns(data))
    rows = select(tidy_frame(data), data, spec.where)
    ratios = relative_to(
        rows,
        data.metric_name(spec.y),
        (column[factor], reference),
        [column[spec.x], column[factor]],
        speedup=spec.speedup,
    )
    return ratio_points(ratios, column[spec.x])


def share_points(data: ReportData, spec: FigureSpec) -> list[Point]:
    """What a `share_of` figure draws: per phone, level of x and of color, the median over the
    counted runs of part / whole with its bootstrap CI."""
    assert spec.share_of is not None
    part, whole = spec.share_of
    column = dict(factor_columns(data))
    color = column[spec.color] if spec.color and spec.color != "device" else None
    factors = [column[spec.x], *([color] if color else [])]
    shares = share_of(select(tidy_frame(data), data, spec.where), list(part), list(whole), factors)
    points = []
    for s in shares:
        cell = dict(s.cell)
        level = cell.get(color) if color else None
        label = f"{spec.color}={level}" if color else None
        points.append(Point(s.device, (level,), label, cell[column[spec.x]], s.value, s.ci.low, s.ci.high))
    return points


def crossover_marks(data: ReportData, spec: FigureSpec) -> list[CrossoverOf]:
    """What a `crossover` figure marks: per phone and compared level, where the ratio it draws
    crosses 1 along x (the same runs and statistics as its points)."""
    assert spec.relative_to is not None and spec.crossover is not None
    factor, reference = spec.relative_to
    column = dict(factor_columns(data))
    rows = select(tidy_frame(data), data, spec.where)
    return crossovers(
        rows,
        data.metric_name(spec.y),
        (column[factor], reference),
        column[spec.crossover],
        [],
        speedup=spec.speedup,
    )


def crossover_text(found: Sequence[CrossoverOf]) -> str:
    """`gpu crosses 1 at gpu_load 0.62 [0.55, 0.70] on local/vp-1; ...` for a caption."""
    parts = []
    for c in found:
        where = f"{c.factor}={c.level} on {c.device}"
        if c.found.at is None:
            parts.append(f"{where}: no crossing in {c.levels[0]}..{c.levels[-1]}")
            continue
        ci = f" [{c.found.ci.low:.3g}, {c.found.ci.high:.3g}]" if c.found.ci and c.runs > 1 else ""
        parts.append(f"{where}: crosses 1 at {c.along} {c.found.at:.3g}{ci}")
    return "; ".join(parts)


def render_relative(data: ReportData, spec: FigureSpec) -> RenderedFigure | None:
    """A declared `relative_to` figure, with its crossings of 1 when it names `crossover`."""
    assert spec.relative_to is not None
    factor, reference = spec.relative_to
    y = data.metric_name(spec.y)
    kind = "speedup over" if spec.speedup else "ratio to"
    at = f"{factor}={reference}"
    how = f"median at {at} / median" if spec.speedup else f"median / median at {at}"
    title = spec.title or f"{y}: {kind} {at} vs {spec.x}"
    what = f"{y}, {how} over runs per phone, error bars = bootstrap 95% CI of the ratio, dashed: 1"
    found = crossover_marks(data, spec) if spec.crossover is not None else []
    if spec.crossover is not None:
        what += (
            "; dotted: where the ratio crosses 1 (linear between levels), shaded: its bootstrap 95% CI"
            + (f" ({crossover_text(found)})" if found else "")
        )
    return draw_per_phone(
        data,
        spec,
        relative_points(data, spec),
        palette_factor=factor,
        ylabel=f"{describe(y).name}: {kind} {at} [x]",
        caption_text=caption(data, spec, _figure_runs(data, spec, [y]), title, what),
        title=title,
        ratio=True,
        bands=crossover_bands(found),
    )


def render_share(data: ReportData, spec: FigureSpec) -> RenderedFigure | None:
    """A declared `share_of` figure."""
    assert spec.share_of is not None
    part, whole = spec.share_of
    parts, wholes = " + ".join(part), " + ".join(whole)
    title = spec.title or f"Share of {parts} in {wholes} vs {spec.x}"
    what = f"median over runs of ({parts}) / ({wholes}) per phone, error bars = bootstrap 95% CI"
    return draw_per_phone(
        data,
        spec,
        share_points(data, spec),
        palette_factor=spec.color,
        ylabel=f"share of {wholes}" if len(wholes) <= SHORT_LABEL else "share of the whole [fraction]",
        caption_text=caption(data, spec, _figure_runs(data, spec, [*part, *whole]), title, what),
        title=title,
        ratio=False,
    )


def draw(data: ReportData, spec: FigureSpec) -> RenderedFigure | None:
    """Any figure spec: derived ones here, plain ones by farm.report.figures."""
    if spec.relative_to is not None:
        return render_relative(data, spec)
    if spec.share_of is not None:
        return render_share(data, spec)
    return render_figure(data, spec)


def render_figures(data: ReportData) -> list[RenderedFigure]:
    """The experiment's declared figures in order, then the defaults; only those with data."""
    drawn = (draw(data, spec) for spec in figures_for(data))
    return [figure for figure in drawn if figure is not None]
