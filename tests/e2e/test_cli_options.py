"""The `farm run` and `farm status` options the other end-to-end tests do not use, through the real
command on a virtual phone: --variant, a resume that redoes nothing, --fresh; status --events and
--watch (from another process while the sweep runs)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.farm_cli import (
    farm_argv,
    farm_env,
    fast_lstm,
    open_store,
    run_farm,
    start_farm,
    write_experiment,
)

pytestmark = pytest.mark.integration

# A cooldown that cannot be met (1 °C, no wait): every run notes it, so the sweep has events to count.
BODY = (
    fast_lstm("{hidden: [8, 16]}").replace("max_temp_c: 90, timeout_s: 5", "max_temp_c: 1, timeout_s: 0")
    + "variants:\n  one: {sweep: {hidden: [12]}}\n"
)


def _attempts(results: Path, experiment: str) -> list[tuple[str, int, float]]:
    with open_store(results) as store:
        rows = store.query(
            "SELECT a.run_id, a.attempt, a.started_at FROM attempts a JOIN runs r ON r.run_id = a.run_id "
            "WHERE r.experiment = ? ORDER BY a.run_id",
            (experiment,),
        )
    return [(row["run_id"], row["attempt"], row["started_at"]) for row in rows]


def test_variant_resume_fresh_and_status_events_and_watch(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=1)
    port, results = phones.adb_port, tmp_path / "results"
    spec = write_experiment(tmp_path, "opts", BODY)

    # --variant: its own experiment (name.variant) with the variant's sweep
    variant = run_farm(port, results, "run", str(spec), "--variant", "one", "--no-live", "--json")
    assert variant.returncode == 0, variant.stdout + variant.stderr
    assert json.loads(variant.stdout)["experiment"] == "opts.one"
    with open_store(results) as store:
        factors = [
            r["factors_json"]
            for r in store.query("SELECT factors_json FROM runs WHERE experiment = ?", ("opts.one",))
        ]
    assert [json.loads(f) for f in factors] == [{"hidden": 12}]

    # the base file, watched from another process while it runs; then its events
    sweep = start_farm(port, results, "run", str(spec), "--no-live")
    try:
        deadline = time.monotonic() + 120
        while not (results / "farm.db").exists() or not _has_experiment(results, "opts"):
            assert sweep.poll() is None and time.monotonic() < deadline, "the sweep did not start"
            time.sleep(0.2)
        watch = subprocess.run(
            farm_argv("status", "opts", "--watch"),
            env=farm_env(port, results),
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        sweep_out, _ = sweep.communicate(timeout=240)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == 0, sweep_out
    # not a terminal: plain lines, and it ended by itself once every run had finished
    assert watch.returncode == 0, watch.stdout + watch.stderr
    assert watch.stdout.splitlines()[-1].startswith("2/2 runs (100%): 2 done, 0 failed"), watch.stdout
    first = _attempts(results, "opts")
    assert [attempt for _run, attempt, _at in first] == [1, 1]

    events = run_farm(port, results, "status", "opts", "--events", "1", "--json")
    assert events.returncode == 0, events.stderr
    (shown,) = json.loads(events.stdout)["experiments"]
    assert len(shown["events"]) == 1 and shown["states"]["DONE"] == 2
    every = run_farm(port, results, "status", "opts", "--events", "50", "--json")
    with open_store(results) as store:
        stored = store.query("SELECT COUNT(*) AS n FROM events WHERE experiment = 'opts'")[0]["n"]
    assert len(json.loads(every.stdout)["experiments"][0]["events"]) == stored >= 3  # 2 notes + 1

    # the same command again resumes: nothing is redone; --fresh forgets and runs everything again
    resumed = run_farm(port, results, "run", str(spec), "--no-live")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _attempts(results, "opts") == first
    fresh = run_farm(port, results, "run", str(spec), "--no-live", "--fresh")
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    again = _attempts(results, "opts")
    assert [(run, attempt) for run, attempt, _at in again] == [(run, 1) for run, _a, _at in first]
    assert all(new > old for (_r, _a, new), (_r2, _a2, old) in zip(again, first, strict=True))


def _has_experiment(results: Path, name: str) -> bool:
    with open_store(results) as store:
        return bool(store.query("SELECT 1 FROM runs WHERE experiment = ?", (name,)))
