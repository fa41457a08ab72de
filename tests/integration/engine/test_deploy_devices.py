"""Deployment and `farm devices` against real virtual phones and the real adb server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from farm.device.android import parse_dumpsys_battery
from farm.device.session import BIN_DIR, DeviceSession
from farm.engine.deploy import deploy
from farm.errors import EnvironmentProblem
from farm.store import Store, ownership

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]


def _farm(
    adb_port: int, *args: str, results: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "farm", *args, "--adb-port", str(adb_port), "--results", str(results)],
        env={**os.environ, **(env or {})},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_deploy_is_content_addressed_cached_and_executable(virtual_phones) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1)
    session = DeviceSession(phones[0].device(phones.client()), "local/x", default_timeout_s=30)
    abi = session.shell(["getprop", "ro.product.cpu.abi"]).stdout.strip()
    first = deploy(session, ["lstm", "farm-sampler"], [abi])
    assert all(d.pushed for d in first.values())
    lstm = first["lstm"]
    assert lstm.phone_path == f"{BIN_DIR}/{lstm.sha256[:16]}/lstm"
    assert session.sha256(lstm.phone_path) == lstm.sha256
    assert session.shell([lstm.phone_path, "--help"]).ok
    again = deploy(session, ["lstm"], [abi])
    assert not again["lstm"].pushed and again["lstm"].phone_path == lstm.phone_path
    with pytest.raises(EnvironmentProblem, match="no build of lstm"):
        deploy(session, ["lstm"], ["mips"])


@pytest.mark.serial  # a lease lives by heartbeats, which a starved farm misses
def test_farm_devices_lists_identity_state_capabilities_and_leases(virtual_phones, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=2, profiles=["adreno-nexus6p", "mali-tensor"])
    results = tmp_path / "results"
    nexus_device = phones[0].device(phones.client())
    # The true level, read the phone's own way just before and after: it only rises while the
    # phone charges (adb keeps it plugged), so what farm reports must lie between the two.
    level_before = parse_dumpsys_battery(nexus_device.shell(["dumpsys", "battery"])).level_pct
    listed = _farm(phones.adb_port, "devices", "--json", results=results)
    level_after = parse_dumpsys_battery(nexus_device.shell(["dumpsys", "battery"])).level_pct
    assert listed.returncode == 0, listed.stderr
    rows = {row["id"]: row for row in json.loads(listed.stdout)}
    assert set(rows) == {f"local/{p.serial}" for p in phones}
    nexus = rows[f"local/{phones[0].serial}"]
    assert nexus["state"] == "online" and nexus["model"] == "Nexus 6P"
    assert nexus["gpu_family"] == "adreno" and nexus["root"] is True and nexus["opencl"] is True
    assert level_before is not None and level_after is not None
    assert level_before <= nexus["battery_pct"] <= level_after and nexus["temperature_c"] > 0
    assert rows[f"local/{phones[1].serial}"]["gpu_family"] == "mali"
    # Its properties as getprop answers them, every one of them (a virtual phone's slow-motion
    # factor among them when its SoC's proportions are on).
    model = nexus_device.shell(["getprop", "ro.product.model"]).strip()
    assert model and nexus["props"]["ro.product.model"] == model
    slowdown = nexus_device.shell(["getprop", "ro.vphone.slowdown"]).strip()
    assert nexus["props"].get("ro.vphone.slowdown", "") == slowdown

    # A phone leased by a live farm process shows as leased.
    with Store.in_results(results) as store:
        execution = ownership.start_execution(store, "x", ["farm"], "0")
        assert ownership.acquire_lease(store, f"local/{phones[0].serial}", execution)
        again = _farm(phones.adb_port, "devices", "--json", "--no-probe", results=results)
        ownership.finish_execution(store, execution, "finished")
    states = {row["id"]: row["state"] for row in json.loads(again.stdout)}
    assert states[f"local/{phones[0].serial}"] == "leased"
    assert states[f"local/{phones[1].serial}"] == "online"


def test_run_exit_codes_for_bad_input_and_no_eligible_phone(virtual_phones, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nbenchmark: {program: lstm}\nsweep: {hidden: 64}\n")
    ran = _farm(phones.adb_port, "run", str(bad), results=results)
    assert ran.returncode == 2 and f"{bad}:3" in ran.stderr and "Traceback" not in ran.stderr
    smoke = str(REPO / "experiments" / "smoke.yaml")
    none = _farm(phones.adb_port, "run", smoke, "--devices", "no-such-phone", results=results)
    assert none.returncode == 3 and "eligible" in none.stderr and "Traceback" not in none.stderr
    # No build for the phone's ABI: the phone is unusable, the summary says why, runs stay to resume.
    unbuilt = _farm(phones.adb_port, "run", smoke, results=results, env={"FARM_HOME": str(tmp_path)})
    assert unbuilt.returncode == 1, unbuilt.stdout + unbuilt.stderr
    assert "no build of farm-probe" in unbuilt.stderr and "make kernels" in unbuilt.stderr
    assert "run the same command again" in unbuilt.stderr
