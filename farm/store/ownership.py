"""Executions (farm processes) and the phone leases they hold, with heartbeats and expiry.

A lease is valid while its execution is alive: its heartbeat is recent AND, when it runs on this
machine, its pid still exists. A farm process killed with -9 thus loses its leases and RUNNING runs
at once for a farm started on the same machine, and after HEARTBEAT_STALE_S elsewhere (measured on
the database's clock, `Store.now()`, so skewed coordinator clocks do not matter).

Taking a lease is a compare-and-swap: read the holder, decide whether it expired, then write only
if the row still holds what was read (no row: INSERT ... ON CONFLICT DO NOTHING; a row: UPDATE ...
WHERE execution_id and heartbeat_at are unchanged). Of two claimants racing for one phone exactly
one changes a row, on SQLite and on PostgreSQL alike, without any table lock; coordinators on
different machines claim different phones in parallel.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from farm.store.backend import Row
from farm.store.db import Store

HEARTBEAT_INTERVAL_S = 2.0
HEARTBEAT_STALE_S = 20.0
_CAS_TRIES = 3  # a lost race re-reads the holder; past this the phone is someone else's


@dataclass(frozen=True)
class Execution:
    id: int
    pid: int
    hostname: str
    heartbeat_at: float
    status: str
    experiment: str | None = None


@dataclass(frozen=True)
class Lease:
    """Who holds a phone now (for `farm status`, `farm devices`)."""

    device_id: str
    execution_id: int
    hostname: str
    pid: int
    acquired_at: float
    heartbeat_at: float
    experiment: str | None = None  # what the holding execution runs


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_alive(execution: Execution, *, now: float | None = None) -> bool:
    now = time.time() if now is None else now
    if execution.status != "running" or now - execution.heartbeat_at > HEARTBEAT_STALE_S:
        return False
    if execution.hostname == socket.gethostname():
        return _pid_alive(execution.pid)
    return True


def start_execution(
    store: Store, experiment: str | None, argv: Sequence[str], version: str, *, results: Path | None = None
) -> int:
    """A new execution row (this process); `results` is the folder its run artifacts go to."""
    now = store.now()
    folder = str(results.resolve()) if results is not None else None
    with store.transaction(exclusive=False) as conn:
        row = conn.execute(
            "INSERT INTO executions (experiment, pid, hostname, argv_json, farm_version, started_at, "
            "heartbeat_at, results_dir) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                experiment,
                os.getpid(),
                socket.gethostname(),
                json.dumps(list(argv)),
                version,
                now,
                now,
                folder,
            ),
        ).fetchone()
        return int(row[0])


def heartbeat(store: Store, execution_id: int) -> frozenset[str]:
    """Refresh this execution's heartbeat and its leases; returns the phones it still holds (a
    lease taken over after a stall is gone from this set: stop using that phone).

    An execution another coordinator judged dead after a stall (status `crashed`: its leases
    were freed and its RUNNING runs requeued) is marked running again: it has no leases left, its
    in-flight results are refused (their attempts were closed), and it may lease phones anew."""
    now = store.now()
    with store.transaction(exclusive=False) as conn:
        conn.execute(
            "UPDATE executions SET heartbeat_at = ?, status = 'running', finished_at = NULL "
            "WHERE id = ? AND status IN ('running', 'crashed')",
            (now, execution_id),
        )
        rows = conn.execute(
            "UPDATE leases SET heartbeat_at = ? WHERE execution_id = ? RETURNING device_id",
            (now, execution_id),
        ).fetchall()
    return frozenset(r[0] for r in rows)


def finish_execution(store: Store, execution_id: int, status: str) -> None:
    with store.transaction(exclusive=False) as conn:
        conn.execute(
            "UPDATE executions SET status = ?, finished_at = ? WHERE id = ?",
            (status, store.now(), execution_id),
        )
        conn.execute("DELETE FROM leases WHERE execution_id = ?", (execution_id,))


_EXECUTION_COLUMNS = "id, pid, hostname, heartbeat_at, status, experiment"


def _execution(r: Row) -> Execution:
    return Execution(r["id"], r["pid"], r["hostname"], r["heartbeat_at"], r["status"], r["experiment"])


def live_executions(store: Store) -> list[Execution]:
    now = store.now()
    rows = store.query(f"SELECT {_EXECUTION_COLUMNS} FROM executions WHERE status = 'running'")
    return [e for e in map(_execution, rows) if is_alive(e, now=now)]


def mark_dead_executions(store: Store) -> list[int]:
    """Executions still marked running whose process is gone -> crashed. Returns their ids.

    Each is closed only if its heartbeat is still the one judged stale, so an execution that
    heartbeats in between (a stalled coordinator waking up) is left alone."""
    now = store.now()
    rows = store.query(f"SELECT {_EXECUTION_COLUMNS} FROM executions WHERE status = 'running'")
    dead: list[int] = []
    with store.transaction(exclusive=False) as conn:
        for execution in map(_execution, rows):
            if is_alive(execution, now=now):
                continue
            changed = conn.execute(
                "UPDATE executions SET status = 'crashed', finished_at = ? "
                "WHERE id = ? AND status = 'running' AND heartbeat_at = ?",
                (now, execution.id, execution.heartbeat_at),
            ).rowcount
            if changed:
                conn.execute("DELETE FROM leases WHERE execution_id = ?", (execution.id,))
                dead.append(execution.id)
    return dead


def acquire_lease(store: Store, device_id: str, execution_id: int) -> bool:
    """Take the phone for this execution unless a live execution holds it (atomic: of several
    claimants at once, on one machine or many, exactly one gets True)."""
    for _ in range(_CAS_TRIES):
        now = store.now()
        with store.transaction(exclusive=False) as conn:
            row = conn.execute(
                "SELECT l.execution_id, l.heartbeat_at AS lease_beat, e.pid, e.hostname, e.heartbeat_at, "
                "e.status FROM leases l LEFT JOIN executions e ON e.id = l.execution_id "
                "WHERE l.device_id = ?",
                (device_id,),
            ).fetchone()
            if row is None:
                won = conn.execute(
                    "INSERT INTO leases (device_id, execution_id, pid, hostname, acquired_at, heartbeat_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (device_id) DO NOTHING",
                    (device_id, execution_id, os.getpid(), socket.gethostname(), now, now),
                ).rowcount
            else:
                holder = row["execution_id"]
                if holder != execution_id and row["pid"] is not None:
                    alive = Execution(holder, row["pid"], row["hostname"], row["heartbeat_at"], row["status"])
                    if is_alive(alive, now=now):
                        return False
                won = conn.execute(
                    "UPDATE leases SET execution_id = ?, pid = ?, hostname = ?, acquired_at = ?, "
                    "heartbeat_at = ? WHERE device_id = ? AND execution_id = ? AND heartbeat_at = ?",
                    (
                        execution_id,
                        os.getpid(),
                        socket.gethostname(),
                        now,
                        now,
                        device_id,
                        holder,
                        row["lease_beat"],
                    ),
                ).rowcount
        if won:
            return True
    return False


def release_lease(store: Store, device_id: str, execution_id: int) -> None:
    with store.transaction(exclusive=False) as conn:
        conn.execute("DELETE FROM leases WHERE device_id = ? AND execution_id = ?", (device_id, execution_id))


def leases(store: Store) -> list[Lease]:
    """Leases held by live executions, by phone."""
    live = {e.id for e in live_executions(store)}
    rows = store.query(
        "SELECT l.device_id, l.execution_id, l.hostname, l.pid, l.acquired_at, l.heartbeat_at, "
        "e.experiment FROM leases l LEFT JOIN executions e ON e.id = l.execution_id ORDER BY l.device_id"
    )
    return [
        Lease(
            r["device_id"],
            r["execution_id"],
            r["hostname"],
            r["pid"],
            r["acquired_at"],
            r["heartbeat_at"],
            r["experiment"],
        )
        for r in rows
        if r["execution_id"] in live
    ]


def leased_devices(store: Store) -> dict[str, int]:
    """device_id -> execution id, for leases held by live executions."""
    return {lease.device_id: lease.execution_id for lease in leases(store)}
