"""Runs, attempts and metrics: the queries the engine and `farm status` use.

Every state change is one conditional UPDATE, so a run can only move PENDING -> RUNNING when it is
still PENDING, and a result is stored at most once (metrics are keyed by (run_id, name)). These
hold on PostgreSQL with several coordinators too: a conditional UPDATE takes the row's lock and
re-checks its condition, so the claim paths need no store-wide lock (exclusive=False).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from farm.metric import Metric, value_of
from farm.store.backend import Connection, Row
from farm.store.db import Store
from farm.store.location import check_component, check_relative_run_dir


class RunState(enum.StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    DONE = "DONE"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"


class Outcome(enum.StrEnum):
    """How one attempt ended."""

    DONE = "done"
    FAILED = "failed"  # the benchmark failed (exit code != 0): not retried
    TIMEOUT = "timeout"  # killed at its timeout: retried up to the limit
    LOST = "lost"  # the phone dropped off: retried when it is back
    INTERRUPTED = "interrupted"  # Ctrl-C or a dead farm process: back to PENDING, not counted


@dataclass(frozen=True)
class PlannedRun:
    """What the store needs of a planned run (adapted from the planner's Run)."""

    run_id: str
    cell_id: str
    factors: tuple[tuple[str, Any], ...]
    repetition: int
    device_id: str | None
    seq: int


@dataclass(frozen=True)
class StoredRun:
    run_id: str
    experiment: str
    cell_id: str
    factors: dict[str, Any]
    repetition: int
    device_id: str | None
    seq: int
    state: RunState
    attempts: int
    reason: str | None
    ran_on: str | None
    artifacts_dir: str | None


def _row_to_run(row: Row) -> StoredRun:
    """A runs row; its run id and folder are checked (a shared store's row may come from anyone:
    `../../x` must never become a folder name)."""
    artifacts_dir = row["artifacts_dir"]
    if artifacts_dir is not None:
        check_relative_run_dir(artifacts_dir, "runs.artifacts_dir")
    return StoredRun(
        run_id=check_component(row["run_id"], "run id", "runs.run_id"),
        experiment=row["experiment"],
        cell_id=row["cell_id"],
        factors=json.loads(row["factors_json"]),
        repetition=row["repetition"],
        device_id=row["device_id"],
        seq=row["seq"],
        state=RunState(row["state"]),
        attempts=row["attempts"],
        reason=row["reason"],
        ran_on=row["ran_on"],
        artifacts_dir=artifacts_dir,
    )


def save_experiment(store: Store, name: str, spec_json: str, spec_sha256: str, source: str) -> None:
    now = time.time()
    store.execute(
        "INSERT INTO experiments (name, spec_json, spec_sha256, source_path, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET spec_json = excluded.spec_json, "
        "spec_sha256 = excluded.spec_sha256, source_path = excluded.source_path, "
        "updated_at = excluded.updated_at",
        (name, spec_json, spec_sha256, source, now, now),
    )


def forget_experiment_runs(store: Store, experiment: str) -> int:
    """--fresh: drop the experiment's runs, attempts, metrics, layers and events (artifacts stay
    on disk)."""
    with store.transaction() as conn:
        conn.execute("DELETE FROM events WHERE experiment = ?", (experiment,))
        ids = "SELECT run_id FROM runs WHERE experiment = ?"
        conn.execute(f"DELETE FROM layers WHERE run_id IN ({ids})", (experiment,))
        conn.execute(f"DELETE FROM metrics WHERE run_id IN ({ids})", (experiment,))
        conn.execute(f"DELETE FROM attempts WHERE run_id IN ({ids})", (experiment,))
        return int(conn.execute("DELETE FROM runs WHERE experiment = ?", (experiment,)).rowcount)


def insert_planned(store: Store, experiment: str, runs: Sequence[PlannedRun]) -> int:
    """Persist planned runs as PENDING; runs already stored keep their state. Returns rows added."""
    now = time.time()
    added = 0
    with store.transaction() as conn:
        for run in runs:
            added += _insert_run(conn, experiment, run, now)
            # The order may change with the plan's seed; keep it current for PENDING runs.
            conn.execute(
                "UPDATE runs SET seq = ? WHERE run_id = ? AND state = 'PENDING'", (run.seq, run.run_id)
            )
    return added


def skip_planned(store: Store, reasons: Mapping[str, str]) -> int:
    """PENDING runs the planner found their phone cannot do: SKIPPED with the reason, no attempt.
    Returns how many changed (runs already done or skipped keep their state)."""
    now = time.time()
    changed = 0
    with store.transaction() as conn:
        for run_id, reason in reasons.items():
            cursor = conn.execute(
                "UPDATE runs SET state = 'SKIPPED', reason = ?, finished_at = ? "
                "WHERE run_id = ? AND state = 'PENDING'",
                (reason, now, run_id),
            )
            changed += cursor.rowcount
    return changed


# How SQLite lays a runs row out (measured: tests/unit/store/test_plan_bytes.py): rows share 4 KiB
# pages whole (a 2 KiB row takes a page of its own), a row past a page goes on in overflow pages,
# and the fixed columns and the entries of the row's indexes cost about the same for every row.
PAGE_BYTES = 4096
PAGE_USABLE_BYTES = 4000
ROW_FIXED_BYTES = 60
ROW_INDEX_BYTES = 40


def _factors_json(run: PlannedRun) -> str:
    return json.dumps(dict(run.factors), sort_keys=True)


def row_bytes(run: PlannedRun) -> int:
    """What one planned run's row adds to the store (pure)."""
    payload = len(run.run_id) + len(run.cell_id) + len(run.device_id or "") + len(_factors_json(run))
    payload += ROW_FIXED_BYTES
    per_page = PAGE_USABLE_BYTES // payload
    table = PAGE_BYTES / per_page if per_page else -(-payload // (PAGE_BYTES - 4)) * PAGE_BYTES
    return round(table) + ROW_INDEX_BYTES


def plan_bytes(spec_json: str, runs: Sequence[PlannedRun]) -> int:
    """What storing a plan adds to the store, before it is written (pure): the experiment's JSON
    once, each run's row (its factors are written out in full in every run of their cell)."""
    return len(spec_json) + sum(row_bytes(run) for run in runs)


def _insert_run(
    conn: Connection, experiment: str, run: PlannedRun, now: float, *, done_on: str | None = None
) -> int:
    """One runs row, PENDING (or DONE on `done_on`: an import) unless its run id is stored
    already; 1 when added, 0 when not."""
    done = done_on is not None
    cursor = conn.execute(
        "INSERT INTO runs (run_id, experiment, cell_id, factors_json, repetition, device_id, seq, "
        "state, created_at, ran_on, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (run_id) DO NOTHING",
        (
            run.run_id,
            experiment,
            run.cell_id,
            _factors_json(run),
            run.repetition,
            run.device_id,
            run.seq,
            "DONE" if done else "PENDING",
            now,
            done_on,
            now if done else None,
            now if done else None,
        ),
    )
    return int(cursor.rowcount)


def list_runs(store: Store, experiment: str, states: Iterable[RunState] | None = None) -> list[StoredRun]:
    sql = "SELECT * FROM runs WHERE experiment = ?"
    params: list[Any] = [experiment]
    if states is not None:
        wanted = list(states)
        sql += f" AND state IN ({', '.join('?' for _ in wanted)})"
        params.extend(str(s) for s in wanted)
    return [_row_to_run(r) for r in store.query(sql + " ORDER BY seq, run_id", params)]


def get_run(store: Store, run_id: str) -> StoredRun | None:
    rows = store.query("SELECT * FROM runs WHERE run_id = ?", (run_id,))
    return _row_to_run(rows[0]) if rows else None


def count_states(store: Store, experiment: str) -> dict[RunState, int]:
    counts = {state: 0 for state in RunState}
    for row in store.query(
        "SELECT state, COUNT(*) AS n FROM runs WHERE experiment = ? GROUP BY state", (experiment,)
    ):
        counts[RunState(row["state"])] = row["n"]
    return counts


def has_pending(store: Store, experiment: str, device_id: str) -> bool:
    """Is a PENDING run left that this phone may take (bound to it, or to any phone)?"""
    rows = store.query(
        "SELECT 1 FROM runs WHERE experiment = ? AND state = 'PENDING' "
        "AND (device_id IS NULL OR device_id = ?) LIMIT 1",
        (experiment, device_id),
    )
    return bool(rows)


def claim(store: Store, run_id: str, execution_id: int, device_id: str, artifacts_dir: str) -> int | None:
    """PENDING -> RUNNING on `device_id`; returns the attempt number, or None if not PENDING.

    One conditional UPDATE: of several claimants (threads, processes, coordinators on other
    machines) exactly one sees the row change; the others get None."""
    with store.transaction(exclusive=False) as conn:
        return _claim_in(conn, run_id, execution_id, device_id, artifacts_dir, store.now())


def claim_next(
    store: Store,
    experiment: str,
    execution_id: int,
    device_id: str,
    artifacts_prefix: str,
    *,
    on_lease: bool = False,
) -> tuple[StoredRun, int] | None:
    """Claim the first PENDING run (planned order) this phone may take: bound to it or to any
    phone. Its artifacts folder is `artifacts_prefix + run_id`. `on_lease`: only while this
    execution holds the phone's lease (a coordinator whose lease was taken over claims nothing).
    Returns the run (state and attempts as before the claim) and the attempt number, or None.

    On PostgreSQL it is ONE statement (pick with `FOR UPDATE SKIP LOCKED`, move it to RUNNING,
    open its attempt), sent without BEGIN/COMMIT: one round trip per claim, and coordinators
    picking at the same moment pass over each other's candidate instead of queueing on it."""
    lease = _LEASE_HELD if on_lease else ""
    lease_params: tuple[Any, ...] = (device_id, execution_id) if on_lease else ()
    now = store.now()
    if store.shared:
        rows = store.statement(
            _CLAIM_NEXT_ONE_STATEMENT.format(lease=lease),
            (
                *(experiment, device_id, *lease_params),  # picked
                *(execution_id, device_id, artifacts_prefix, now),  # claimed
                *(device_id, execution_id, now),  # opened
            ),
        )
        if not rows:
            return None
        run = _row_to_run(rows[0])
        before = dataclasses.replace(run, state=RunState.PENDING, attempts=run.attempts - 1)
        return before, int(rows[0]["claimed_attempt"])
    with store.transaction(exclusive=False) as conn:
        row = conn.execute(
            "SELECT * FROM runs WHERE experiment = ? AND state = 'PENDING' "
            f"AND (device_id IS NULL OR device_id = ?){lease} ORDER BY seq, run_id LIMIT 1",
            (experiment, device_id, *lease_params),
        ).fetchone()
        if row is None:
            return None
        run = _row_to_run(row)
        attempt = _claim_in(conn, run.run_id, execution_id, device_id, artifacts_prefix + run.run_id, now)
        return (run, attempt) if attempt is not None else None


_LEASE_HELD = " AND EXISTS (SELECT 1 FROM leases WHERE device_id = ? AND execution_id = ?)"

# PostgreSQL: the claim as one data-changing statement. Its parts see one snapshot; the picked row
# is locked by FOR UPDATE, so the UPDATE's `state = 'PENDING'` re-check and the attempt number
# (max + 1, attempts are never deleted) cannot race another claimant.
_CLAIM_NEXT_ONE_STATEMENT = """
WITH picked AS (
    SELECT run_id FROM runs WHERE experiment = ? AND state = 'PENDING'
    AND (device_id IS NULL OR device_id = ?){lease}
    ORDER BY seq, run_id LIMIT 1 FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE runs r SET state = 'RUNNING', attempts = r.attempts + 1, execution_id = ?, ran_on = ?,
        artifacts_dir = ? || r.run_id, started_at = ?
    FROM picked WHERE r.run_id = picked.run_id AND r.state = 'PENDING'
    RETURNING r.*
), opened AS (
    INSERT INTO attempts (run_id, attempt, device_id, execution_id, started_at)
    SELECT c.run_id, COALESCE((SELECT MAX(a.attempt) FROM attempts a WHERE a.run_id = c.run_id), 0) + 1,
        ?, ?, ?
    FROM claimed c RETURNING attempt
)
SELECT claimed.*, opened.attempt AS claimed_attempt FROM claimed, opened
"""


def _claim_in(
    conn: Connection, run_id: str, execution_id: int, device_id: str, artifacts_dir: str, now: float
) -> int | None:
    changed = conn.execute(
        "UPDATE runs SET state = 'RUNNING', attempts = attempts + 1, execution_id = ?, ran_on = ?, "
        "artifacts_dir = ?, started_at = ? WHERE run_id = ? AND state = 'PENDING'",
        (execution_id, device_id, artifacts_dir, now, run_id),
    ).rowcount
    if not changed:
        return None
    # Attempt numbers never repeat (an interrupted attempt keeps its row), while runs.attempts
    # counts only the tries that count against max_attempts.
    attempt = int(
        conn.execute(
            "SELECT COALESCE(MAX(attempt), 0) + 1 FROM attempts WHERE run_id = ?", (run_id,)
        ).fetchone()[0]
    )
    conn.execute(
        "INSERT INTO attempts (run_id, attempt, device_id, execution_id, started_at) VALUES (?, ?, ?, ?, ?)",
        (run_id, attempt, device_id, execution_id, now),
    )
    return attempt


def finish(
    store: Store,
    run_id: str,
    attempt: int,
    outcome: Outcome,
    *,
    next_state: RunState,
    error: str | None = None,
    exit_code: int | None = None,
    load_target: float | None = None,
    load_achieved: float | None = None,
    env: dict[str, Any] | None = None,
    metrics: Sequence[Metric] = (),
) -> bool:
    """Close an attempt and move the run (RUNNING -> next_state) in one transaction.

    `next_state` PENDING requeues it (retry); an INTERRUPTED attempt does not count as a try.
    Returns False when the run was no longer RUNNING (another process reset it): nothing stored.
    """
    now = store.now()
    with store.transaction(exclusive=False) as conn:
        uncount = 1 if outcome is Outcome.INTERRUPTED else 0
        finished = now if next_state in (RunState.DONE, RunState.FAILED, RunState.SKIPPED) else None
        changed = conn.execute(
            "UPDATE runs SET state = ?, reason = ?, attempts = attempts - ?, finished_at = ?, "
            "execution_id = NULL WHERE run_id = ? AND state = 'RUNNING' AND started_at = "
            "(SELECT started_at FROM attempts WHERE run_id = ? AND attempt = ? AND outcome IS NULL)",
            (str(next_state), error, uncount, finished, run_id, run_id, attempt),
        ).rowcount
        if not changed:
            return False
        conn.execute(
            "UPDATE attempts SET finished_at = ?, outcome = ?, error = ?, exit_code = ?, load_target = ?, "
            "load_achieved = ?, env_json = ? WHERE run_id = ? AND attempt = ?",
            (
                now,
                str(outcome),
                error,
                exit_code,
                load_target,
                load_achieved,
                json.dumps(env, sort_keys=True, default=str) if env is not None else None,
                run_id,
                attempt,
            ),
        )
        _put_metrics(conn, run_id, metrics)
        return True


def put_metrics(store: Store, run_id: str, metrics: Sequence[Metric]) -> None:
    """Insert or replace metrics of a run: storing the same result twice leaves one row each."""
    with store.transaction(exclusive=False) as conn:
        _put_metrics(conn, run_id, metrics)


def _put_metrics(conn: Any, run_id: str, metrics: Sequence[Metric]) -> None:
    conn.executemany(
        "INSERT INTO metrics (run_id, name, value, unit) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (run_id, name) DO UPDATE SET value = excluded.value, unit = excluded.unit",
        [(run_id, m.name, m.value, m.unit) for m in metrics],
    )


def get_metrics(store: Store, run_id: str) -> list[Metric]:
    rows = store.query("SELECT name, value, unit FROM metrics WHERE run_id = ? ORDER BY name", (run_id,))
    return [Metric(r["name"], value_of(r["value"]), r["unit"]) for r in rows]


_ORPHANED = (
    "SELECT r.run_id, r.execution_id FROM runs r LEFT JOIN executions e ON e.id = r.execution_id "
    "WHERE r.state = 'RUNNING' AND (e.status IS NULL OR e.status <> 'running')"
)


def reset_orphans(
    store: Store, experiment: str | None, live_execution_ids: Iterable[int] | None = None
) -> list[str]:
    """RUNNING runs held by executions not in `live_execution_ids` -> PENDING (resume after a crash).

    `live_execution_ids` None: runs whose execution is no longer marked running (after
    ownership.mark_dead_executions), read in the same transaction, so a coordinator that started
    a moment ago is never taken for dead. The attempt that was in flight is closed as
    `interrupted` and does not count as a try. A run is reset only while the dead execution still
    holds it (never one a live coordinator claimed again in between)."""
    live = None if live_execution_ids is None else set(live_execution_ids)
    sql = "SELECT run_id, execution_id FROM runs r WHERE state = 'RUNNING'" if live is not None else _ORPHANED
    params: list[Any] = []
    if experiment is not None:
        sql += " AND r.experiment = ?"
        params.append(experiment)
    reset: list[str] = []
    now = store.now()
    with store.transaction() as conn:
        for row in conn.execute(sql, params).fetchall():
            if live is not None and row["execution_id"] in live:
                continue
            changed = conn.execute(
                "UPDATE runs SET state = 'PENDING', attempts = attempts - 1, execution_id = NULL "
                "WHERE run_id = ? AND state = 'RUNNING' AND execution_id IS NOT DISTINCT FROM ?",
                (row["run_id"], row["execution_id"]),
            ).rowcount
            if not changed:
                continue
            conn.execute(
                "UPDATE attempts SET finished_at = ?, outcome = 'interrupted', "
                "error = 'farm process died' WHERE run_id = ? AND outcome IS NULL",
                (now, row["run_id"]),
            )
            reset.append(row["run_id"])
    return reset


def has_orphans(store: Store, experiment: str) -> bool:
    """Is a RUNNING run of the experiment held by an execution no longer marked running?"""
    return bool(store.query(_ORPHANED + " AND r.experiment = ? LIMIT 1", (experiment,)))


def requeue_failed(store: Store, experiment: str, *, lost_only: bool = True) -> list[str]:
    """FAILED runs -> PENDING with a fresh attempt budget (runs.attempts back to 0); DONE runs are
    never touched. `lost_only`: only runs whose last attempt ended `lost` (the phone went away,
    nothing wrong with the run), which a resume retries by itself; otherwise every FAILED run
    (`farm run --retry-failed`). Returns the run ids requeued."""
    last_outcome = (
        "(SELECT a.outcome FROM attempts a WHERE a.run_id = runs.run_id ORDER BY a.attempt DESC LIMIT 1)"
    )
    sql = "SELECT run_id FROM runs WHERE experiment = ? AND state = 'FAILED'"
    if lost_only:
        sql += f" AND {last_outcome} = 'lost'"
    with store.transaction() as conn:
        ids = [r[0] for r in conn.execute(sql + " ORDER BY seq, run_id", (experiment,)).fetchall()]
        for run_id in ids:
            conn.execute(
                "UPDATE runs SET state = 'PENDING', attempts = 0, reason = NULL, finished_at = NULL "
                "WHERE run_id = ? AND state = 'FAILED'",
                (run_id,),
            )
    return ids


def store_imported(
    store: Store, experiment: str, runs: Sequence[tuple[PlannedRun, Sequence[Metric]]], ran_on: str
) -> list[PlannedRun]:
    """Measurements made outside farm (`farm import`) as DONE runs of `experiment`, with their
    metrics. A run id already stored is left as it is, whichever experiment holds it: returns
    the runs that were (the caller says so); another run is never rewritten."""
    now = time.time()
    existing: list[PlannedRun] = []
    with store.transaction() as conn:
        for run, metrics in runs:
            check_component(run.run_id, "run id", "an import")
            if not _insert_run(conn, experiment, run, now, done_on=ran_on):
                existing.append(run)
                continue
            _put_metrics(conn, run.run_id, metrics)
    return existing
