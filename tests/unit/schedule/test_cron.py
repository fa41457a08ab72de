"""Cron next-fire and the catch-up decision, with the clock injected (no sleeping, no store)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from farm.schedule.cron import MISFIRE_GRACE_S, decide, is_valid, next_slot, slots_between
from farm.schedule.model import CatchUp, Schedule
from farm.store.firings import Trigger


def _utc(day: int, hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, minute, second, tzinfo=UTC)


def _nightly(catch_up: CatchUp = CatchUp.SKIP, cron: str = "0 2 * * *", timezone: str = "UTC") -> Schedule:
    return Schedule("nightly", Path("x.yaml"), cron, catch_up=catch_up, timezone=timezone)


def test_next_slot_is_strictly_after_and_follows_the_time_zone() -> None:
    assert next_slot(_nightly(), _utc(10, 1, 59)) == _utc(10, 2)
    assert next_slot(_nightly(), _utc(10, 2)) == _utc(11, 2)  # at the slot: the next one
    # 02:00 in Zurich is 01:00 UTC in November (CET, UTC+1)
    assert next_slot(_nightly(timezone="Europe/Zurich"), _utc(10, 0, 30)) == _utc(10, 1)


def test_slots_between_is_half_open_and_ordered() -> None:
    slots = slots_between(_nightly(), _utc(10, 2), _utc(13, 2))
    assert slots == [_utc(11, 2), _utc(12, 2), _utc(13, 2)]
    assert slots_between(_nightly(), _utc(10, 2), _utc(11, 1, 59)) == []


def test_cron_validation_wants_five_fields() -> None:
    assert is_valid("*/5 * * * *")
    assert not is_valid("0 2 * *")
    assert not is_valid("61 2 * * *")
    assert not is_valid("0 2 * * * *")  # seconds field: not the cron farm.yaml documents


def test_on_time_slot_runs_whatever_the_policy() -> None:
    for policy in CatchUp:
        decision = decide(_nightly(policy), _utc(9, 2), _utc(10, 2, 0, 3), since=_utc(1, 0))
        assert decision.run_slot == _utc(10, 2)
        assert decision.trigger is Trigger.CRON
        assert decision.skipped == ()
        assert decision.next_slot == _utc(11, 2)


def test_nothing_due_before_the_slot() -> None:
    decision = decide(_nightly(), _utc(9, 2), _utc(10, 1, 59), since=_utc(1, 0))
    assert decision.run_slot is None and decision.skipped == ()
    assert decision.next_slot == _utc(10, 2)


def test_downtime_with_skip_records_every_missed_slot_and_runs_none() -> None:
    # last ran on the 5th; down until the 10th at noon: slots 6..10 missed
    decision = decide(_nightly(CatchUp.SKIP), _utc(5, 2), _utc(10, 12), since=_utc(10, 12))
    assert decision.run_slot is None
    assert decision.skipped == tuple(_utc(d, 2) for d in range(6, 11))
    assert decision.next_slot == _utc(11, 2)


def test_downtime_with_run_once_runs_only_the_latest_missed_slot() -> None:
    decision = decide(_nightly(CatchUp.RUN_ONCE), _utc(5, 2), _utc(10, 12), since=_utc(10, 12))
    assert decision.run_slot == _utc(10, 2)
    assert decision.trigger is Trigger.CATCH_UP
    assert decision.skipped == tuple(_utc(d, 2) for d in range(6, 10))


@pytest.mark.parametrize(("late_s", "on_time"), [(MISFIRE_GRACE_S - 1, True), (MISFIRE_GRACE_S + 1, False)])
def test_grace_separates_late_from_missed(late_s: float, on_time: bool) -> None:
    now = _utc(10, 2) + timedelta(seconds=late_s)
    decision = decide(_nightly(CatchUp.SKIP), _utc(9, 2), now, since=_utc(1, 0))
    assert (decision.run_slot == _utc(10, 2)) is on_time
    assert (decision.skipped == (_utc(10, 2),)) is not on_time


def test_a_new_schedule_does_not_fire_for_slots_long_before_the_daemon_started() -> None:
    decision = decide(_nightly(CatchUp.RUN_ONCE), None, _utc(10, 12), since=_utc(10, 12))
    assert decision.run_slot is None and decision.skipped == ()
    # ... but `daemon --once` started by a timer just after the slot still runs it
    just_after = _utc(10, 2, 0, 20)
    decision = decide(_nightly(CatchUp.SKIP), None, just_after, since=just_after)
    assert decision.run_slot == _utc(10, 2)
    # and slots inside that grace before a new schedule existed are not reported as missed
    minutely = decide(_nightly(cron="* * * * *"), None, just_after, since=just_after)
    assert (minutely.run_slot, minutely.skipped) == (_utc(10, 2), ())


def test_frequent_cron_after_long_downtime_is_bounded() -> None:
    decision = decide(
        _nightly(CatchUp.RUN_ONCE, cron="* * * * *"), _utc(1, 0), _utc(30, 0), since=_utc(30, 0)
    )
    assert decision.run_slot == _utc(30, 0)
    assert 0 < len(decision.skipped) < 10_001
