"""The relative cooldown gate through `farm run` on a virtual phone: with
`conditions.cooldown.within_c_of_idle`, a run waits until the phone is within that many degrees of
the temperature farm read when it prepared the phone, even though the absolute limit is far away.
The truth is the phone's own ground-truth log (the physics' die temperature, which the hot
profile's hottest zone shows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import fast_lstm, open_store, run_farm, write_experiment

pytestmark = pytest.mark.integration

WITHIN_C = 2.0


def _window_ns(folder: Path) -> tuple[int, int]:
    """First and last CLOCK_MONOTONIC stamp the benchmark printed (the phone's clock is ours)."""
    stamps = []
    for line in (folder / "stdout.jsonl").read_text().splitlines():
        event = json.loads(line)
        stamps += [event[k] for k in ("t_ns", "t_start_ns", "t_end_ns") if isinstance(event.get(k), int)]
    return min(stamps), max(stamps)


def test_a_run_waits_until_the_phone_is_within_n_degrees_of_its_idle_temperature(
    virtual_phones, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["adreno-sd888-hot"])
    results = tmp_path / "results"
    # Two runs of ~3 s of few-ms LSTM iterations: the first heats the hot profile by several degrees.
    body = fast_lstm(
        "{hidden: [128, 129]}",
        measurement="{warmup: 1, iterations: 3, min_seconds: 3, max_seconds: 30, repetitions: 1}",
        params="layers: 1, seq_len: 32, input_dim: 32, classes: 6, batch: 1, backend: cpu",
    ).replace(
        "cooldown: {max_temp_c: 90, timeout_s: 5}",
        f"cooldown: {{max_temp_c: 90, within_c_of_idle: {WITHIN_C}, timeout_s: 120}}",
    )
    spec = write_experiment(tmp_path, "cool", body)
    done = run_farm(phones.adb_port, results, "run", str(spec), "--no-live", timeout_s=400)
    assert done.returncode == 0, done.stderr
    with open_store(results) as store:
        runs = run_store.list_runs(store, "cool")
    assert [r.state for r in runs] == [RunState.DONE, RunState.DONE], [(r.state, r.reason) for r in runs]
    env = {r.run_id: json.loads((results / (r.artifacts_dir or "") / "env.json").read_text()) for r in runs}
    windows = {r.run_id: _window_ns(results / (r.artifacts_dir or "")) for r in runs}
    first, second = sorted(runs, key=lambda r: windows[r.run_id][0])
    truth = [json.loads(line) for line in phones[0].ground_truth.read_text().splitlines() if line.strip()]
    # Idle: the phone before the first run started (farm read its idle temperature then).
    start_ns, end_ns = windows[first.run_id]
    idle_c = max(r["temp_c"] for r in truth if r["t_ns"] < start_ns)
    hot_c = max(r["temp_c"] for r in truth if start_ns <= r["t_ns"] <= end_ns)
    assert hot_c > idle_c + WITHIN_C + 1, f"the first run heats the phone past the gate: {idle_c} -> {hot_c}"
    assert float(env[first.run_id]["cooldown_waited_s"]) < 1.0, env[first.run_id]  # it started at idle
    # The second run waited for the phone to cool, and started within the gate, cooler than the
    # first run left it; the absolute limit (90 C) alone would not have waited at all.
    waited_s = float(env[second.run_id]["cooldown_waited_s"])
    started_c = float(env[second.run_id]["temperature_start_c"])
    assert waited_s > 1.0, env[second.run_id]
    assert started_c <= idle_c + WITHIN_C + 0.1, (started_c, idle_c)
    second_start_ns = windows[second.run_id][0]
    at_start = [r["temp_c"] for r in truth if end_ns < r["t_ns"] <= second_start_ns]
    assert at_start and at_start[-1] < hot_c - 1.0, (
        f"the second run began cooler than {hot_c}: {at_start[-3:]}"
    )
