"""A production phone whose charging cannot be stopped: its battery power is the charger's business,
not the phone's draw, so farm stores no energy for it (and says why) but still everything else,
including the memory of a smoke-size run that ends within a fraction of a second."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.engine.collect import ENERGY_METRICS
from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import fast_lstm, open_store, run_farm, write_experiment

pytestmark = pytest.mark.integration


def test_charging_phone_gets_no_energy_but_short_runs_get_memory(virtual_phones, tmp_path: Path) -> None:
    # adreno-sd8gen2: production build, no root: the charging node cannot be written.
    phones = virtual_phones(count=1, profiles=["adreno-sd8gen2"])
    results = tmp_path / "results"
    experiment = write_experiment(
        tmp_path,
        "charging",
        fast_lstm(
            sweep="{backend: [cpu, gpu]}",
            measurement="{warmup: 1, iterations: 5, min_seconds: 0, max_seconds: 10, repetitions: 1}",
            params="hidden: 32, layers: 1, seq_len: 16, input_dim: 9, classes: 6, batch: 1",
            telemetry="{idle_baseline_s: 2}",
        ),
    )
    done = run_farm(phones.adb_port, results, "run", str(experiment), "--no-live")
    assert done.returncode == 0, done.stdout + done.stderr

    with open_store(results) as store:
        runs = run_store.list_runs(store, "charging")
        assert {run.state for run in runs} == {RunState.DONE}
        for run in runs:
            stored = {m.name: m.value for m in run_store.get_metrics(store, run.run_id)}
            assert stored["charging_disabled"] == 0.0, run.factors
            assert not ENERGY_METRICS & set(stored), (run.factors, sorted(ENERGY_METRICS & set(stored)))
            assert stored["rss_peak_mb"] > 1.0, run.factors  # watched from the program's start
            env = json.loads((results / (run.artifacts_dir or "") / "env.json").read_text())
            assert env["charging_disabled"] is False
            assert env["idle_baseline"]["power_mw"] is None
            assert "charging" in env["idle_baseline"]["note"]
        notes = store.query("SELECT message FROM events WHERE kind = 'quality' AND experiment = 'charging'")
        assert any("no idle baseline" in row["message"] for row in notes)
