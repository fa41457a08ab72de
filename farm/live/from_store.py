"""A Snapshot read from the results store, for `farm status --watch` in another terminal.

The running `farm run` process keeps the store current (runs, devices' battery/temperature,
attempts' achieved load, events); this reads it without touching any phone.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from farm.engine.model import Phase
from farm.live.snapshot import Event, PhoneRow, Progress, Snapshot, event_level
from farm.store import events as store_events
from farm.store import views
from farm.store.db import Store
from farm.store.runs import RunState


def _cell(factors: Mapping[str, object]) -> str | None:
    return " ".join(f"{k}={v}" for k, v in sorted(factors.items())) or None


def progress_from_store(store: Store, experiment: str, *, now: float) -> Progress:
    """Runs done / failed of all; ETA from the mean duration of finished runs and the phones busy."""
    counts = views.state_counts(store, experiment)

    def runs(state: RunState) -> int:
        return counts[state].runs if state in counts else 0

    total = sum(count.runs for count in counts.values())
    done = runs(RunState.DONE)
    failed = runs(RunState.FAILED) + runs(RunState.SKIPPED)
    mean_s = counts[RunState.DONE].mean_duration_s if RunState.DONE in counts else None
    running = max(runs(RunState.RUNNING), 1)
    left = total - done - failed
    eta_s = mean_s * left / running if mean_s and left > 0 else (0.0 if left == 0 else None)
    return Progress(done, failed, total, eta_s)


def snapshot_from_store(store: Store, experiment: str, *, events: int = 8) -> Snapshot:
    now = time.time()
    running = {run.ran_on: run for run in views.running_runs(store, experiment)}
    used = views.phones_of_experiment(store, experiment)
    phones = []
    for device in views.devices(store):
        if device.device_id not in used and device.device_id not in running:
            continue
        run = running.get(device.device_id)
        phones.append(
            PhoneRow(
                phone=device.serial,
                host=device.host,
                state=Phase.RUNNING if run is not None else Phase.IDLE,
                cell=_cell(run.factors) if run is not None else None,
                temperature_c=device.temperature_c,
                battery_pct=device.battery_pct,
                gpu_load_achieved=run.load_achieved if run is not None else None,
            )
        )
    recent = tuple(
        Event(e.ts, e.message, event_level(e.kind), e.device_id)
        for e in store_events.recent(store, experiment, events)
    )
    return Snapshot(experiment, tuple(phones), progress_from_store(store, experiment, now=now), recent, now)
