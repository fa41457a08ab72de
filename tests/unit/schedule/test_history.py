"""Nightly points from a real SQLite store: per-night medians of repetitions, per phone, only DONE
runs, only nightlies of the asked experiment, and only those measured with the newest settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.schedule.history import comparable_nightlies, load_points
from farm.store import Store
from tests.unit.schedule.nightly_store import store_night

_night = store_night


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "farm.db") as s:
        yield s


def test_points_are_per_night_and_phone_medians_of_done_runs(store: Store) -> None:
    _night(store, "tiny--20261101-020000", {"local/A": [1.0, 3.0], "local/B": [5.0, 5.0]})
    _night(store, "tiny--20261102-020000", {"local/A": [2.0, 2.0]})
    _night(store, "tiny--20261103-020000", {"local/A": [9.0, 9.0]}, state="FAILED")
    _night(store, "tiny", {"local/A": [7.0, 7.0]})  # an ad-hoc run, not a nightly
    _night(store, "tinyer--20261102-020000", {"local/A": [7.0, 7.0]})  # another experiment
    points = load_points(store, "tiny", ["latency_median_ms"])
    got = sorted((p.series, p.device, p.value) for p in points)
    assert got == [
        ("tiny--20261101-020000", "local/A", 2.0),
        ("tiny--20261101-020000", "local/B", 5.0),
        ("tiny--20261102-020000", "local/A", 2.0),
    ]
    assert all(p.factors == {"hidden": 8} for p in points)
    orders = {p.series: p.order for p in points}
    assert orders["tiny--20261101-020000"] < orders["tiny--20261102-020000"]


def test_nightlies_measured_with_other_settings_are_left_out(store: Store) -> None:
    _night(store, "tiny--20261101-020000", {"local/A": [1.0, 1.0]}, iters=5)
    _night(store, "tiny--20261102-020000", {"local/A": [1.0, 1.0]}, iters=50)
    _night(store, "tiny--20261103-020000", {"local/A": [1.0, 1.0]}, iters=50)
    kept, changed = comparable_nightlies(store, "tiny")
    assert [name for name, _ in kept] == ["tiny--20261102-020000", "tiny--20261103-020000"]
    assert changed == ["tiny--20261101-020000"]
    assert {p.series for p in load_points(store, "tiny", ["latency_median_ms"])} == set(
        name for name, _ in kept
    )
