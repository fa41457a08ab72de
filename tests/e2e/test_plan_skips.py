"""A phone without OpenCL gets no gpu runs and no background GPU load: SKIPPED at plan time with
the reason, shown by --dry-run, stored so, and the runs it can do run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import REPO, open_store, run_farm

pytestmark = pytest.mark.integration


def test_a_phone_without_opencl_skips_its_gpu_runs_at_plan_time(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=1, profiles=["no-opencl"])
    results = tmp_path / "results"
    smoke = str(REPO / "experiments" / "smoke.yaml")

    dry = run_farm(phones.adb_port, results, "run", smoke, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    # smoke: cpu and gpu at load 0 and 0.5; only cpu at no load is possible without OpenCL
    assert "= 4 runs, 3 of them SKIPPED (below)" in dry.stdout
    assert "2 runs: backend gpu needs OpenCL, and this phone has no OpenCL driver" in dry.stdout
    assert "1 runs: a background GPU load needs OpenCL" in dry.stdout

    done = run_farm(phones.adb_port, results, "run", smoke, "--no-live", "--json")
    summary = json.loads(done.stdout)
    assert (summary["planned"], summary["done"], summary["failed"]) == (4, 1, 3), done.stderr
    with open_store(results) as store:
        runs = run_store.list_runs(store, "smoke")
    skipped = [r for r in runs if r.state is RunState.SKIPPED]
    assert len(skipped) == 3 and all("needs OpenCL" in (r.reason or "") for r in skipped)
    assert all(r.attempts == 0 for r in skipped)  # never tried
