"""Two `farm run` processes never use one phone at once: the second finds it leased."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import fast_lstm, open_store, run_farm, start_farm, write_experiment

pytestmark = pytest.mark.integration


@pytest.mark.serial  # a lease lives by heartbeats, which a starved farm misses
def test_a_phone_leased_by_a_running_farm_is_not_used_by_another(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    slow = write_experiment(
        tmp_path,
        "slow",
        # Iterations of a few ms: a tiny LSTM over 30 s prints millions of per-iteration events,
        # which a loaded host takes longer to handle than the stop below waits for.
        fast_lstm(
            sweep="{hidden: [128]}",
            measurement="{warmup: 1, iterations: 3, min_seconds: 30, repetitions: 1}",
            params="layers: 1, seq_len: 32, input_dim: 32, classes: 2, batch: 1, backend: cpu",
        ),
    )
    other = write_experiment(tmp_path, "other", fast_lstm())
    first = start_farm(phones.adb_port, results, "run", str(slow), "--no-live")
    try:
        deadline = time.monotonic() + 60
        while True:
            assert first.poll() is None and time.monotonic() < deadline, "first farm never started a run"
            if (results / "farm.db").exists():
                with open_store(results) as store:
                    if run_store.list_runs(store, "slow", [RunState.RUNNING]):
                        break
            time.sleep(0.2)
        second = run_farm(phones.adb_port, results, "run", str(other), "--no-live")
        assert second.returncode == 3, second.stdout + second.stderr
        assert "leased" in second.stderr
        status = run_farm(phones.adb_port, results, "status", "slow")
        assert status.returncode == 0 and "1 running" in status.stdout
    finally:
        os.kill(first.pid, signal.SIGINT)
        first.communicate(timeout=180)
    with open_store(results) as store:
        assert run_store.list_runs(store, "other") == []  # refused before anything was planned
        assert run_store.count_states(store, "slow")[RunState.PENDING] == 1  # interrupted, to resume
