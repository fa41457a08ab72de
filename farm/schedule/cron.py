"""Cron arithmetic and the catch-up decision: pure functions of a schedule, its last slot and a
clock value passed in (nothing here reads the time), so tests can inject any moment.

A *slot* is a time the cron expression names. The daemon records every slot it handled (run or
skipped) in the store; on waking it asks `decide(schedule, last_slot, now)`:

- slots in (last_slot, now] that are at most MISFIRE_GRACE_S old are on time: run the latest one;
- older ones were missed (the daemon was down, or busy with a long nightly): with catch_up `skip`
  they are recorded as skipped; with `run_once` the latest missed slot is run once, never each
  of them (a week of downtime gives one catch-up run, not seven back to back).

A schedule never handled before has last_slot None: its reference is `since` (when the daemon
started) less MISFIRE_GRACE_S, so adding a schedule does not fire for slots long before it existed,
while `farm schedule daemon --once` started by a system timer just after a slot still runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from farm.schedule.model import CatchUp, Schedule
from farm.store.firings import Trigger

# A slot the daemon gets to within this long is on time (it was sleeping or finishing a short
# run); later than this it counts as missed and the catch-up policy decides.
MISFIRE_GRACE_S = 600.0
# Bound on missed slots counted (a per-minute cron after a month down): the count is for messages.
MAX_COUNTED_SLOTS = 10_000


def is_valid(expression: str) -> bool:
    return bool(croniter.is_valid(expression)) and len(expression.split()) == 5


def _zone(schedule: Schedule) -> ZoneInfo:
    return ZoneInfo(schedule.timezone)


def next_slot(schedule: Schedule, after: datetime) -> datetime:
    """The first slot strictly after `after` (aware datetime), in UTC."""
    local = after.astimezone(_zone(schedule))
    return croniter(schedule.cron, local).get_next(datetime).astimezone(UTC)


def slots_between(schedule: Schedule, after: datetime, until: datetime) -> list[datetime]:
    """Slots in (after, until], oldest first, at most MAX_COUNTED_SLOTS of the latest ones."""
    slots: list[datetime] = []
    it = croniter(schedule.cron, until.astimezone(_zone(schedule)) + timedelta(microseconds=1))
    while len(slots) < MAX_COUNTED_SLOTS:
        slot = it.get_prev(datetime).astimezone(UTC)
        if slot <= after:
            break
        slots.append(slot)
    return slots[::-1]


@dataclass(frozen=True)
class Decision:
    """What to do for one schedule at `now`."""

    run_slot: datetime | None  # the slot to run now, or None
    trigger: Trigger | None  # CRON (on time) or CATCH_UP
    skipped: tuple[datetime, ...]  # missed slots not run (catch_up: skip, or older than run_slot)
    next_slot: datetime  # the next slot after now (when to wake up for this schedule)


def decide(schedule: Schedule, last_slot: datetime | None, now: datetime, since: datetime) -> Decision:
    reference = last_slot if last_slot is not None else since - timedelta(seconds=MISFIRE_GRACE_S)
    upcoming = next_slot(schedule, now)
    due = slots_between(schedule, reference, now)
    if last_slot is None:
        due = due[-1:]  # a schedule new to the store missed nothing: at most the slot just passed
    if not due:
        return Decision(None, None, (), upcoming)
    latest = due[-1]
    if (now - latest).total_seconds() <= MISFIRE_GRACE_S:
        return Decision(latest, Trigger.CRON, tuple(due[:-1]), upcoming)
    if schedule.catch_up is CatchUp.RUN_ONCE:
        return Decision(latest, Trigger.CATCH_UP, tuple(due[:-1]), upcoming)
    return Decision(None, None, tuple(due), upcoming)
