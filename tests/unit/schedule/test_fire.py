"""A nightly waits out phones held by an ad-hoc sweep (NoEligiblePhone) up to its limit; a slot
is fired once even with two daemons on one store; a night that cannot start is an error of its slot."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from farm.engine.runner import RunInterrupted, RunSummary
from farm.engine.scheduler import NoEligiblePhone
from farm.schedule.fire import FireContext, fire, run_when_phones_free
from farm.schedule.model import Schedule
from farm.store import Store
from farm.store import firings as firing_store
from farm.store.firings import FiringOutcome, Trigger

SUMMARY = RunSummary("x--1", 1, 1, 0, 0, ("local/A",), 1.0)


class Runner:
    def __init__(self, busy_times: int) -> None:
        self.busy_times = busy_times
        self.calls = 0

    def __call__(self) -> RunSummary:
        self.calls += 1
        if self.calls <= self.busy_times:
            raise NoEligiblePhone("x.yaml: every eligible phone is leased by another farm process")
        return SUMMARY


def _waiter(waits: list[float], stop_on: int | None = None) -> Callable[[float], bool]:
    def wait(seconds: float) -> bool:
        waits.append(seconds)
        return stop_on is not None and len(waits) >= stop_on

    return wait


def test_retries_until_a_phone_is_free() -> None:
    waits: list[float] = []
    lines: list[str] = []
    runner = Runner(busy_times=2)
    assert run_when_phones_free(runner, _waiter(waits), lines.append, wait_limit_s=600, retry_s=60) is SUMMARY
    assert runner.calls == 3 and waits == [60, 60]
    assert "leased by another farm process" in lines[0] and "trying again in 60 s" in lines[0]


def test_gives_up_at_the_limit_with_the_runner_error() -> None:
    waits: list[float] = []
    runner = Runner(busy_times=99)
    with pytest.raises(NoEligiblePhone):
        run_when_phones_free(runner, _waiter(waits), print, wait_limit_s=150, retry_s=60)
    assert runner.calls == 3 and sum(waits) == 120


def test_a_stop_request_while_waiting_interrupts() -> None:
    waits: list[float] = []
    with pytest.raises(RunInterrupted):
        run_when_phones_free(Runner(busy_times=99), _waiter(waits, stop_on=1), print, 600, retry_s=60)


def test_a_slot_another_daemon_claimed_is_not_run_twice(tmp_path: Path) -> None:
    slot = datetime(2026, 11, 10, 2, tzinfo=UTC)
    schedule = Schedule("nightly", tmp_path / "missing.yaml", "0 2 * * *")
    with Store.in_results(tmp_path) as store:
        assert firing_store.claim(store, "nightly", slot, Trigger.CRON) is not None
        assert firing_store.claim(store, "nightly", slot, Trigger.CRON) is None
    result = fire(schedule, slot, Trigger.CRON, FireContext(tmp_path))
    assert result.outcome is FiringOutcome.SKIPPED and result.experiment is None
    with Store.in_results(tmp_path) as store:
        assert store.query("SELECT COUNT(*) AS n FROM schedule_firings")[0]["n"] == 1
    # a slot nobody took is claimed, and a missing file is recorded as an error of that slot
    other = fire(schedule, slot.replace(day=11), Trigger.CRON, FireContext(tmp_path))
    assert other.outcome is FiringOutcome.ERROR and "no such experiment file" in other.message
    assert other.exit_code == 2
