"""The schedule_firings table (store migration 2): what each schedule did for each slot.

A slot being run is owned by an execution (farm.store.ownership: pid, host, heartbeat) whose
experiment is the nightly's name, held for the whole firing (`owned`), so a farm process killed
with -9 leaves a slot that the next start recognises as abandoned (`recover_abandoned`) instead of
one that stays "running" forever.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import farm
from farm.engine.recovery import recover_store
from farm.schedule.model import Outcome, Trigger
from farm.store import RunState, Store, ownership
from farm.store import runs as run_store


@dataclass(frozen=True)
class Firing:
    id: int
    schedule: str
    slot_at: datetime
    trigger: Trigger
    experiment: str | None
    base_experiment: str | None
    started_at: float
    finished_at: float | None
    outcome: Outcome
    done: int | None
    failed: int | None
    pending: int | None
    regressions: int | None
    message: str | None


def _row(r: Any) -> Firing:
    return Firing(
        id=r["id"],
        schedule=r["schedule"],
        slot_at=datetime.fromtimestamp(r["slot_at"], UTC),
        trigger=Trigger(r["trigger"]),
        experiment=r["experiment"],
        base_experiment=r["base_experiment"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
        outcome=Outcome(r["outcome"]),
        done=r["done"],
        failed=r["failed"],
        pending=r["pending"],
        regressions=r["regressions"],
        message=r["message"],
    )


_INSERT = (
    "INSERT INTO schedule_firings (schedule, slot_at, trigger, experiment, base_experiment, started_at, "
    "outcome) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id"
)


def start(
    store: Store,
    schedule: str,
    slot: datetime,
    trigger: Trigger,
    experiment: str | None,
    base_experiment: str | None,
) -> int:
    """A new firing row (RUNNING), whether or not the slot has one already."""
    row = _running_row(schedule, slot, trigger, experiment, base_experiment)
    with store.transaction() as conn:
        return int(conn.execute(_INSERT, row).fetchone()[0])


def _running_row(
    schedule: str, slot: datetime, trigger: Trigger, experiment: str | None, base_experiment: str | None
) -> tuple[object, ...]:
    """The values of _INSERT for a firing that starts now."""
    return (
        schedule,
        slot.timestamp(),
        trigger.value,
        experiment,
        base_experiment,
        time.time(),
        Outcome.RUNNING.value,
    )


def claim(
    store: Store,
    schedule: str,
    slot: datetime,
    trigger: Trigger,
    experiment: str | None = None,
    base_experiment: str | None = None,
) -> int | None:
    """A new firing row for `slot`, or None when the slot has one already (another daemon on the
    same store got there first: the check and the insert are one write transaction)."""
    row = _running_row(schedule, slot, trigger, experiment, base_experiment)
    with store.transaction() as conn:
        taken = conn.execute(
            "SELECT 1 FROM schedule_firings WHERE schedule = ? AND slot_at = ?", (schedule, slot.timestamp())
        ).fetchone()
        if taken is not None:
            return None
        return int(conn.execute(_INSERT, row).fetchone()[0])


def finish(
    store: Store,
    firing_id: int,
    outcome: Outcome,
    *,
    done: int | None = None,
    failed: int | None = None,
    pending: int | None = None,
    regressions: int | None = None,
    message: str | None = None,
) -> None:
    store.execute(
        "UPDATE schedule_firings SET finished_at = ?, outcome = ?, done = ?, failed = ?, pending = ?, "
        "regressions = ?, message = ? WHERE id = ?",
        (time.time(), outcome.value, done, failed, pending, regressions, message, firing_id),
    )


def record_skipped(store: Store, schedule: str, slots: tuple[datetime, ...]) -> None:
    """One row for a run of missed slots (at the latest of them), however many there were."""
    if not slots:
        return
    first, last = slots[0], slots[-1]
    message = f"{len(slots)} missed slot(s) skipped ({first:%Y-%m-%d %H:%M} .. {last:%Y-%m-%d %H:%M} UTC)"
    firing_id = start(store, schedule, last, Trigger.CATCH_UP, None, None)
    finish(store, firing_id, Outcome.SKIPPED, message=message)


def last_slot(store: Store, schedule: str) -> datetime | None:
    """The latest slot the schedule handled (run, skipped or manual), or None."""
    rows = store.query("SELECT MAX(slot_at) AS slot FROM schedule_firings WHERE schedule = ?", (schedule,))
    value = rows[0]["slot"] if rows else None
    return datetime.fromtimestamp(value, UTC) if value is not None else None


def last_firing(store: Store, schedule: str, *, ran_only: bool = False) -> Firing | None:
    """The newest firing of `schedule` (by start time); `ran_only` leaves out skipped slots."""
    sql = "SELECT * FROM schedule_firings WHERE schedule = ?"
    if ran_only:
        sql += f" AND outcome != '{Outcome.SKIPPED.value}'"
    rows = store.query(sql + " ORDER BY started_at DESC, id DESC LIMIT 1", (schedule,))
    return _row(rows[0]) if rows else None


def experiment_names(store: Store) -> set[str]:
    return {row["name"] for row in store.query("SELECT name FROM experiments")} | {
        row["experiment"]
        for row in store.query("SELECT DISTINCT experiment FROM schedule_firings")
        if row["experiment"]
    }


def run_counts(store: Store, experiment: str) -> dict[str, int]:
    """done / failed / pending runs of a nightly, as its firing records them."""
    states = run_store.count_states(store, experiment)
    done = states[RunState.DONE]
    failed = states[RunState.FAILED] + states[RunState.SKIPPED]
    return {"done": done, "failed": failed, "pending": sum(states.values()) - done - failed}


@contextmanager
def owned(store: Store, experiment: str) -> Iterator[int]:
    """An execution that owns the firing of `experiment` while the block runs, heartbeating."""
    execution_id = ownership.start_execution(store, experiment, sys.argv, farm.__version__)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(ownership.HEARTBEAT_INTERVAL_S):
            try:
                ownership.heartbeat(store, execution_id)
            except Exception:  # a busy database must not end the heartbeat
                continue

    thread = threading.Thread(target=beat, name="firing-heartbeat", daemon=True)
    thread.start()
    try:
        yield execution_id
    finally:
        stop.set()
        thread.join()
        ownership.finish_execution(store, execution_id, "finished")


def _live_experiments(store: Store) -> set[str]:
    rows = store.query(
        "SELECT id, pid, hostname, heartbeat_at, status, experiment FROM executions WHERE status = 'running'"
    )
    return {
        row["experiment"]
        for row in rows
        if row["experiment"]
        and ownership.is_alive(
            ownership.Execution(row["id"], row["pid"], row["hostname"], row["heartbeat_at"], row["status"])
        )
    }


def recover_abandoned(store: Store) -> list[Firing]:
    """Slots left "running" by a farm process that is gone: recorded as abandoned, with the run
    counts of their nightly (whose RUNNING runs go back to PENDING). Returns them as they were."""
    live = _live_experiments(store)
    stale_before = time.time() - ownership.HEARTBEAT_STALE_S
    rows = store.query("SELECT * FROM schedule_firings WHERE outcome = ?", (Outcome.RUNNING.value,))
    abandoned = []
    for firing in map(_row, rows):
        if firing.experiment in live or (firing.experiment is None and firing.started_at > stale_before):
            continue  # its owner is alive (or it was claimed a moment ago)
        counts: dict[str, int] = {}
        if firing.experiment is not None:
            recover_store(store, firing.experiment)
            counts = run_counts(store, firing.experiment)
        finish(
            store,
            firing.id,
            Outcome.ABANDONED,
            message="the farm process running this slot died (killed?); its unfinished runs are PENDING "
            "and finish when its spec runs again",
            **counts,
        )
        abandoned.append(firing)
    return abandoned


def abandoned_line(firing: Firing) -> str:
    where = f" ({firing.experiment})" if firing.experiment else ""
    return (
        f"{firing.schedule}: slot {firing.slot_at:%Y-%m-%d %H:%M} UTC{where} was left running by a farm "
        "process that is gone: recorded as abandoned"
    )
