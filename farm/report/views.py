"""Declared tables of a report, computed from the tidy frame (pure): plain medians per phone,
or derived (relative_to / crossover / best_of, farm.analysis.derived). Every cell is text written
by farm.report.numbers, the same writer the study sentences use.

A table is per phone unless it says `pool: [device]`: then each row pools the phones, and shows
how far apart their medians are (the between-phone spread) beside the pooled median.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from farm.analysis.derived import DEVICE, best_of, crossovers, relative_to
from farm.analysis.pooling import pooled_factors, pooled_phrase
from farm.analysis.stats import bootstrap_median_ci
from farm.experiment.expand import same_level
from farm.report.export import factor_columns
from farm.report.frame import counted, tidy_frame
from farm.report.model import ReportData, TableSpec, Where, where_text
from farm.report.numbers import interval, interval_of, number


@dataclass(frozen=True)
class RenderedTable:
    title: str
    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def text(self) -> str:
        """Every cell, for checking that a sentence's numbers come from the table."""
        return " ".join(" ".join(row) for row in self.rows)


def select(frame: pd.DataFrame, data: ReportData, where: Where) -> pd.DataFrame:
    """The rows a view counts: valid DONE rows (farm.report.frame.counted) kept by `where`."""
    rows = counted(frame, data)
    column = dict(factor_columns(data))
    for name, levels in where:
        keep = rows[column.get(name, name)].map(lambda v, ls=levels: any(same_level(v, x) for x in ls))
        rows = rows[keep.astype(bool)]
    return rows


def _level(value: object) -> str:
    return number(value) if isinstance(value, float) else str(value)


def _caption(data: ReportData, spec: TableSpec, rows: pd.DataFrame, what: str) -> str:
    column = dict(factor_columns(data))
    records = rows.drop_duplicates("run_id")[[column[f] for f in data.factor_names]]
    records.columns = list(data.factor_names)
    pooled = pooled_factors(records.to_dict("records"), spec.named, data.factor_names)
    phones = rows[DEVICE].nunique() if DEVICE in spec.pool else 1
    parts = [what]
    if spec.where:
        parts.append(f"only {where_text(spec.where)}")
    pools = pooled_phrase(pooled, phones).replace("each point", "each row")
    if pools:
        parts.append(pools)
    return "; ".join(parts) + "."


def _plain(data: ReportData, spec: TableSpec, rows: pd.DataFrame) -> RenderedTable:
    column = dict(factor_columns(data))
    keys = [column[r] for r in spec.rows]
    per_phone = DEVICE not in spec.pool
    group_keys = ([DEVICE] if per_phone else []) + keys
    header = [*([DEVICE] if per_phone else []), *spec.rows, "runs"]
    for metric in spec.metrics:
        header += [f"{metric} median", "95% CI"] + ([] if per_phone else ["phones", "between-phone range"])
    body = []
    for group, part in rows.groupby(group_keys, sort=True) if group_keys else [((), rows)]:
        values = group if isinstance(group, tuple) else (group,)
        line = [_level(v) for v in values] + [str(part["run_id"].nunique())]
        for metric in spec.metrics:
            sample = part.loc[part["metric"] == metric, "value"].to_numpy(dtype=np.float64)
            if sample.size == 0:
                line += ["–", "–"] + ([] if per_phone else ["–", "–"])
                continue
            ci = bootstrap_median_ci(sample)
            line += [number(float(np.median(sample))), interval_of(ci.low, ci.high, sample.size)]
            if not per_phone:
                phone_medians = part[part["metric"] == metric].groupby(DEVICE)["value"].median()
                line += [
                    str(len(phone_medians)),
                    interval(float(phone_medians.min()), float(phone_medians.max())),
                ]
        body.append(tuple(line))
    what = "median over runs with its bootstrap 95% CI" + ("" if per_phone else ", all phones pooled")
    title = spec.title or f"{', '.join(spec.metrics)} by {', '.join(spec.rows) or 'phone'}"
    return RenderedTable(title, _caption(data, spec, rows, what), tuple(header), tuple(body))


def _relative(data: ReportData, spec: TableSpec, rows: pd.DataFrame) -> RenderedTable:
    assert spec.relative_to is not None
    factor, reference = spec.relative_to
    column = dict(factor_columns(data))
    metric = spec.metrics[0]
    kind = "speedup" if spec.speedup else "ratio"
    label = f"{kind} vs {factor}={_level(reference)}"
    ratios = relative_to(
        rows, metric, (column[factor], reference), [column[r] for r in spec.rows] + [column[factor]],
        speedup=spec.speedup,
    )  # fmt: skip
    header = (DEVICE, *spec.rows, factor, label, "95% CI", "runs")
    body = tuple(
        (
            r.device,
            *(_level(v) for _, v in r.cell),
            _level(r.level),
            number(r.value),
            interval_of(r.ci.low, r.ci.high, min(r.n_level, r.n_reference)),
            f"{r.n_level} vs {r.n_reference}",
        )
        for r in ratios
    )
    how = f"{reference} / level" if spec.speedup else f"level / {reference}"
    what = f"{metric}: ratio of medians over runs ({how}) per phone, bootstrap 95% CI"
    title = spec.title or f"{metric} {kind} against {factor}={_level(reference)}"
    return RenderedTable(title, _caption(data, spec, rows, what), header, body)


def _crossovers(data: ReportData, spec: TableSpec, rows: pd.DataFrame) -> RenderedTable:
    assert spec.relative_to is not None and spec.crossover is not None
    factor, reference = spec.relative_to
    column = dict(factor_columns(data))
    metric = spec.metrics[0]
    found = crossovers(
        rows,
        metric,
        (column[factor], reference),
        column[spec.crossover],
        [column[r] for r in spec.rows if r != spec.crossover],
        speedup=spec.speedup,
    )
    body = []
    for c in found:
        if c.found.at is None:
            where_at, ci, verdict = "none", "–", f"stays {'above' if c.first_ratio > 1 else 'below'} 1"
        else:
            where_at = number(c.found.at)
            ci = interval_of(c.found.ci.low, c.found.ci.high, c.runs) if c.found.ci else "–"
            verdict = "falls below 1" if c.found.falling else "rises above 1"
        measured = f"{_level(c.levels[0])}..{_level(c.levels[-1])}"
        body.append(
            (c.device, *(_level(v) for _, v in c.cell), _level(c.level), where_at, ci, verdict, measured)
        )
    kind = "speedup" if spec.speedup else "ratio"
    crosses = f"{kind} crosses 1 at {spec.crossover}"
    kept = (r for r in spec.rows if r != spec.crossover)
    header = (DEVICE, *kept, factor, crosses, "95% CI", "direction", "measured")
    what = (
        f"where the {kind} of {metric} against {factor}={_level(reference)} crosses 1 along {spec.crossover} "
        "(linear between measured levels), per phone, bootstrap 95% CI"
    )
    title = spec.title or f"Where the {kind} crosses 1"
    return RenderedTable(title, _caption(data, spec, rows, what), header, tuple(body))


def _best(data: ReportData, spec: TableSpec, rows: pd.DataFrame) -> RenderedTable:
    assert spec.best_of is not None
    column = dict(factor_columns(data))
    metric = spec.metrics[0]
    found = best_of(
        rows, metric, column[spec.best_of], [column[r] for r in spec.rows] + [column[spec.best_of]]
    )
    header = (DEVICE, *spec.rows, f"best {spec.best_of}", f"{metric} median", "runner-up", "its median")
    body = tuple(
        (
            b.device,
            *(_level(v) for _, v in b.cell),
            _level(b.level),
            number(b.median),
            "–" if b.runner_up is None else _level(b.runner_up),
            number(b.runner_up_median),
        )
        for b in found
    )
    what = f"the level of {spec.best_of} with the lowest median {metric}, per phone"
    title = spec.title or f"Best {spec.best_of} per phone"
    return RenderedTable(title, _caption(data, spec, rows, what), header, body)


def render_table(data: ReportData, spec: TableSpec, frame: pd.DataFrame | None = None) -> RenderedTable:
    rows = select(tidy_frame(data) if frame is None else frame, data, spec.where)
    if spec.crossover is not None:
        return _crossovers(data, spec, rows)
    if spec.relative_to is not None:
        return _relative(data, spec, rows)
    if spec.best_of is not None:
        return _best(data, spec, rows)
    return _plain(data, spec, rows)


def render_tables(
    data: ReportData, specs: Sequence[TableSpec] | None = None, frame: pd.DataFrame | None = None
) -> list[RenderedTable]:
    frame = tidy_frame(data) if frame is None else frame
    return [render_table(data, spec, frame) for spec in (data.tables if specs is None else specs)]
