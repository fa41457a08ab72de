"""A phone that joins a running sweep (a lab host back, a phone plugged in: the sweep's
refresh) gets the same plan-time skips as one present at the first plan: a gpu run on a phone
without OpenCL is stored SKIPPED with the reason and never tried, not queued to fail."""

from __future__ import annotations

from pathlib import Path

from farm.engine.planner import PhoneAbilities
from farm.engine.runner import _plan_joining
from farm.experiment import load
from farm.fleet.inventory import Phone, PhoneState
from farm.store import RunState, Store
from farm.store import runs as run_store
from tests.e2e.farm_cli import REPO


def _phone(device_id: str) -> Phone:
    host, serial = device_id.split("/")
    return Phone(device_id, host, serial, serial, PhoneState.ONLINE)


def test_a_phone_joining_without_opencl_gets_its_gpu_runs_skipped(tmp_path: Path) -> None:
    smoke = load(REPO / "experiments" / "smoke.yaml")
    key = smoke.qualified_name
    with Store.in_results(tmp_path / "results") as store:
        run_store.save_experiment(store, key, "{}", "digest", "smoke.yaml")
        ids = _plan_joining(
            store,
            smoke,
            ["local/FIRST"],
            [_phone("lab2/LATE")],
            {"lab2/LATE": PhoneAbilities(opencl=False, root=True)},
        )
        runs = {r.run_id: r for r in run_store.list_runs(store, key)}
    assert set(ids) == set(runs) and all(r.device_id == "lab2/LATE" for r in runs.values())
    # smoke: cpu and gpu at GPU load 0 and 0.5; without OpenCL only cpu at no load is possible
    skipped = [r for r in runs.values() if r.state is RunState.SKIPPED]
    pending = [r for r in runs.values() if r.state is RunState.PENDING]
    assert (len(skipped), len(pending)) == (3, 1)
    assert all("needs OpenCL" in (r.reason or "") and r.attempts == 0 for r in skipped)
