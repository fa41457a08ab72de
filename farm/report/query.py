"""Assemble a ReportData from the store: the one module of the report that reads the database.

Everything it needs comes from the tables of farm.store.schema: the experiment's spec, its runs
with their metrics, the phones they ran on (identity, probe capabilities, environment snapshots),
and events that say something about data quality (charging left on).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from farm.errors import ConfigError
from farm.report.model import FigureSpec, PhoneInfo, ReportData, RunResult
from farm.store.db import Store
from farm.store.runs import list_runs

# Identity properties worth showing per phone, when the probe or the environment snapshot has them.
SHOWN_PROPS: tuple[str, ...] = (
    "ro.product.manufacturer",
    "ro.product.model",
    "ro.board.platform",
    "ro.soc.model",
    "ro.build.version.release",
    "ro.build.version.sdk",
    "ro.build.fingerprint",
    "ro.farm.profile",
)
VIRTUAL_PROP = "ro.farm.virtual"
# Event kinds whose messages become data-quality notes.
QUALITY_EVENT_KINDS: tuple[str, ...] = ("charging", "quality", "throttle", "warning")


def _json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _props(doc: Any) -> dict[str, str]:
    """Props from a probe document or an environment snapshot: a dict or a list of pairs."""
    if not isinstance(doc, Mapping):
        return {}
    props = doc.get("props", {})
    if isinstance(props, Mapping):
        return {str(k): str(v) for k, v in props.items()}
    if isinstance(props, list):
        return {str(p[0]): str(p[1]) for p in props if isinstance(p, list | tuple) and len(p) == 2}
    return {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def figure_specs(spec: Mapping[str, Any]) -> tuple[FigureSpec, ...]:
    report = spec.get("report") or {}
    figures = report.get("figures") or () if isinstance(report, Mapping) else ()
    result = []
    for figure in figures:
        if isinstance(figure, Mapping) and figure.get("x"):
            result.append(
                FigureSpec(
                    x=str(figure["x"]),
                    y=str(figure.get("y") or "latency_median_ms"),
                    color=figure.get("color"),
                    facet=figure.get("facet"),
                    kind=str(figure.get("kind") or "line"),
                    title=figure.get("title"),
                )
            )
    return tuple(result)


def _phones(store: Store, device_ids: list[str], environments: dict[str, Any]) -> tuple[PhoneInfo, ...]:
    rows = {row["device_id"]: row for row in store.query("SELECT * FROM devices")}
    phones = []
    for device_id in device_ids:
        row = rows.get(device_id)
        capabilities = _json(row["capabilities_json"]) if row is not None else None
        props = {**_props(capabilities), **_props(environments.get(device_id))}
        env = environments.get(device_id)
        shown = [(key, props[key]) for key in SHOWN_PROPS if key in props]
        if isinstance(env, Mapping):
            shown += [
                (str(k), json.dumps(v) if not isinstance(v, str) else v)
                for k, v in env.items()
                if k != "props"
            ]
        virtual = props.get(VIRTUAL_PROP) == "1" or bool(
            isinstance(capabilities, Mapping) and capabilities.get("virtual")
        )
        phones.append(
            PhoneInfo(
                device_id=device_id,
                model=(row["model"] if row is not None else None) or props.get("ro.product.model"),
                virtual=virtual,
                abi=(row["abi"] if row is not None else None) or props.get("ro.product.cpu.abi"),
                properties=tuple(shown),
            )
        )
    return tuple(phones)


def load_report_data(store: Store, experiment: str) -> ReportData:
    """Everything a report on `experiment` shows. ConfigError if the store has no such experiment."""
    spec_rows = store.query("SELECT spec_json FROM experiments WHERE name = ?", (experiment,))
    runs = list_runs(store, experiment)
    if not spec_rows and not runs:
        known = [row["name"] for row in store.query("SELECT name FROM experiments ORDER BY name")]
        raise ConfigError(
            f"no experiment named {experiment!r} in {store.path}",
            hint=f"known: {', '.join(known)}" if known else "run one first with `farm run FILE`",
        )
    spec = _json(spec_rows[0]["spec_json"]) if spec_rows else None
    spec = spec if isinstance(spec, Mapping) else {}
    metric_rows = store.query(
        "SELECT m.run_id, m.name, m.value, m.unit FROM metrics m JOIN runs r ON r.run_id = m.run_id "
        "WHERE r.experiment = ? AND m.value IS NOT NULL",
        (experiment,),
    )
    values: dict[str, dict[str, float]] = {}
    units: dict[str, dict[str, str]] = {}
    for row in metric_rows:
        values.setdefault(row["run_id"], {})[row["name"]] = float(row["value"])
        units.setdefault(row["run_id"], {})[row["name"]] = row["unit"] or ""
    environments: dict[str, Any] = {}
    for row in store.query(
        "SELECT a.device_id, a.env_json FROM attempts a JOIN runs r ON r.run_id = a.run_id "
        "WHERE r.experiment = ? AND a.env_json IS NOT NULL ORDER BY a.started_at",
        (experiment,),
    ):
        env = _json(row["env_json"])
        if env is not None:
            environments[row["device_id"]] = env  # the latest snapshot per phone wins
    results = tuple(
        RunResult(
            run_id=run.run_id,
            cell_id=run.cell_id,
            factors=run.factors,
            repetition=run.repetition,
            device_id=run.ran_on or run.device_id,
            state=str(run.state),
            reason=run.reason,
            metrics=values.get(run.run_id, {}),
            units=units.get(run.run_id, {}),
        )
        for run in runs
    )
    device_ids = sorted({r.device_id for r in results if r.device_id})
    kinds = ", ".join("?" for _ in QUALITY_EVENT_KINDS)
    event_rows = store.query(
        f"SELECT device_id, message FROM events WHERE experiment = ? AND kind IN ({kinds}) ORDER BY ts",
        (experiment, *QUALITY_EVENT_KINDS),
    )
    notes = tuple(
        dict.fromkeys(f"{r['device_id'] + ': ' if r['device_id'] else ''}{r['message']}" for r in event_rows)
    )
    benchmark = spec.get("benchmark")
    sweep = spec.get("sweep")
    factor_names = tuple(sweep) if isinstance(sweep, Mapping) else ()
    if not factor_names:
        factor_names = tuple(sorted({name for r in results for name in r.factors}))
    return ReportData(
        experiment=experiment,
        benchmark=str(benchmark.get("program")) if isinstance(benchmark, Mapping) else None,
        spec=spec,
        factor_names=factor_names,
        phones=_phones(store, device_ids, environments),
        runs=results,
        figures=figure_specs(spec),
        notes=notes,
        generated_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        description=str(spec.get("description") or ""),
    )
