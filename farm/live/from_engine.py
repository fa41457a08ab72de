"""The engine's state as the live view's Snapshot (farm.live.snapshot), and plain progress lines.

The running `farm run` builds one from its Sweep every tick (no phone is asked: the workers keep
their PhoneStatus current); `farm status --watch` reads the store instead (farm.live.from_store).
"""

from __future__ import annotations

import time

from farm.analysis.latest import Readings
from farm.engine.scheduler import Sweep
from farm.live.snapshot import Event, PhoneRow, Progress, Snapshot, event_level
from farm.safe_text import terminal
from farm.store import RunState, Store
from farm.store import events as store_events
from farm.store import runs as run_store


def progress_of(store: Store, experiment: str, *, rate_s_per_run: float | None = None) -> Progress:
    counts = run_store.count_states(store, experiment)
    total = sum(counts.values())
    done, failed = counts[RunState.DONE], counts[RunState.FAILED] + counts[RunState.SKIPPED]
    left = total - done - failed
    eta = rate_s_per_run * left if rate_s_per_run is not None else None
    return Progress(done=done, failed=failed, total=total, eta_s=eta)


def snapshot_of(sweep: Sweep, *, started_at: float, events: int = 8) -> Snapshot:
    now = time.time()
    progress = progress_of(sweep.store, sweep.key)
    if progress.finished:
        # Runs finish in parallel on all phones, so the observed rate already includes it.
        per_run_s = (now - started_at) / progress.finished
        left = progress.total - progress.finished
        progress = Progress(progress.done, progress.failed, progress.total, per_run_s * left)
    rows = []
    for phone in sweep.phones:
        status = sweep.status[phone.device_id]
        live = status.live or Readings()  # the running sampler's newest values win
        elapsed = now - status.run_started if status.run_started else None
        budget = sweep.gates.run_timeout_s
        rows.append(
            PhoneRow(
                phone=phone.serial,
                host=phone.host,
                state=status.state,
                cell=status.cell,
                run_progress=min(1.0, elapsed / budget) if elapsed is not None and budget > 0 else None,
                temperature_c=_first(live.temperature_c, status.temperature_c),
                battery_pct=status.battery_pct if status.battery_pct is not None else phone.battery_pct,
                gpu_load_achieved=_first(live.gpu_busy, status.gpu_load_achieved),
                power_mw=live.power_mw,
            )
        )
    recent = tuple(
        Event(e.ts, e.message, event_level(e.kind), e.device_id)
        for e in store_events.recent(sweep.store, sweep.key, events)
    )
    return Snapshot(sweep.key, tuple(rows), progress, recent, now)


def _first(*values: float | None) -> float | None:
    return next((value for value in values if value is not None), None)


def progress_line(count: int, device_id: str, run_id: str, cell: str, outcome: str) -> str:
    """One plain line per finished attempt (not a TTY, or --no-live); phone and file strings escaped."""
    return terminal(f"[{count}] {device_id} {run_id} {cell}: {outcome}")
