"""A Snapshot read from the results store, for `farm status --watch` in another terminal.

The running `farm run` process keeps the store current (runs, devices' battery/temperature,
attempts' achieved load, events); this reads it without touching any phone.
"""

from __future__ import annotations

import json
import time

from farm.engine.model import Phase
from farm.live.snapshot import Event, PhoneRow, Progress, Snapshot, event_level
from farm.store import events as store_events
from farm.store.db import Store
from farm.store.runs import RunState


def _cell(factors_json: str | None) -> str | None:
    if not factors_json:
        return None
    factors = json.loads(factors_json)
    return " ".join(f"{k}={v}" for k, v in sorted(factors.items())) if isinstance(factors, dict) else None


def progress_from_store(store: Store, experiment: str, *, now: float) -> Progress:
    """Runs done / failed of all; ETA from the mean duration of finished runs and the phones busy."""
    rows = store.query(
        "SELECT state, COUNT(*) AS n, AVG(finished_at - started_at) AS mean_s FROM runs "
        "WHERE experiment = ? GROUP BY state",
        (experiment,),
    )
    counts = {RunState(row["state"]): int(row["n"]) for row in rows}
    total = sum(counts.values())
    done = counts.get(RunState.DONE, 0)
    failed = counts.get(RunState.FAILED, 0) + counts.get(RunState.SKIPPED, 0)
    mean_s = next((row["mean_s"] for row in rows if row["state"] == RunState.DONE and row["mean_s"]), None)
    running = max(counts.get(RunState.RUNNING, 0), 1)
    left = total - done - failed
    eta_s = mean_s * left / running if mean_s is not None and left > 0 else (0.0 if left == 0 else None)
    return Progress(done, failed, total, eta_s)


def snapshot_from_store(store: Store, experiment: str, *, events: int = 8) -> Snapshot:
    now = time.time()
    running = {
        row["ran_on"]: row
        for row in store.query(
            "SELECT r.ran_on, r.factors_json, r.started_at, a.load_achieved FROM runs r "
            "LEFT JOIN attempts a ON a.run_id = r.run_id AND a.attempt = r.attempts "
            "WHERE r.experiment = ? AND r.state = 'RUNNING'",
            (experiment,),
        )
    }
    used = {
        row["device_id"]
        for row in store.query(
            "SELECT DISTINCT COALESCE(ran_on, device_id) AS device_id FROM runs WHERE experiment = ?",
            (experiment,),
        )
    }
    phones = []
    for device in store.query("SELECT * FROM devices ORDER BY device_id"):
        if device["device_id"] not in used and device["device_id"] not in running:
            continue
        run = running.get(device["device_id"])
        phones.append(
            PhoneRow(
                phone=device["serial"],
                host=device["host"],
                state=Phase.RUNNING if run is not None else Phase.IDLE,
                cell=_cell(run["factors_json"]) if run is not None else None,
                temperature_c=device["temperature_c"],
                battery_pct=device["battery_pct"],
                gpu_load_achieved=run["load_achieved"] if run is not None else None,
            )
        )
    recent = tuple(
        Event(e.ts, e.message, event_level(e.kind), e.device_id)
        for e in store_events.recent(store, experiment, events)
    )
    return Snapshot(experiment, tuple(phones), progress_from_store(store, experiment, now=now), recent, now)
