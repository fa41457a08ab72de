"""What a plan adds to the store is known before it is written (issue 27): plan_bytes against the
SQLite file's real growth, for plans of many small runs and of few runs with large factor levels."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from farm.store import Store, StoreLocation
from farm.store import runs as run_store
from farm.store.runs import PlannedRun


def _size_bytes(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        page = conn.execute("PRAGMA page_size").fetchone()[0]
    return int(pages * page)


@pytest.mark.parametrize(
    ("runs", "level_bytes"),
    [(4000, 8), (400, 2000), (40, 100_000)],
    ids=["many small runs", "medium levels", "large levels"],
)
def test_plan_bytes_is_the_sqlite_growth_within_a_quarter(
    tmp_path: Path, runs: int, level_bytes: int
) -> None:
    location = StoreLocation(tmp_path / "results")
    factors = (("pad", "x" * level_bytes),)
    planned = [
        PlannedRun(f"{i:016x}", f"{i % 97:012x}", (*factors, ("n", i)), 0, "local/VP0001", i)
        for i in range(runs)
    ]
    spec = '{"name": "growth"}'
    with Store(location) as store:
        run_store.save_experiment(store, "growth", "{}", "0" * 64, "test")
    before = _size_bytes(location.sqlite_path)
    with Store(location) as store:
        run_store.insert_planned(store, "growth", planned)
    grown = _size_bytes(location.sqlite_path) - before
    estimate = run_store.plan_bytes(spec, planned)
    assert 0.75 * grown <= estimate <= 1.25 * grown, (estimate, grown, estimate / runs, grown / runs)
