"""The end of an attempt, decided from values alone (farm.engine.attempt_rules)."""

from __future__ import annotations

from farm.engine.attempt_rules import AttemptPolicy, PlannedEvent, judge_attempt, not_stored_event
from farm.engine.thermal import ThrottleReport
from farm.experiment.clocks import OnThrottle
from farm.experiment.sections import RetryOn
from farm.store import Outcome, RunState
from farm.store.events import EventKind

POLICY = AttemptPolicy(
    max_attempts=3, retry_on=frozenset({RetryOn.LOST, RetryOn.TIMEOUT}), on_throttle=OnThrottle.FLAG
)
HOT = ThrottleReport(gpu_capped=True, samples=4)


def kinds(events: tuple[PlannedEvent, ...]) -> list[EventKind]:
    return [event.kind for event in events]


def test_a_done_run_is_done_wants_metrics_and_resets_the_ladder() -> None:
    end = judge_attempt(Outcome.DONE, None, None, ["a note"], attempts_after=1, policy=POLICY)
    assert (end.next_state, end.outcome, end.wants_metrics) == (RunState.DONE, Outcome.DONE, True)
    assert end.phone_answered and not end.phone_lost
    assert kinds(end.events) == [EventKind.NOTE]


def test_a_lost_phone_retries_while_attempts_are_left_then_fails() -> None:
    first = judge_attempt(Outcome.LOST, "adb gone", None, [], attempts_after=1, policy=POLICY)
    assert first.next_state is RunState.PENDING and first.phone_lost and not first.phone_answered
    assert kinds(first.events) == [EventKind.FAULT, EventKind.RETRY]
    assert first.events[0].message == "phone lost during run: adb gone"
    last = judge_attempt(Outcome.LOST, "adb gone", None, [], attempts_after=3, policy=POLICY)
    assert last.next_state is RunState.FAILED and kinds(last.events) == [EventKind.FAULT]


def test_an_interrupted_attempt_goes_back_without_a_retry_event() -> None:
    end = judge_attempt(Outcome.INTERRUPTED, None, None, [], attempts_after=1, policy=POLICY)
    assert end.next_state is RunState.PENDING and end.events == ()
    assert not_stored_event(end) is None


def test_throttling_by_policy_flag_keeps_retry_reruns_fail_fails_with_the_reason() -> None:
    flag = judge_attempt(Outcome.DONE, None, HOT, [], attempts_after=1, policy=POLICY)
    assert flag.next_state is RunState.DONE and kinds(flag.events) == [EventKind.THROTTLE]
    retry_policy = AttemptPolicy(3, POLICY.retry_on, OnThrottle.RETRY)
    retry = judge_attempt(Outcome.DONE, None, HOT, [], attempts_after=1, policy=retry_policy)
    assert retry.next_state is RunState.PENDING and kinds(retry.events) == [
        EventKind.THROTTLE,
        EventKind.RETRY,
    ]
    assert not retry.wants_metrics
    fail_policy = AttemptPolicy(3, POLICY.retry_on, OnThrottle.FAIL)
    fail = judge_attempt(Outcome.DONE, None, HOT, [], attempts_after=1, policy=fail_policy)
    assert (fail.next_state, fail.outcome) == (RunState.FAILED, Outcome.FAILED)
    assert fail.error is not None and fail.error.startswith("throttled: GPU capped")
    assert kinds(fail.events) == [EventKind.THROTTLE, EventKind.FAILED]


def test_a_result_the_store_refused_is_said_once() -> None:
    end = judge_attempt(Outcome.FAILED, "exit 3", None, [], attempts_after=1, policy=POLICY)
    refused = not_stored_event(end)
    assert refused is not None and refused.kind is EventKind.REFUSED
