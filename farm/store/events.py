"""The events table: what happened during sweeps, typed end to end.

Every event is written through `emit` and read through `recent` (or `messages` for the report's
and the nightly's text-only views). Its kind is an EventKind, never a free string, so a listener
(the live view, the report, the nightly) can only name kinds that exist, and every kind is
emitted somewhere in farm (tests/unit/store/test_event_kinds.py reads the source to check):
a view can no longer wait for an event nothing sends. A payload is any typed value that turns
itself into JSON (`to_json`); it is stored as data_json for whoever reads the store later.
"""

from __future__ import annotations

import enum
import json
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Protocol

from farm.store.db import Store

log = logging.getLogger("farm.store")


class EventKind(enum.StrEnum):
    """Every kind of event farm records; the stored value is the string."""

    BASELINE = "baseline"  # the phone's idle power, measured before its first run
    CLOCKS = "clocks"  # clocks pinned for the sweep
    DEPLOY = "deploy"  # binaries and agents copied to a phone
    ERROR = "error"  # a phone skipped or unusable
    FAILED = "failed"  # a run failed
    FAULT = "fault"  # a phone lost while preparing or running
    JOINED = "joined"  # a phone joined a running sweep
    LEASE = "lease"  # a phone left the sweep (lease lost or given up)
    NOTE = "note"  # something a reader of the results should know
    QUALITY = "quality"  # a measurement-quality problem (no idle baseline, ...)
    QUARANTINE = "quarantine"  # no more runs on a phone this sweep
    RECOVERED = "recovered"  # a lost phone is back
    RECOVERY = "recovery"  # a recovery step taken (reconnect, reboot, power-cycle, restore)
    REFUSED = "refused"  # a result not stored (the run was requeued meanwhile)
    REGRESSION = "regression"  # the nightly flagged a metric
    RETRY = "retry"  # a run requeued for another attempt
    TAKEOVER = "takeover"  # runs of a dead coordinator requeued
    THROTTLE = "throttle"  # the phone throttled during a run
    TIMEOUT = "timeout"  # a run ran past its timeout
    TUNE = "tune"  # the tuner's choice for a workload
    WARNING = "warning"  # something was not restored or held as asked


class EventPayload(Protocol):
    """A typed value an event carries; stored as JSON."""

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Event:
    ts: float
    kind: EventKind
    message: str
    run_id: str | None
    device_id: str | None


def emit(
    store: Store,
    kind: EventKind,
    message: str,
    *,
    experiment: str | None = None,
    run_id: str | None = None,
    device_id: str | None = None,
    payload: EventPayload | None = None,
) -> None:
    """Record one event (the only writer of the events table)."""
    data = payload.to_json() if payload is not None else None
    store.execute(
        "INSERT INTO events (ts, experiment, run_id, device_id, kind, message, data_json) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            time.time(),
            experiment,
            run_id,
            device_id,
            EventKind(kind).value,
            message,
            json.dumps(data, default=str) if data else None,
        ),
    )


def recent(
    store: Store,
    experiment: str | None,
    limit: int = 20,
    *,
    kinds: Collection[EventKind] | None = None,
) -> list[Event]:
    """The newest `limit` events (of `kinds`, when given), oldest first; all experiments for None."""
    where: list[str] = []
    params: list[Any] = []
    if experiment is not None:
        where.append("experiment = ?")
        params.append(experiment)
    if kinds is not None:
        if not kinds:
            return []
        where.append(f"kind IN ({', '.join('?' for _ in kinds)})")
        params.extend(kind.value for kind in kinds)
    sql = "SELECT ts, kind, message, run_id, device_id FROM events"
    if where:
        sql += " WHERE " + " AND ".join(where)
    rows = store.query(sql + " ORDER BY id DESC LIMIT ?", [*params, limit])
    return [
        Event(r["ts"], _kind(r["kind"]), r["message"], r["run_id"], r["device_id"]) for r in reversed(rows)
    ]


def messages(store: Store, experiment: str, kinds: Collection[EventKind]) -> list[tuple[str | None, str]]:
    """(device_id, message) of every event of `kinds` in `experiment`, oldest first."""
    if not kinds:
        return []
    marks = ", ".join("?" for _ in kinds)
    rows = store.query(
        f"SELECT device_id, message FROM events WHERE experiment = ? AND kind IN ({marks}) ORDER BY ts, id",
        (experiment, *(kind.value for kind in kinds)),
    )
    return [(row["device_id"], row["message"]) for row in rows]


def _kind(stored: str) -> EventKind:
    try:
        return EventKind(stored)
    except ValueError:  # written by a newer farm: shown as a note rather than refused
        log.debug("unknown event kind %r read as a note", stored)
        return EventKind.NOTE
