"""Nightly points from a real SQLite store: per-night medians of repetitions, per phone, only DONE
runs, only nightlies of the asked experiment, and only those measured with the newest settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.engine.runner import spec_json
from farm.schedule.history import comparable_nightlies, load_points
from farm.spec import load_text
from farm.store import Metric, Store
from farm.store import runs as run_store
from farm.store.runs import PlannedRun

SPEC = """\
name: tiny
benchmark:
  program: lstm
  params: {hidden: 8, layers: 1, seq_len: 4, input_dim: 3, classes: 2, batch: 1}
measurement: {iterations: ITERS, repetitions: 2}
"""


def _night(
    store: Store, name: str, latencies: dict[str, list[float]], iters: int = 5, state: str = "DONE"
) -> None:
    """One stored nightly: per phone, one run per repetition with its latency."""
    text, digest = spec_json(load_text(SPEC.replace("ITERS", str(iters)), "tiny.yaml"))
    run_store.save_experiment(store, name, text, digest, "tiny.yaml")
    for device, values in latencies.items():
        planned = [
            PlannedRun(f"{name}/{device}/{rep}", "cell8", (("hidden", 8),), rep, device, rep)
            for rep in range(len(values))
        ]
        run_store.insert_planned(store, name, planned)
        for run, value in zip(planned, values, strict=True):
            store.execute("UPDATE runs SET state = ? WHERE run_id = ?", (state, run.run_id))
            run_store.put_metrics(store, run.run_id, [Metric("latency_median_ms", value, "ms")])


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
