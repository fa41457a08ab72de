"""Executions (farm processes) and the phone leases they hold, with heartbeats.

A lease is valid while its execution is alive: its heartbeat is recent AND, when it runs on this
machine, its pid still exists. A farm process killed with -9 thus loses its leases and RUNNING runs
at once for a farm started on the same machine, and after HEARTBEAT_STALE_S elsewhere.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass

from farm.store.db import Store

HEARTBEAT_INTERVAL_S = 2.0
HEARTBEAT_STALE_S = 20.0


@dataclass(frozen=True)
class Execution:
    id: int
    pid: int
    hostname: str
    heartbeat_at: float
    status: str


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


def start_execution(store: Store, experiment: str | None, argv: Sequence[str], version: str) -> int:
    now = time.time()
    with store.transaction() as conn:
        cursor = conn.execute(
            "INSERT INTO executions (experiment, pid, hostname, argv_json, farm_version, started_at, "
            "heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (experiment, os.getpid(), socket.gethostname(), json.dumps(list(argv)), version, now, now),
        )
        return int(cursor.lastrowid or 0)


def heartbeat(store: Store, execution_id: int) -> None:
    now = time.time()
    with store.transaction() as conn:
        conn.execute("UPDATE executions SET heartbeat_at = ? WHERE id = ?", (now, execution_id))
        conn.execute("UPDATE leases SET heartbeat_at = ? WHERE execution_id = ?", (now, execution_id))


def finish_execution(store: Store, execution_id: int, status: str) -> None:
    with store.transaction() as conn:
        conn.execute(
            "UPDATE executions SET status = ?, finished_at = ? WHERE id = ?",
            (status, time.time(), execution_id),
        )
        conn.execute("DELETE FROM leases WHERE execution_id = ?", (execution_id,))


def live_executions(store: Store) -> list[Execution]:
    rows = store.query(
        "SELECT id, pid, hostname, heartbeat_at, status FROM executions WHERE status = 'running'"
    )
    executions = [Execution(r["id"], r["pid"], r["hostname"], r["heartbeat_at"], r["status"]) for r in rows]
    return [e for e in executions if is_alive(e)]


def mark_dead_executions(store: Store) -> list[int]:
    """Executions still marked running whose process is gone -> crashed. Returns their ids."""
    rows = store.query(
        "SELECT id, pid, hostname, heartbeat_at, status FROM executions WHERE status = 'running'"
    )
    dead = [
        r["id"]
        for r in rows
        if not is_alive(Execution(r["id"], r["pid"], r["hostname"], r["heartbeat_at"], r["status"]))
    ]
    with store.transaction() as conn:
        for execution_id in dead:
            conn.execute(
                "UPDATE executions SET status = 'crashed', finished_at = ? WHERE id = ?",
                (time.time(), execution_id),
            )
            conn.execute("DELETE FROM leases WHERE execution_id = ?", (execution_id,))
    return dead


def acquire_lease(store: Store, device_id: str, execution_id: int) -> bool:
    """Take the phone for this execution unless a live execution holds it."""
    now = time.time()
    with store.transaction() as conn:
        row = conn.execute(
            "SELECT l.execution_id, e.pid, e.hostname, e.heartbeat_at, e.status FROM leases l "
            "LEFT JOIN executions e ON e.id = l.execution_id WHERE l.device_id = ?",
            (device_id,),
        ).fetchone()
        if row is not None and row["execution_id"] != execution_id and row["pid"] is not None:
            holder = Execution(
                row["execution_id"], row["pid"], row["hostname"], row["heartbeat_at"], row["status"]
            )
            if is_alive(holder, now=now):
                return False
        conn.execute(
            "INSERT OR REPLACE INTO leases (device_id, execution_id, pid, hostname, acquired_at, "
            "heartbeat_at) VALUES (?, ?, ?, ?, ?, ?)",
            (device_id, execution_id, os.getpid(), socket.gethostname(), now, now),
        )
        return True


def release_lease(store: Store, device_id: str, execution_id: int) -> None:
    store.execute("DELETE FROM leases WHERE device_id = ? AND execution_id = ?", (device_id, execution_id))


def leased_devices(store: Store) -> dict[str, int]:
    """device_id -> execution id, for leases held by live executions."""
    live = {e.id for e in live_executions(store)}
    rows = store.query("SELECT device_id, execution_id FROM leases")
    return {r["device_id"]: r["execution_id"] for r in rows if r["execution_id"] in live}
