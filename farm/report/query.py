"""Assemble a ReportData from the store: the one module of the report that reads the database.

Everything it needs comes from the tables of farm.store.schema: the experiment's spec, its runs
with their metrics, the phones they ran on (identity, probe capabilities, environment snapshots),
and events that say something about data quality (charging left on).
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import ValidationError

from farm.errors import ConfigError
from farm.experiment.model import Experiment
from farm.report.environment import phone_info
from farm.report.model import FigureSpec, PhoneInfo, ReportData, TableSpec, where_of
from farm.report.notes import NoteKind, QualityNote, run_notes, unique
from farm.store import events, views
from farm.store.db import Store
from farm.store.events import EventKind
from farm.store.layers import experiment_layers
from farm.store.results import StoredResult
from farm.store.runs import list_runs

# Event kinds whose messages become data-quality notes.
QUALITY_EVENT_KINDS = (EventKind.QUALITY, EventKind.THROTTLE, EventKind.WARNING)


def _json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def figure_specs(experiment: Experiment) -> tuple[FigureSpec, ...]:
    """The figures the experiment's report section declares."""
    return tuple(
        FigureSpec(
            x=f.x,
            y=f.y,
            color=f.color,
            facet=f.facet,
            kind=f.kind,
            title=f.title,
            where=where_of(f.where),
            pool=f.pool,
            relative_to=next(iter(f.relative_to.items())) if f.relative_to else None,
            speedup=f.speedup,
            share_of=(f.share_of.part, f.share_of.whole) if f.share_of else None,
            crossover=f.crossover,
            best_of=f.best_of,
        )
        for f in experiment.report.figures
    )


def table_specs(experiment: Experiment) -> tuple[TableSpec, ...]:
    """The tables the experiment's report section declares."""
    return tuple(
        TableSpec(
            rows=t.rows,
            metrics=t.metrics,
            title=t.title,
            where=where_of(t.where),
            pool=t.pool,
            relative_to=next(iter(t.relative_to.items())) if t.relative_to else None,
            speedup=t.speedup,
            crossover=t.crossover,
            best_of=t.best_of,
        )
        for t in experiment.report.tables
    )


def stored_spec(store: Store, experiment: str) -> tuple[Experiment | None, str | None]:
    """The experiment's stored spec validated again into an Experiment, or None and why not (a
    spec written by another farm version may not validate with this one)."""
    text = views.spec_json(store, experiment)
    if text is None:
        return None, None
    try:
        return Experiment.model_validate(json.loads(text)), None
    except (ValueError, ValidationError, ConfigError) as error:
        first = " ".join(str(error).split())[:200]
        return None, (
            f"The stored experiment spec does not validate with this farm ({first}); "
            "factors are taken from the runs and no declared figure is drawn."
        )


def _phones(store: Store, device_ids: list[str], environments: dict[str, Any]) -> tuple[PhoneInfo, ...]:
    records = views.device_records(store)
    phones = []
    for device_id in device_ids:
        record = records.get(device_id)
        phones.append(
            phone_info(
                device_id,
                record.model if record is not None else None,
                record.abi if record is not None else None,
                _json(record.capabilities_json) if record is not None else None,
                environments.get(device_id),
            )
        )
    return tuple(phones)


def load_report_data(store: Store, experiment: str) -> ReportData:
    """Everything a report on `experiment` shows. ConfigError if the store has no such experiment."""
    known = sorted(views.experiment_names(store))
    runs = list_runs(store, experiment)
    if experiment not in known and not runs:
        raise ConfigError(
            f"no experiment named {experiment!r} in {store.label}",
            hint=f"known: {', '.join(known)}" if known else "run one first with `farm run FILE`",
        )
    spec, spec_problem = stored_spec(store, experiment)
    values: dict[str, dict[str, float]] = {}
    units: dict[str, dict[str, str]] = {}
    for metric in views.experiment_metric_values(store, experiment):
        values.setdefault(metric.run_id, {})[metric.name] = metric.value
        units.setdefault(metric.run_id, {})[metric.name] = metric.unit
    environments: dict[str, Any] = {}
    engine_notes: list[QualityNote] = []  # what the engine noted while running (e.g. charging left on)
    for attempt in views.attempt_environments(store, experiment):
        env = _json(attempt.env_json)
        if isinstance(env, dict):
            environments[attempt.device_id] = env  # the latest snapshot per phone wins
            engine_notes += run_notes(attempt.device_id, env)
    results = tuple(
        StoredResult(
            run_id=run.run_id,
            cell_id=run.cell_id,
            factors=run.factors,
            repetition=run.repetition,
            device_id=run.ran_on or run.device_id,
            state=run.state,
            reason=run.reason,
            metrics=values.get(run.run_id, {}),
            units=units.get(run.run_id, {}),
        )
        for run in runs
    )
    device_ids = sorted({r.device_id for r in results if r.device_id})
    quality_events = events.messages(store, experiment, QUALITY_EVENT_KINDS)
    notes = unique(
        [
            *([QualityNote(NoteKind.SPEC, spec_problem)] if spec_problem else []),
            *(
                QualityNote(NoteKind.PHONE, message, device_id or None)
                for device_id, message in quality_events
            ),
            *engine_notes,
        ]
    )
    regression_events = events.messages(store, experiment, [EventKind.REGRESSION])
    factor_names = spec.factor_names if spec is not None else ()
    if not factor_names:
        factor_names = tuple(sorted({name for r in results for name in r.factors}))
    return ReportData(
        experiment=experiment,
        benchmark=spec.benchmark.program.value if spec is not None else None,
        spec=spec,
        factor_names=factor_names,
        phones=_phones(store, device_ids, environments),
        runs=results,
        figures=figure_specs(spec) if spec is not None else (),
        tables=table_specs(spec) if spec is not None else (),
        notes=notes,
        regressions=tuple(dict.fromkeys(message for _, message in regression_events)),
        generated_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        description=spec.description if spec is not None else "",
        layers=experiment_layers(store, experiment),
    )
