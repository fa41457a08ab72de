"""farm's own on-phone commands work under Android's userland (mksh + toybox, no GNU tools), on a
rooted (adreno-sd865) and an unrooted (adreno-sd8gen2) phone: each is run through farm's real
functions over adb, and its effect is checked on the phone.

What farm runs through DeviceSession.shell/script, by module, and where it is covered:
  engine/lifecycle.py  read_probe, prepare_phone (deploy, stay_awake)               here
  engine/conditions.py read_temperature_c, battery_pct (power_supply capacity), charging control   here
  engine/collect.py    environment_snapshot's governors/thermal/charging script     here
  device/controls.py   write_as_root (direct, su -c, su 0), charging, stay_awake   here
  engine/onphone.py    RunDir.create, Background start/wait/exit/stop             here
  engine/recovery.py   kill_stale_processes, recover_phone (battery reset)         here (and
                       tests/integration/engine/test_recovery_phone.py)
  device/session.py    push_cached, sha256, pull_many, start/kill/stop, v1/v2     tests/integration/
                                                                                   device/
  fleet/inventory.py   getprop, dumpsys battery                                     here (identify)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from vphone.testing.phones import PhoneFactory

from farm.device import controls
from farm.device.session import DeviceSession
from farm.engine import conditions, lifecycle
from farm.engine.collect import environment_snapshot
from farm.engine.deploy import deploy
from farm.engine.model import PreparedPhone
from farm.engine.onphone import Background, RunDir
from farm.engine.recovery import kill_stale_processes, recover_phone
from farm.errors import DevicePermanentError
from farm.experiment.programs import Program
from farm.fleet.endpoint import AdbState, LocalAdbEndpoint
from farm.fleet.inventory import PhoneState, identify
from farm.store import Store

pytestmark = pytest.mark.integration

PROFILES = {"rooted": "adreno-sd865", "unrooted": "adreno-sd8gen2"}


@dataclass(frozen=True)
class Prepared:
    prepared: PreparedPhone
    store: Store

    @property
    def session(self) -> DeviceSession:
        return self.prepared.session


@pytest.fixture(scope="module")
def phones(
    module_virtual_phones: PhoneFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Prepared]]:
    started = module_virtual_phones(count=2, profiles=list(PROFILES.values()))
    endpoint = LocalAdbEndpoint(started.adb_port)
    store = Store(tmp_path_factory.mktemp("store") / "farm.db").open()
    made = {}
    try:
        for kind, phone in zip(PROFILES, started, strict=True):
            identity = identify(endpoint, phone.adb_serial, AdbState.DEVICE)
            assert identity.state is PhoneState.ONLINE and identity.serial == phone.serial
            session = DeviceSession(
                endpoint.device(phone.adb_serial), identity.device_id, default_timeout_s=30
            )
            made[kind] = Prepared(lifecycle.prepare_phone(session, identity, Program.GPULOAD, store), store)
        yield made
    finally:
        store.close()


@pytest.mark.parametrize("kind", PROFILES)
def test_probe_sees_the_phone_as_it_is(phones: dict[str, Prepared], kind: str) -> None:
    caps = phones[kind].prepared.caps
    assert caps.root.available is (kind == "rooted")
    assert caps.has_opencl and caps.gpu.family.value == "adreno"
    control = conditions.charging_control(caps)
    assert (control is not None) is (kind == "rooted")  # the node needs root to write
    assert conditions.temperature_nodes(caps)


@pytest.mark.parametrize("kind", PROFILES)
def test_stay_awake_reached_the_phone(phones: dict[str, Prepared], kind: str) -> None:
    session = phones[kind].session
    out = session.shell(["settings", "get", "global", "stay_on_while_plugged_in"], check=True).stdout
    assert out.strip() == "7"  # svc power stayon true


@pytest.mark.parametrize("kind", PROFILES)
def test_temperature_battery_gate_and_snapshot_scripts(
    phones: dict[str, Prepared], kind: str, tmp_path: Path
) -> None:
    prepared = phones[kind].prepared
    temp = conditions.read_temperature_c(prepared)
    assert temp is not None and 15.0 < temp < 70.0
    level = conditions.battery_pct(prepared)
    assert level is not None and 0 <= level <= 100
    # farm's own readings never freeze BatteryService (`dumpsys battery unplug`: issue 28)
    assert "(UPDATES STOPPED" not in prepared.session.shell(["dumpsys", "battery"]).stdout
    env = environment_snapshot(prepared)
    assert env.error is None
    assert env.thermal_raw and all(value.lstrip("-").isdigit() for value in env.thermal_raw.values())
    if kind == "rooted":
        assert env.charging_node_value in ("0", "1")
    recover_phone(phones[kind].store, prepared.session, prepared.phone.device_id)
    assert "(UPDATES STOPPED" not in prepared.session.shell(["dumpsys", "battery"]).stdout


def test_charging_control_as_root_round_trips(phones: dict[str, Prepared]) -> None:
    prepared = phones["rooted"].prepared
    control = conditions.charging_control(prepared.caps)
    assert control is not None
    try:
        controls.set_charging(prepared.session, control, enabled=False)
        assert controls.charging_enabled(prepared.session, control) is False
    finally:
        controls.set_charging(prepared.session, control, enabled=True)
    assert controls.charging_enabled(prepared.session, control) is True
    assert prepared.session.facts["root_write"] in ("su -c", "su 0")  # adbd is not root here


def test_root_writes_fail_cleanly_on_the_unrooted_phone(phones: dict[str, Prepared]) -> None:
    session = phones["unrooted"].session
    with pytest.raises(DevicePermanentError, match="needs root"):
        controls.write_as_root(session, "/sys/class/power_supply/battery/input_suspend", "1")


@pytest.mark.parametrize("kind", PROFILES)
def test_a_background_program_runs_in_its_run_folder_and_reports(
    phones: dict[str, Prepared], kind: str
) -> None:
    prepared = phones[kind].prepared
    run_dir = RunDir.of(f"commands-{kind}")
    run_dir.create(prepared.session)
    idle = deploy(prepared.session, ["idle"], prepared.phone.abis)["idle"].phone_path
    with Background(prepared.session, run_dir, "idle", [idle, "--seconds=0.2"]) as program:
        assert program.wait(timeout_s=30) == 0
        events = [json.loads(line) for line in program.read_stdout().splitlines() if line.startswith("{")]
    assert events and events[-1]["event"] == "result"
    with Background(prepared.session, run_dir, "long", [idle, "--seconds=300"]) as program:
        assert program.pid is not None and prepared.session.is_running(program.pid)
    assert not prepared.session.is_running(program.pid)  # stopped on exit (TERM, then KILL)
    assert kill_stale_processes(prepared.session) == []  # nothing of farm left running
