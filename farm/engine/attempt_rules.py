"""What the end of an attempt means for its run: pure decisions over typed values.

The scheduler executes an attempt, then asks `judge_attempt` where the run goes (DONE, FAILED,
PENDING for another try, as the retry and throttle policies say), which events to record and
what to do with the phone; it then stores the result and acts. Nothing here touches the store, a
phone or a thread, so every rule is tested from values alone (tests/unit/engine/test_attempt_rules.py),
as engine/steering.py does for the run protocol.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from farm.engine.thermal import ThrottleReport, throttle_decision
from farm.experiment.sections import OnThrottle, RetryOn
from farm.store import Outcome, RunState
from farm.store.events import EventKind


@dataclass(frozen=True)
class PlannedEvent:
    """An event the scheduler records for the run (on its phone)."""

    kind: EventKind
    message: str


@dataclass(frozen=True)
class AttemptPolicy:
    """The experiment's rules for ending attempts."""

    max_attempts: int
    retry_on: frozenset[RetryOn]
    on_throttle: OnThrottle


@dataclass(frozen=True)
class AttemptEnd:
    """Where the run goes and what the scheduler does about it."""

    next_state: RunState
    outcome: Outcome  # the attempt's outcome as stored (a throttled run failed by policy: FAILED)
    error: str | None
    events: tuple[PlannedEvent, ...]  # recorded whether or not the result is stored
    phone_lost: bool  # the phone climbs the recovery ladder
    phone_answered: bool  # it answered to the end: its recovery ladder starts over

    @property
    def wants_metrics(self) -> bool:
        """Compute the run's metrics once its result is stored."""
        return self.next_state is RunState.DONE


def retry_decision(
    outcome: Outcome, attempts: int, max_attempts: int, retry_on: Collection[RetryOn]
) -> RunState:
    """Where a run goes after an attempt: DONE, FAILED, or PENDING for another try."""
    if outcome is Outcome.DONE:
        return RunState.DONE
    if outcome is Outcome.INTERRUPTED:
        return RunState.PENDING
    if outcome is Outcome.FAILED:
        return RunState.FAILED
    kind = RetryOn.TIMEOUT if outcome is Outcome.TIMEOUT else RetryOn.LOST
    return RunState.PENDING if kind in retry_on and attempts < max_attempts else RunState.FAILED


def judge_attempt(
    outcome: Outcome,
    error: str | None,
    throttle: ThrottleReport | None,
    notes: Collection[str],
    *,
    attempts_after: int,
    policy: AttemptPolicy,
) -> AttemptEnd:
    """The decision for an attempt that ended with `outcome` (its `attempts_after`-th)."""
    next_state = retry_decision(outcome, attempts_after, policy.max_attempts, policy.retry_on)
    next_state, throttled = throttle_decision(
        next_state,
        outcome,
        throttle,
        policy.on_throttle,
        attempts=attempts_after,
        max_attempts=policy.max_attempts,
    )
    events: list[PlannedEvent] = []
    if throttled is not None:
        events.append(PlannedEvent(EventKind.THROTTLE, throttled))
        if next_state is RunState.FAILED:
            outcome, error = Outcome.FAILED, throttled
    if outcome is Outcome.LOST:
        events.append(PlannedEvent(EventKind.FAULT, f"phone lost during run: {error}"))
    elif outcome is Outcome.TIMEOUT:
        events.append(PlannedEvent(EventKind.TIMEOUT, error or "timeout"))
    elif outcome is Outcome.FAILED:
        events.append(PlannedEvent(EventKind.FAILED, error or "failed"))
    if next_state is RunState.PENDING and outcome is not Outcome.INTERRUPTED:
        events.append(PlannedEvent(EventKind.RETRY, f"attempt {attempts_after} ended {outcome}; will retry"))
    events.extend(PlannedEvent(EventKind.NOTE, note) for note in notes)
    return AttemptEnd(
        next_state=next_state,
        outcome=outcome,
        error=error,
        events=tuple(events),
        phone_lost=outcome is Outcome.LOST,
        phone_answered=outcome is not Outcome.LOST,
    )


def not_stored_event(end: AttemptEnd) -> PlannedEvent | None:
    """The event for a result the store refused (the run was requeued meanwhile), if it counts."""
    if end.outcome is Outcome.INTERRUPTED:
        return None
    return PlannedEvent(
        EventKind.REFUSED,
        "result not stored: the run was requeued meanwhile (this coordinator was judged dead)",
    )
