"""Per-layer results end to end: cnn on one virtual phone (PoCL, 32x32 input, g in {1, 4}, one run
each) stores every layer of each run in the layers table exactly as the program's own `layer`
events say (its stdout.jsonl in the run folder), and the report shows them per layer with the best
g per layer and phone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.store import runs as run_store
from farm.store.layers import experiment_layers
from tests.e2e.farm_cli import open_store, run_farm, write_experiment

pytestmark = pytest.mark.integration

CNN = (
    "benchmark: {program: cnn, params: {model: squeezenet1.1, backend: gpu, input_size: 32}}\n"
    "sweep: {g: [1, 4]}\n"
    "measurement: {warmup: 1, iterations: 3, min_seconds: 0, max_seconds: 10, repetitions: 1}\n"
    "conditions: {cooldown: {max_temp_c: 90, timeout_s: 5}, min_battery_pct: 1}\n"
    "telemetry: {idle_baseline_s: 0, power: none, disable_charging: false}\n"
)


def test_cnn_layers_are_stored_per_run_and_reported(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    done = run_farm(
        phones.adb_port, results, "run", str(write_experiment(tmp_path, "cnn_layers", CNN)), "--no-live"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with open_store(results) as store:
        runs = run_store.list_runs(store, "cnn_layers")
        stored = experiment_layers(store, "cnn_layers")
    assert len(runs) == 2 and set(stored) == {run.run_id for run in runs}
    for run in runs:
        lines = (results / (run.artifacts_dir or "") / "stdout.jsonl").read_text().splitlines()
        events = [e for e in map(json.loads, lines) if e.get("event") == "layer"]
        layers = stored[run.run_id]
        assert len(layers) == len(events) == 30
        for layer, event in zip(layers, events, strict=True):
            assert (layer.index, layer.name, layer.kind) == (event["index"], event["name"], event["kind"])
            assert layer.time_ms == pytest.approx(event["time_ns"] / 1e6)
            assert layer.g == event.get("g")
        convs = [x for x in layers if x.kind == "conv"]
        assert len(convs) == 26 and all(x.gemm_mnk is not None for x in convs)
        # g=4 falls back where 4 does not divide a layer's maps; it never exceeds what was asked.
        asked = run.factors["g"]
        assert all(x.g is not None and 1 <= x.g <= asked for x in convs)
    out = tmp_path / "report"
    report = run_farm(phones.adb_port, results, "report", "cnn_layers", "--out", str(out))
    assert report.returncode == 0, report.stderr
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Per-layer results" in html and "Best g per layer and phone" in html
    assert html.count("<td>fire9/expand3x3</td>") == 3  # a row per run's cell, one in the best-g table
    assert (out / "figures" / "layer_time_ms_vs_cell_per_device.svg").is_file()
