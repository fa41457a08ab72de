"""The store against a real SQLite file: migrations, idempotent results, run state transitions."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from farm.errors import EnvironmentProblem
from farm.store import Metric, Outcome, RunState, Store, ownership
from farm.store import devices as devs
from farm.store import runs as rq
from farm.store.schema import MIGRATIONS, TABLE_DOCS


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "farm.db") as s:
        yield s


def _planned(n: int, device: str = "local/A") -> list[rq.PlannedRun]:
    return [
        rq.PlannedRun(f"r{i}", f"c{i % 2}", (("hidden", 32 * (i + 1)), ("backend", "gpu")), 0, device, i)
        for i in range(n)
    ]


def test_fresh_database_is_at_latest_version_in_wal_mode(store: Store) -> None:
    assert store.version == len(MIGRATIONS)
    assert store.query("PRAGMA journal_mode")[0][0] == "wal"
    tables = {r[0] for r in store.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert set(TABLE_DOCS) <= tables


def test_migrate_applies_only_missing_migrations(tmp_path: Path) -> None:
    path = tmp_path / "farm.db"
    with Store(path) as s:
        assert s.migrate() == 0
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(EnvironmentProblem, match="newer than this farm"):
        Store(path).open()


def test_planned_runs_are_inserted_once_and_keep_their_state(store: Store) -> None:
    assert rq.insert_planned(store, "exp", _planned(3)) == 3
    attempt = rq.claim(store, "r0", 1, "local/A", "exp/r0")
    assert attempt == 1
    assert rq.finish(store, "r0", 1, Outcome.DONE, next_state=RunState.DONE)
    assert rq.insert_planned(store, "exp", _planned(3)) == 0
    counts = rq.count_states(store, "exp")
    assert counts[RunState.DONE] == 1 and counts[RunState.PENDING] == 2


def test_claim_only_pending(store: Store) -> None:
    rq.insert_planned(store, "exp", _planned(1))
    assert rq.claim(store, "r0", 1, "local/A", "d") == 1
    assert rq.claim(store, "r0", 2, "local/A", "d") is None


def test_metrics_insert_is_idempotent(store: Store) -> None:
    rq.insert_planned(store, "exp", _planned(1))
    metrics = [Metric("latency_median_ms", 1.5, "ms"), Metric("power_mean_mw", 900.0, "mW")]
    rq.put_metrics(store, "r0", metrics)
    rq.put_metrics(store, "r0", [Metric("latency_median_ms", 1.25, "ms")])
    got = {m.name: m.value for m in rq.get_metrics(store, "r0")}
    assert got == {"latency_median_ms": 1.25, "power_mean_mw": 900.0}
    assert len(store.query("SELECT * FROM metrics")) == 2


def test_finish_after_reset_stores_nothing(store: Store) -> None:
    """A zombie worker finishing a run that a restarted farm reset must not store a result."""
    rq.insert_planned(store, "exp", _planned(1))
    attempt = rq.claim(store, "r0", 7, "local/A", "d")
    assert attempt is not None
    assert rq.reset_orphans(store, "exp", live_execution_ids=[]) == ["r0"]
    ok = rq.finish(
        store, "r0", attempt, Outcome.DONE, next_state=RunState.DONE, metrics=[Metric("x", 1.0, "")]
    )
    assert not ok
    assert rq.get_metrics(store, "r0") == []
    run = rq.get_run(store, "r0")
    assert run is not None and run.state is RunState.PENDING and run.attempts == 0


def test_retry_requeues_and_counts_attempts(store: Store) -> None:
    rq.insert_planned(store, "exp", _planned(1))
    a1 = rq.claim(store, "r0", 1, "local/A", "d")
    assert a1 == 1
    rq.finish(store, "r0", a1, Outcome.TIMEOUT, next_state=RunState.PENDING, error="timeout")
    a2 = rq.claim(store, "r0", 1, "local/A", "d")
    assert a2 == 2
    rq.finish(store, "r0", a2, Outcome.INTERRUPTED, next_state=RunState.PENDING)
    run = rq.get_run(store, "r0")
    assert run is not None and run.attempts == 1  # an interruption is not a try
    outcomes = [r["outcome"] for r in store.query("SELECT outcome FROM attempts ORDER BY attempt")]
    assert outcomes == ["timeout", "interrupted"]
    # The interrupted attempt keeps its row: the next try gets a new number.
    assert rq.claim(store, "r0", 1, "local/A", "d") == 3
    run = rq.get_run(store, "r0")
    assert run is not None and run.attempts == 2


def test_forget_experiment_runs(store: Store) -> None:
    rq.insert_planned(store, "exp", _planned(2))
    rq.insert_planned(store, "other", [rq.PlannedRun("o0", "c", (), 0, None, 0)])
    rq.put_metrics(store, "r0", [Metric("x", 1.0, "")])
    rq.add_event(store, "fault", "old", experiment="exp")
    rq.add_event(store, "fault", "kept", experiment="other")
    assert rq.forget_experiment_runs(store, "exp") == 2
    assert rq.recent_events(store, "exp") == [] and len(rq.recent_events(store, "other")) == 1
    assert store.query("SELECT COUNT(*) FROM metrics")[0][0] == 0
    assert [r.run_id for r in rq.list_runs(store, "other")] == ["o0"]


def test_lease_excludes_a_live_execution_and_passes_from_a_dead_one(store: Store) -> None:
    mine = ownership.start_execution(store, "exp", ["farm"], "0")
    assert ownership.acquire_lease(store, "local/A", mine)
    # A second (live) execution of this process cannot take it.
    other = ownership.start_execution(store, "exp", ["farm"], "0")
    assert not ownership.acquire_lease(store, "local/A", other)
    # An execution whose pid is gone is dead: its lease can be taken over.
    dead_pid = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    ).stdout.strip()
    store.execute("UPDATE executions SET pid = ? WHERE id = ?", (int(dead_pid), mine))
    assert ownership.acquire_lease(store, "local/A", other)
    assert ownership.leased_devices(store) == {"local/A": other}
    assert mine in ownership.mark_dead_executions(store)
    assert os.getpid() == store.query("SELECT pid FROM leases")[0][0]


def test_charging_marker_round_trip(store: Store) -> None:
    devs.mark_charging_disabled(store, "local/A", "/sys/class/power_supply/battery/input_suspend", "0")
    assert devs.charging_markers(store) == [
        devs.ChargingMarker("local/A", "/sys/class/power_supply/battery/input_suspend", "0")
    ]
    devs.clear_charging_disabled(store, "local/A")
    assert devs.charging_markers(store) == []


def test_events_are_listed_oldest_first(store: Store) -> None:
    for i in range(5):
        rq.add_event(store, "fault", f"m{i}", experiment="exp", device_id="local/A")
    assert [e.message for e in rq.recent_events(store, "exp", limit=3)] == ["m2", "m3", "m4"]
