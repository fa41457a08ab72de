"""The schedule_firings table (store migration 2): what each schedule did for each slot."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from farm.schedule.model import Outcome, Trigger
from farm.store import Store


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
    row = (
        schedule,
        slot.timestamp(),
        trigger.value,
        experiment,
        base_experiment,
        time.time(),
        Outcome.RUNNING.value,
    )
    with store.transaction() as conn:
        return int(conn.execute(_INSERT, row).fetchone()[0])


def claim(store: Store, schedule: str, slot: datetime, trigger: Trigger) -> int | None:
    """A new firing row for `slot`, or None when the slot has one already (another daemon on the
    same store got there first: the check and the insert are one write transaction)."""
    row = (schedule, slot.timestamp(), trigger.value, None, None, time.time(), Outcome.RUNNING.value)
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


def attach_experiment(store: Store, firing_id: int, experiment: str, base_experiment: str) -> None:
    store.execute(
        "UPDATE schedule_firings SET experiment = ?, base_experiment = ? WHERE id = ?",
        (experiment, base_experiment, firing_id),
    )
