"""The schedule daemon: sleep until the next due slot, fire it, record it, repeat.

    stop = threading.Event()          # set by SIGTERM (the CLI wires it): stops between runs
    run_daemon(load_schedules, fire_slot, store_at, stop=stop, clock=SystemClock())

Every pass re-reads the schedules (an edited farm.yaml applies without a restart; a broken one
keeps the previous schedules and says why), asks farm.schedule.cron.decide for each one with the
slot it last handled (from the store, so a restarted daemon knows what it already did), records
skipped slots, fires what is due oldest slot first, and sleeps until the earliest next slot, at
most MAX_SLEEP_S at a time. The clock and the firing are passed in, so tests drive it without
waiting for real time or touching phones.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from farm.errors import FarmError
from farm.schedule import firings
from farm.schedule.cron import Decision, decide
from farm.schedule.fire import FireResult
from farm.schedule.model import Schedule
from farm.store import Store, StoreLocation
from farm.store import firings as firing_store
from farm.store.firings import FiringOutcome, Trigger

MAX_SLEEP_S = 60.0  # re-read the schedules and the clock at least this often


class Clock(Protocol):
    def now(self) -> datetime: ...

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True when woken to stop."""
        ...


class SystemClock:
    def __init__(self, stop: _StopFlag) -> None:
        self._stop = stop

    def now(self) -> datetime:
        return datetime.now(UTC)

    def wait(self, seconds: float) -> bool:
        return self._stop.wait(max(0.0, seconds))


class _StopFlag(Protocol):
    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


FireSlot = Callable[[Schedule, datetime, Trigger], FireResult]
Log = Callable[[str], None]


def due_now(
    schedules: tuple[Schedule, ...], results: Path | StoreLocation, now: datetime, since: datetime
) -> list[tuple[Schedule, Decision]]:
    """Decisions for every schedule at `now`; skipped slots are recorded in the store here."""
    decisions = []
    with Store.in_results(results) as store:
        for schedule in schedules:
            decision = decide(schedule, firing_store.last_slot(store, schedule.name), now, since)
            firings.record_skipped(store, schedule.name, decision.skipped)
            decisions.append((schedule, decision))
    return decisions


def run_daemon(
    load_schedules: Callable[[], tuple[Schedule, ...]],
    fire_slot: FireSlot,
    results: Path | StoreLocation,
    *,
    stop: _StopFlag,
    clock: Clock,
    once: bool = False,
    log: Log = lambda _line: None,
) -> list[FireResult]:
    """Loop until `stop` is set (or one pass with `once`); returns what it fired."""
    since = clock.now()
    fired: list[FireResult] = []
    schedules: tuple[Schedule, ...] = ()
    announced = ""
    while not stop.is_set():
        with Store.in_results(results) as store:  # slots a killed daemon left running
            for left in firings.recover_abandoned(store):
                log(firings.abandoned_line(left))
        try:
            schedules = load_schedules()
        except FarmError as error:
            log(f"schedules not reloaded, keeping the previous ones: {error}")
        now = clock.now()
        decisions = due_now(schedules, results, now, since)
        for schedule, decision in decisions:
            if decision.skipped:
                count, last = len(decision.skipped), decision.skipped[-1]
                log(f"{schedule.name}: {count} missed slot(s) skipped, the last {last:%Y-%m-%d %H:%M} UTC")
        due = sorted(((d.run_slot, s, d) for s, d in decisions if d.run_slot is not None), key=lambda x: x[0])
        for slot, schedule, decision in due:
            if stop.is_set():
                break
            log(f"{schedule.name}: firing slot {slot:%Y-%m-%d %H:%M} UTC ({decision.trigger})")
            started = time.monotonic()
            result = fire_slot(schedule, slot, decision.trigger or Trigger.CRON)
            fired.append(result)
            log(
                f"{schedule.name}: {result.outcome} ({result.experiment or '-'}, "
                f"{len(result.regressions)} regression(s), {time.monotonic() - started:.1f} s)"
                + (f": {result.message}" if result.message else "")
            )
            if result.outcome is FiringOutcome.INTERRUPTED:
                return fired  # SIGTERM / Ctrl-C during the run: the runner already stopped it
        if once:
            break
        upcoming = [d.next_slot for _s, d in decisions]
        wake = min(upcoming) if upcoming else clock.now() + timedelta(seconds=MAX_SLEEP_S)
        plan = ", ".join(f"{s.name} at {d.next_slot:%Y-%m-%d %H:%M} UTC" for s, d in decisions)
        if plan != announced:
            log(f"next: {plan or 'nothing scheduled'}")
            announced = plan
        sleep_s = min(MAX_SLEEP_S, (wake - clock.now()).total_seconds())
        if clock.wait(max(sleep_s, 0.0)):
            break
    return fired
