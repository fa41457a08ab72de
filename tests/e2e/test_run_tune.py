"""`benchmark.tune: true` end to end: farm tunes gemm once on a virtual phone before the sweep,
stores what it chose with the run (env.json `tuned`), and the run uses the tuned cache entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.store import RunState
from farm.store import events as store_events
from farm.store import runs as run_store
from tests.e2e.farm_cli import open_store, run_farm, write_experiment

pytestmark = pytest.mark.integration


def test_tune_once_per_phone_then_the_run_uses_it(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    spec = write_experiment(
        tmp_path,
        "tuned",
        """\
        benchmark:
          program: gemm
          params: {m: 96, n: 96, k: 96, backend: gpu, kernel: packed}
          tune: true
          tune_budget_s: 1
        measurement: {warmup: 1, iterations: 5, min_seconds: 0, max_seconds: 10, repetitions: 1}
        telemetry: {idle_baseline_s: 0}
        """,
    )
    done = run_farm(phones.adb_port, results, "run", str(spec), "--no-live", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    with open_store(results) as store:
        (run,) = run_store.list_runs(store, "tuned")
        tune_events = [e for e in store_events.recent(store, "tuned", 100) if e.kind == "tune"]
    assert run.state is RunState.DONE and len(tune_events) == 1
    folder = results / (run.artifacts_dir or "")
    (choice,) = json.loads((folder / "env.json").read_text())["tuned"]
    assert choice["args"] == ["--backend=gpu", "--k=96", "--kernel=packed", "--m=96", "--n=96"]
    assert choice["tune_source"] == "tuned" and choice["tune_params"]
    infos = [
        json.loads(line) for line in (folder / "stdout.jsonl").read_text().splitlines() if '"info"' in line
    ]
    assert infos[0]["tune_source"] == "cache" and infos[0]["tune_params"] == choice["tune_params"]
