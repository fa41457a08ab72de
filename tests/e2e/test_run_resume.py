"""kill -9 of `farm run` in the middle of a sweep, then the same command again: it finishes, no
DONE run is redone, no result is duplicated, and charging is back on (crash recovery)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import fast_lstm, open_store, run_farm, start_farm, write_experiment

pytestmark = pytest.mark.integration

CHARGING_NODE = "/sys/class/power_supply/battery/charging_enabled"  # adreno-nexus6p, rooted


def _wait_for_done(
    results: Path, experiment: str, count: int, timeout_s: float, process: subprocess.Popen[str]
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"farm ended early: {process.stdout.read() if process.stdout else ''}")
        if (results / "farm.db").exists():
            with open_store(results) as store:
                if run_store.count_states(store, experiment)[RunState.DONE] >= count:
                    return
        time.sleep(0.3)
    raise AssertionError(f"fewer than {count} runs DONE after {timeout_s} s")


def test_kill_9_then_rerun_finishes_without_redoing_or_duplicating(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=2, profiles=["adreno-nexus6p"])
    results = tmp_path / "results"
    # ~25 ms iterations: runs last a fraction of a second with only a few iterations to analyse.
    body = fast_lstm(
        "{hidden: [256, 320]}",
        "{warmup: 1, iterations: 10, min_seconds: 0, repetitions: 2}",
        params="layers: 1, seq_len: 128, input_dim: 9, classes: 6, batch: 1, backend: cpu",
    )
    spec = write_experiment(tmp_path, "resume", body)
    farm = start_farm(phones.adb_port, results, "run", str(spec), "--no-live")
    try:
        _wait_for_done(results, "resume", 2, timeout_s=120, process=farm)
        os.kill(farm.pid, signal.SIGKILL)
        farm.wait(timeout=10)
    finally:
        if farm.poll() is None:
            farm.kill()
            farm.wait()
    with open_store(results) as store:
        before = {r.run_id: r for r in run_store.list_runs(store, "resume")}
        done_before = {rid for rid, r in before.items() if r.state is RunState.DONE}
        finished_at = {
            row["run_id"]: row["finished_at"]
            for row in store.query("SELECT run_id, finished_at FROM runs WHERE state = 'DONE'")
        }
    assert len(before) == 8 and 2 <= len(done_before) < 8

    again = run_farm(phones.adb_port, results, "run", str(spec), "--no-live", "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["done"] == 8

    with open_store(results) as store:
        after = {r.run_id: r for r in run_store.list_runs(store, "resume")}
        assert set(after) == set(before)
        assert all(r.state is RunState.DONE for r in after.values())
        for rid in done_before:  # not redone: same single attempt, same finish time
            assert after[rid].attempts == 1
            row = store.query("SELECT finished_at FROM runs WHERE run_id = ?", (rid,))[0]
            assert row["finished_at"] == finished_at[rid]
        done_attempts = store.query(
            "SELECT run_id, COUNT(*) AS n FROM attempts WHERE outcome = 'done' GROUP BY run_id"
        )
        assert {r["run_id"]: r["n"] for r in done_attempts} == dict.fromkeys(after, 1)
        duplicates = store.query(
            "SELECT run_id, name, COUNT(*) AS n FROM metrics GROUP BY run_id, name HAVING n > 1"
        )
        assert duplicates == []
        # Every DONE run has its metrics, also one whose metrics were pending at the kill (backfill).
        with_metrics = {r["run_id"] for r in store.query("SELECT DISTINCT run_id FROM metrics")}
        assert with_metrics == set(after)
        assert store.query("SELECT COUNT(*) FROM executions WHERE status = 'crashed'")[0][0] == 1
        assert store.query("SELECT COUNT(*) FROM devices WHERE charging_disabled = 1")[0][0] == 0

    client = phones.client()
    for phone in phones:
        assert phone.device(client).shell(["cat", CHARGING_NODE]).strip() == "1"
