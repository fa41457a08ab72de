"""`farm run` on virtual phones as strict as the real devices their profiles name (issue 28).

pixel7: OpenCL only as libOpenCL-pixel.so (a -lOpenCL build does not start), and SELinux keeps
shell out of every thermal zone and the Mali utilisation and clock nodes. Every run of the smoke
study must still run there, the gpu ones through the Pixel wrapper, and each run must record and
say what telemetry the phone refused and what that cost (not carry on as if it had none)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import REPO, open_store, run_farm

pytestmark = pytest.mark.integration


PIXEL_LIBRARY = "/vendor/lib64/libOpenCL-pixel.so"


def test_smoke_on_a_pixel7_runs_through_its_wrapper_and_records_what_selinux_refused(
    virtual_phones, tmp_path: Path
) -> None:
    phones = virtual_phones(count=1, profiles=["pixel7"])
    results = tmp_path / "results"
    smoke = str(REPO / "experiments" / "smoke.yaml")
    done = run_farm(phones.adb_port, results, "run", smoke, "--no-live", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert summary["done"] == 4 and summary["failed"] == 0

    with open_store(results) as store:
        runs = run_store.list_runs(store, "smoke")
    assert {r.state for r in runs} == {RunState.DONE} and len(runs) == 4
    for run in runs:
        folder = results / (run.artifacts_dir or "")
        env = json.loads((folder / "env.json").read_text(encoding="utf-8"))
        lost = {loss["source"]: loss for loss in env["telemetry_lost"]}
        assert {"thermal_zones", "gpu_busy"} <= set(lost)
        assert lost["thermal_zones"]["errors"] == ["EACCES"]
        assert any(note.startswith("thermal_zones unreadable (EACCES") for note in env["notes"])
        info = next(
            json.loads(line)
            for line in (folder / "stdout.jsonl").read_text(encoding="utf-8").splitlines()
            if line.startswith("{") and json.loads(line)["event"] == "info"
        )
        if info["backend"] == "gpu":
            assert info["opencl_library"] == PIXEL_LIBRARY


def test_devices_proves_opencl_by_listing_devices_through_the_phones_own_library(
    virtual_phones, tmp_path: Path
) -> None:
    phones = virtual_phones(count=2, profiles=["pixel7", "no-opencl"])
    listed = run_farm(phones.adb_port, tmp_path / "results", "devices", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["serial"]: row for row in json.loads(listed.stdout)}
    pixel, bare = (rows[p.serial] for p in phones)
    assert pixel["opencl"] is True and pixel["opencl_devices"]
    assert {d["library"] for d in pixel["opencl_devices"]} == {PIXEL_LIBRARY}
    assert bare["opencl"] is False and bare["opencl_devices"] == []
