"""A pure, immutable picture of what the engine is doing, for the live view and `farm status`.

The orchestrator fills a `Snapshot` (about every 250 ms while running; from the store for
`farm status --watch`) and hands it to `farm.live.view`. Nothing here does I/O, so the view can be
tested from a snapshot built in a test. Values that a phone cannot report (no GPU busy counter, no
battery current) are None and render as a dash, never as 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from farm.engine.model import Phase
from farm.store.events import EventKind


class EventLevel(StrEnum):
    """How loud a recent event is in the view."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


# Kinds of store events (farm.store.events) the view shows louder than INFO.
_EVENT_LEVELS = {
    EventKind.FAULT: EventLevel.WARNING,
    EventKind.RETRY: EventLevel.WARNING,
    EventKind.TIMEOUT: EventLevel.WARNING,
    EventKind.THROTTLE: EventLevel.WARNING,
    EventKind.QUALITY: EventLevel.WARNING,
    EventKind.REGRESSION: EventLevel.WARNING,
    EventKind.QUARANTINE: EventLevel.ERROR,
    EventKind.FAILED: EventLevel.ERROR,
    EventKind.ERROR: EventLevel.ERROR,
}


def event_level(kind: EventKind) -> EventLevel:
    return _EVENT_LEVELS.get(kind, EventLevel.INFO)


@dataclass(frozen=True)
class PhoneRow:
    """One phone's line in the live view.

    `state` is what the engine does with the phone (farm.engine.model.Phase: idle, preparing,
    cooling, loading, running, restoring, offline ...). `cell` names the current cell (e.g.
    "backend=gpu hidden=128 load=0.5").
    `run_progress` is the current run's progress as a fraction 0..1 (None when unknown or idle).
    `gpu_load_achieved` is a fraction 0..1 of the GPU busy time, `power_mw` the battery power.
    """

    phone: str
    host: str
    state: Phase
    cell: str | None = None
    run_progress: float | None = None
    temperature_c: float | None = None
    battery_pct: float | None = None
    gpu_load_achieved: float | None = None
    power_mw: float | None = None


@dataclass(frozen=True)
class Progress:
    """Overall progress of one experiment: runs done / failed out of `total`; ETA in seconds."""

    done: int
    failed: int
    total: int
    eta_s: float | None = None

    @property
    def finished(self) -> int:
        return self.done + self.failed

    @property
    def fraction(self) -> float:
        return self.finished / self.total if self.total > 0 else 0.0


@dataclass(frozen=True)
class Event:
    """A recent thing worth telling the user: a run finished or failed, a phone dropped off.

    `time_s` is the host's wall clock (seconds since the epoch); `phone` is None for events that
    concern the whole experiment.
    """

    time_s: float
    message: str
    level: EventLevel = EventLevel.INFO
    phone: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """Everything the live view shows at one instant. `taken_at_s` is the host's wall clock."""

    experiment: str
    phones: tuple[PhoneRow, ...]
    progress: Progress
    events: tuple[Event, ...] = field(default=())
    taken_at_s: float = 0.0

    def recent_events(self, limit: int) -> tuple[Event, ...]:
        """The `limit` newest events, oldest first (the order a log reads)."""
        ordered = sorted(self.events, key=lambda event: event.time_s)
        return tuple(ordered[-limit:]) if limit > 0 else ()
