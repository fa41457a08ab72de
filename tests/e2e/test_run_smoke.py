"""`farm run experiments/smoke.yaml` on three virtual phones, end to end through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import REPO, open_store, run_farm

pytestmark = pytest.mark.integration


def test_smoke_on_three_phones_stores_every_planned_run_with_artifacts(
    virtual_phones, tmp_path: Path
) -> None:
    phones = virtual_phones(count=3, profiles=["adreno-nexus6p", "adreno-sd8gen2", "mali-tensor"])
    results = tmp_path / "results"
    smoke = str(REPO / "experiments" / "smoke.yaml")

    dry = run_farm(phones.adb_port, results, "run", smoke, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)["planned"]
    assert planned == 4 * 3  # 2 backends x 2 loads x 1 repetition, on every phone

    done = run_farm(phones.adb_port, results, "run", smoke, "--no-live", "--json")
    summary = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert summary["done"] == planned and summary["failed"] == 0

    with open_store(results) as store:
        runs = run_store.list_runs(store, "smoke")
        assert len(runs) == planned
        assert {r.state for r in runs} == {RunState.DONE}
        assert {r.ran_on for r in runs} == {f"local/{p.serial}" for p in phones}
        for run in runs:
            folder = results / (run.artifacts_dir or "")
            assert (folder / "stdout.jsonl").stat().st_size > 0
            assert (folder / "env.json").is_file()
            assert any(m.name == "latency_median_ms" for m in run_store.get_metrics(store, run.run_id))

    status = run_farm(phones.adb_port, results, "status", "smoke", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["experiments"][0]["states"]["DONE"] == planned

    report_dir = tmp_path / "report"
    report = run_farm(phones.adb_port, results, "report", "smoke", "--out", str(report_dir))
    assert report.returncode == 0, report.stderr
    html = (report_dir / "report.html").read_text(encoding="utf-8")
    assert "Smoke latency vs background GPU load" in html and "<svg" in html
    assert list((report_dir / "figures").glob("*gpu_load*.svg"))
    assert (report_dir / "report.md").is_file()
