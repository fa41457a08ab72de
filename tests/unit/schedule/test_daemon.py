"""The daemon loop with an injected clock and a stand-in for the nightly run (no phones), on a real
SQLite store: it fires each slot once, remembers across restarts, catches up, stops when told."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from farm.errors import ConfigError
from farm.schedule.daemon import MAX_SLEEP_S, run_daemon
from farm.schedule.fire import Deadline, FireResult
from farm.schedule.model import CatchUp, Schedule
from farm.store import Store
from farm.store import firings as firing_store
from farm.store.firings import FiringOutcome, Trigger


class FakeClock:
    """Time moves only when the daemon waits; records how long it asked to wait."""

    def __init__(self, start: datetime) -> None:
        self.current = start
        self.waits: list[float] = []

    def now(self) -> datetime:
        return self.current

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.current += timedelta(seconds=seconds)
        return False


class Stop:
    def __init__(self) -> None:
        self.flag = False

    def is_set(self) -> bool:
        return self.flag

    def wait(self, timeout: float | None = None) -> bool:
        return self.flag


def _utc(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


NIGHTLY = Schedule("nightly", Path("x.yaml"), "0 2 * * *")


class FakeFire:
    """Records the firing in the store as fire() does, with a chosen outcome."""

    def __init__(
        self,
        results: Path,
        stop: Stop,
        clock: FakeClock,
        stop_after: int,
        outcome: FiringOutcome = FiringOutcome.OK,
    ):
        self.results, self.stop, self.clock, self.stop_after, self.outcome = (
            results,
            stop,
            clock,
            stop_after,
            outcome,
        )
        self.calls: list[tuple[str, datetime, Trigger, datetime]] = []

    def __call__(self, schedule: Schedule, slot: datetime, trigger: Trigger) -> FireResult:
        self.calls.append((schedule.name, slot, trigger, self.clock.now()))
        with Store.in_results(self.results) as store:
            firing = firing_store.start(store, schedule.name, slot, trigger, "x--1", "x")
            firing_store.finish(store, firing, self.outcome)
        self.clock.current += timedelta(minutes=30)  # the nightly takes a while
        if len(self.calls) >= self.stop_after:
            self.stop.flag = True
        return FireResult(schedule.name, slot, self.outcome, "x--1")


def test_sleeps_until_each_slot_and_fires_it_once(tmp_path: Path) -> None:
    clock, stop = FakeClock(_utc(10, 1, 0)), Stop()
    fire = FakeFire(tmp_path, stop, clock, stop_after=2)
    fired = run_daemon(lambda: (NIGHTLY,), fire, tmp_path, stop=stop, clock=clock)
    assert [(slot, trigger) for _n, slot, trigger, _at in fire.calls] == [
        (_utc(10, 2), Trigger.CRON),
        (_utc(11, 2), Trigger.CRON),
    ]
    assert all(at - slot < timedelta(seconds=1) for _n, slot, _t, at in fire.calls)  # on time, not late
    assert all(0 < w <= MAX_SLEEP_S for w in clock.waits)
    assert [r.outcome for r in fired] == [FiringOutcome.OK, FiringOutcome.OK]


def test_a_restarted_daemon_catches_up_once_with_run_once_and_records_the_rest(tmp_path: Path) -> None:
    with Store.in_results(tmp_path) as store:
        firing_store.finish(
            store,
            firing_store.start(store, "nightly", _utc(5, 2), Trigger.CRON, "x--0", "x"),
            FiringOutcome.OK,
        )
    schedule = Schedule("nightly", Path("x.yaml"), "0 2 * * *", catch_up=CatchUp.RUN_ONCE)
    clock, stop = FakeClock(_utc(10, 12)), Stop()
    fire = FakeFire(tmp_path, stop, clock, stop_after=99)
    run_daemon(lambda: (schedule,), fire, tmp_path, stop=stop, clock=clock, once=True)
    assert [(slot, trigger) for _n, slot, trigger, _at in fire.calls] == [(_utc(10, 2), Trigger.CATCH_UP)]
    with Store.in_results(tmp_path) as store:
        skipped = store.query("SELECT message FROM schedule_firings WHERE outcome = 'skipped'")
        assert [row["message"] for row in skipped] == [
            "4 missed slot(s) skipped (2026-11-06 02:00 .. 2026-11-09 02:00 UTC)"
        ]
        assert firing_store.last_slot(store, "nightly") == _utc(10, 2)
    # the same pass again finds nothing to do: the store remembers
    again = FakeFire(tmp_path, stop, clock, stop_after=99)
    run_daemon(lambda: (schedule,), again, tmp_path, stop=Stop(), clock=FakeClock(_utc(10, 12, 5)), once=True)
    assert again.calls == []


def test_skip_policy_after_downtime_runs_nothing_until_the_next_slot(tmp_path: Path) -> None:
    with Store.in_results(tmp_path) as store:
        firing_store.finish(
            store,
            firing_store.start(store, "nightly", _utc(5, 2), Trigger.CRON, "x--0", "x"),
            FiringOutcome.OK,
        )
    clock, stop = FakeClock(_utc(10, 12)), Stop()
    fire = FakeFire(tmp_path, stop, clock, stop_after=1)
    run_daemon(lambda: (NIGHTLY,), fire, tmp_path, stop=stop, clock=clock)
    assert [(slot, trigger) for _n, slot, trigger, _at in fire.calls] == [(_utc(11, 2), Trigger.CRON)]


def test_an_interrupted_nightly_stops_the_daemon(tmp_path: Path) -> None:
    clock, stop = FakeClock(_utc(10, 1, 59)), Stop()
    fire = FakeFire(tmp_path, stop, clock, stop_after=99, outcome=FiringOutcome.INTERRUPTED)
    fired = run_daemon(lambda: (NIGHTLY,), fire, tmp_path, stop=stop, clock=clock)
    assert [r.outcome for r in fired] == [FiringOutcome.INTERRUPTED]


def test_a_broken_config_on_reload_keeps_the_previous_schedules(tmp_path: Path) -> None:
    clock, stop = FakeClock(_utc(10, 1, 58)), Stop()
    fire = FakeFire(tmp_path, stop, clock, stop_after=1)
    loads = {"n": 0}
    lines: list[str] = []

    def load() -> tuple[Schedule, ...]:
        loads["n"] += 1
        if loads["n"] > 1:
            raise ConfigError("schedules[0]: cron is missing", location="farm.yaml:2")
        return (NIGHTLY,)

    run_daemon(load, fire, tmp_path, stop=stop, clock=clock, log=lines.append)
    assert [slot for _n, slot, _t, _at in fire.calls] == [_utc(10, 2)]
    assert any(
        "keeping the previous ones: farm.yaml:2: schedules[0]: cron is missing" in line for line in lines
    )


def test_the_deadline_or_a_stop_request_cancels_the_nightly_and_an_ended_one_never_does() -> None:
    stop, cancel = threading.Event(), threading.Event()
    with Deadline(0.05, stop, cancel) as deadline:
        assert cancel.wait(60)  # the event itself, not a sleep
    assert deadline.fired and not stop.is_set()  # the daemon goes on after a timed-out nightly
    stop, cancel = threading.Event(), threading.Event()
    with Deadline(None, stop, cancel) as asked:
        stop.set()
        assert cancel.wait(60)
    assert not asked.fired
    cancel = threading.Event()
    with Deadline(0.0, threading.Event(), cancel) as quiet:
        pass  # ended before its watcher looked: leaving the block joins the watcher
    assert not quiet.fired and not cancel.is_set()
