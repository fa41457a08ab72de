"""Read-side queries for the live view, `farm status`, the nightly's history and the coordinator.

Each returns typed values, so the schema stays the store's own: callers outside farm.store hold
no SQL and no state strings (issue 26).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from farm.store.db import Store
from farm.store.runs import Outcome, RunState

# A factor's level as the experiment file gave it (JSON scalars).
FactorValue = str | int | float | bool | None


@dataclass(frozen=True)
class StateCount:
    """How many runs of an experiment are in one state, and their mean duration (finished ones)."""

    runs: int
    mean_duration_s: float | None


@dataclass(frozen=True)
class RunningRun:
    """A run in flight: the phone it runs on, its factors, and the load its attempt achieved."""

    ran_on: str
    factors: Mapping[str, FactorValue]
    started_at: float | None
    load_achieved: float | None


@dataclass(frozen=True)
class DeviceSummary:
    """What the store last heard from a phone (the live view's columns)."""

    device_id: str
    serial: str
    host: str
    temperature_c: float | None
    battery_pct: float | None


@dataclass(frozen=True)
class UnmeasuredRun:
    """A DONE run whose metrics were never stored (a crash between result and metrics)."""

    run_id: str
    factors: Mapping[str, FactorValue]
    ran_on: str | None
    artifacts_dir: str | None
    capabilities_json: str | None


@dataclass(frozen=True)
class MetricSample:
    """One metric value of one DONE run, with its cell and phone ('*' for a run bound to none)."""

    cell_id: str
    factors: Mapping[str, FactorValue]
    device: str
    name: str
    value: float


def _json_object(text: str | None) -> Mapping[str, Any]:
    """A stored JSON object (factors, env); anything else, or nothing, is an empty one."""
    value = json.loads(text) if text else {}
    return value if isinstance(value, dict) else {}


def _factors(text: str | None) -> Mapping[str, FactorValue]:
    return _json_object(text)


def state_counts(store: Store, experiment: str) -> dict[RunState, StateCount]:
    rows = store.query(
        "SELECT state, COUNT(*) AS n, AVG(finished_at - started_at) AS mean_s FROM runs "
        "WHERE experiment = ? GROUP BY state",
        (experiment,),
    )
    return {RunState(r["state"]): StateCount(int(r["n"]), r["mean_s"]) for r in rows}


def running_runs(store: Store, experiment: str) -> list[RunningRun]:
    rows = store.query(
        "SELECT r.ran_on, r.factors_json, r.started_at, a.load_achieved FROM runs r "
        "LEFT JOIN attempts a ON a.run_id = r.run_id AND a.attempt = r.attempts "
        "WHERE r.experiment = ? AND r.state = ?",
        (experiment, RunState.RUNNING.value),
    )
    return [
        RunningRun(r["ran_on"], _factors(r["factors_json"]), r["started_at"], r["load_achieved"])
        for r in rows
        if r["ran_on"] is not None
    ]


def phones_of_experiment(store: Store, experiment: str) -> set[str]:
    """Every phone a run of `experiment` is bound to or ran on."""
    rows = store.query(
        "SELECT DISTINCT COALESCE(ran_on, device_id) AS device_id FROM runs WHERE experiment = ?",
        (experiment,),
    )
    return {r["device_id"] for r in rows if r["device_id"] is not None}


def devices(store: Store) -> list[DeviceSummary]:
    rows = store.query(
        "SELECT device_id, serial, host, temperature_c, battery_pct FROM devices ORDER BY device_id"
    )
    return [
        DeviceSummary(r["device_id"], r["serial"], r["host"], r["temperature_c"], r["battery_pct"])
        for r in rows
    ]


def experiment_names(store: Store) -> list[str]:
    """Names of the stored experiments, the most recently updated first."""
    return [r["name"] for r in store.query("SELECT name FROM experiments ORDER BY updated_at DESC")]


def spec_json(store: Store, experiment: str) -> str | None:
    """The stored experiment's spec (JSON text), or None."""
    rows = store.query("SELECT spec_json FROM experiments WHERE name = ?", (experiment,))
    return rows[0]["spec_json"] if rows else None


def experiments_with_runs(store: Store) -> list[str]:
    return [r["experiment"] for r in store.query("SELECT DISTINCT experiment FROM runs")]


def phones_with_work(store: Store, experiment: str) -> set[str | None]:
    """Phones PENDING or RUNNING runs are bound to (None: a run any phone may take)."""
    rows = store.query(
        "SELECT DISTINCT device_id FROM runs WHERE experiment = ? AND state IN (?, ?)",
        (experiment, RunState.PENDING.value, RunState.RUNNING.value),
    )
    return {r["device_id"] for r in rows}


def unmeasured_runs(store: Store, experiment: str) -> list[UnmeasuredRun]:
    rows = store.query(
        "SELECT r.run_id, r.factors_json, r.ran_on, r.artifacts_dir, d.capabilities_json FROM runs r "
        "LEFT JOIN devices d ON d.device_id = r.ran_on WHERE r.experiment = ? AND r.state = ? "
        "AND NOT EXISTS (SELECT 1 FROM metrics m WHERE m.run_id = r.run_id)",
        (experiment, RunState.DONE.value),
    )
    return [
        UnmeasuredRun(
            r["run_id"], _factors(r["factors_json"]), r["ran_on"], r["artifacts_dir"], r["capabilities_json"]
        )
        for r in rows
    ]


def last_done_env(store: Store, run_id: str) -> Mapping[str, object]:
    """env.json of the run's last finished attempt ({} when none was stored)."""
    rows = store.query(
        "SELECT env_json FROM attempts WHERE run_id = ? AND outcome = ? ORDER BY attempt DESC LIMIT 1",
        (run_id, Outcome.DONE.value),
    )
    return _json_object(rows[0]["env_json"]) if rows else {}


def done_metric_samples(store: Store, experiment: str, metrics: Sequence[str]) -> list[MetricSample]:
    """Values of `metrics` in the DONE runs of `experiment`."""
    if not metrics:
        return []
    marks = ",".join("?" for _ in metrics)
    rows = store.query(
        "SELECT r.cell_id, r.factors_json, COALESCE(r.device_id, '*') AS device, m.name, m.value "
        "FROM runs r JOIN metrics m ON m.run_id = r.run_id "
        f"WHERE r.experiment = ? AND r.state = ? AND m.value IS NOT NULL AND m.name IN ({marks})",
        (experiment, RunState.DONE.value, *metrics),
    )
    return [
        MetricSample(r["cell_id"], _factors(r["factors_json"]), r["device"], r["name"], float(r["value"]))
        for r in rows
    ]


@dataclass(frozen=True)
class DeviceRecord:
    """What the store knows of a phone for a report: its model, ABI and probed capabilities."""

    device_id: str
    model: str | None
    abi: str | None
    capabilities_json: str | None


@dataclass(frozen=True)
class RunMetricValue:
    """One stored metric of one run."""

    run_id: str
    name: str
    value: float
    unit: str


@dataclass(frozen=True)
class AttemptEnvironment:
    """The env.json an attempt of a run stored (JSON text), with its phone."""

    device_id: str
    env_json: str


def device_records(store: Store) -> dict[str, DeviceRecord]:
    rows = store.query("SELECT device_id, model, abi, capabilities_json FROM devices")
    return {
        r["device_id"]: DeviceRecord(r["device_id"], r["model"], r["abi"], r["capabilities_json"])
        for r in rows
    }


def experiment_metric_values(store: Store, experiment: str) -> list[RunMetricValue]:
    """Every stored (non-null) metric of the runs of `experiment`."""
    rows = store.query(
        "SELECT m.run_id, m.name, m.value, m.unit FROM metrics m JOIN runs r ON r.run_id = m.run_id "
        "WHERE r.experiment = ? AND m.value IS NOT NULL",
        (experiment,),
    )
    return [RunMetricValue(r["run_id"], r["name"], float(r["value"]), r["unit"] or "") for r in rows]


def attempt_environments(store: Store, experiment: str) -> list[AttemptEnvironment]:
    """env.json of every attempt of `experiment` that stored one, oldest first."""
    rows = store.query(
        "SELECT a.device_id, a.env_json FROM attempts a JOIN runs r ON r.run_id = a.run_id "
        "WHERE r.experiment = ? AND a.env_json IS NOT NULL ORDER BY a.started_at",
        (experiment,),
    )
    return [AttemptEnvironment(r["device_id"], r["env_json"]) for r in rows]
