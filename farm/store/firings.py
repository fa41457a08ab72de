"""The schedule_firings table (store migration 2): what each schedule did for each slot.

The nightly scheduler (farm.schedule) decides; this module holds its table's SQL and values.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from farm.store.db import Store


class FiringOutcome(enum.StrEnum):
    """How one firing of a schedule ended (column `outcome` of schedule_firings)."""

    RUNNING = "running"
    OK = "ok"  # every run DONE
    INCOMPLETE = "incomplete"  # some runs failed or could not run
    ERROR = "error"  # the experiment could not start (bad file, no eligible phone...)
    TIMEOUT = "timeout"  # stopped at max_runtime_s (phones restored, runs left PENDING)
    INTERRUPTED = "interrupted"  # SIGTERM / Ctrl-C
    ABANDONED = "abandoned"  # the process running it died (kill -9, power loss); found on the next start
    SKIPPED = "skipped"  # missed slots under catch_up: skip


class Trigger(enum.StrEnum):
    CRON = "cron"
    CATCH_UP = "catch_up"
    MANUAL = "manual"  # `farm schedule run NAME`


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
    outcome: FiringOutcome
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
        outcome=FiringOutcome(r["outcome"]),
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
        FiringOutcome.RUNNING.value,
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
    outcome: FiringOutcome,
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


def last_slot(store: Store, schedule: str) -> datetime | None:
    """The latest slot the schedule handled (run, skipped or manual), or None."""
    rows = store.query("SELECT MAX(slot_at) AS slot FROM schedule_firings WHERE schedule = ?", (schedule,))
    value = rows[0]["slot"] if rows else None
    return datetime.fromtimestamp(value, UTC) if value is not None else None


def last_firing(store: Store, schedule: str, *, ran_only: bool = False) -> Firing | None:
    """The newest firing of `schedule` (by start time); `ran_only` leaves out skipped slots."""
    sql = "SELECT * FROM schedule_firings WHERE schedule = ?"
    if ran_only:
        sql += f" AND outcome != '{FiringOutcome.SKIPPED.value}'"
    rows = store.query(sql + " ORDER BY started_at DESC, id DESC LIMIT 1", (schedule,))
    return _row(rows[0]) if rows else None


def experiment_names(store: Store) -> set[str]:
    return {row["name"] for row in store.query("SELECT name FROM experiments")} | {
        row["experiment"]
        for row in store.query("SELECT DISTINCT experiment FROM schedule_firings")
        if row["experiment"]
    }


def running(store: Store) -> list[Firing]:
    """Firings still marked running (their owner may be alive or gone)."""
    rows = store.query("SELECT * FROM schedule_firings WHERE outcome = ?", (FiringOutcome.RUNNING.value,))
    return [_row(r) for r in rows]
