"""Pure parts of the engine: retry decisions, phone selection, capabilities from the probe,
gpuload output, planned rows for the store."""

from __future__ import annotations

import pytest

from farm.device.controls import charging_control_for
from farm.engine.caps import caps_from_probe
from farm.engine.onphone import last_achieved_load, load_argv
from farm.engine.planner import plan
from farm.engine.runner import matches_selector, planned_rows, select_phones
from farm.engine.scheduler import gates_of, retry_decision
from farm.fleet.inventory import Phone, PhoneState
from farm.spec import load_text
from farm.store import Outcome, RunState

SPEC = """
name: t
benchmark: {program: lstm, params: {seq_len: 4}}
sweep: {backend: [cpu, gpu], gpu_load: [0, 0.5]}
measurement: {repetitions: 2}
gpu_load: {settle_s: 2, tolerance: 0.1}
retries: {max_attempts: 3, on: [lost]}
"""


@pytest.mark.parametrize(
    ("outcome", "attempts", "on", "expected"),
    [
        (Outcome.DONE, 1, ["timeout", "lost"], RunState.DONE),
        (Outcome.FAILED, 1, ["timeout", "lost"], RunState.FAILED),  # benchmark errors are final
        (Outcome.TIMEOUT, 1, ["timeout"], RunState.PENDING),
        (Outcome.TIMEOUT, 3, ["timeout"], RunState.FAILED),  # limit reached
        (Outcome.TIMEOUT, 1, ["lost"], RunState.FAILED),  # timeouts not retried by this spec
        (Outcome.LOST, 2, ["lost"], RunState.PENDING),
        (Outcome.LOST, 3, ["lost"], RunState.FAILED),
        (Outcome.INTERRUPTED, 99, [], RunState.PENDING),  # never counts, never fails
    ],
)
def test_retry_decision(outcome: Outcome, attempts: int, on: list[str], expected: RunState) -> None:
    assert retry_decision(outcome, attempts, 3, on) is expected


def _phone(serial: str, state: PhoneState = PhoneState.ONLINE, model: str = "Pixel 7") -> Phone:
    return Phone(f"local/{serial}", "local", serial, f"127.0.0.1:{serial[-4:]}", state, model=model)


def test_selectors_match_identity_serial_adb_serial_and_model_with_globs() -> None:
    phone = _phone("VP6521")
    assert matches_selector(phone, "local/VP6521")
    assert matches_selector(phone, "VP65*")
    assert matches_selector(phone, "127.0.0.1:6521")
    assert matches_selector(phone, "Pixel*")
    assert not matches_selector(phone, "remote/*")


def test_select_phones_skips_offline_and_leased_and_honours_the_spec() -> None:
    experiment = load_text(SPEC + "devices: {model: Pixel 7}\n")
    phones = [
        _phone("A0001"),
        _phone("B0002", PhoneState.LEASED),
        _phone("C0003", PhoneState.OFFLINE),
        _phone("D0004", model="Nexus 6P"),
        _phone("E0005"),
    ]
    assert [p.serial for p in select_phones(experiment, phones, [])] == ["A0001", "E0005"]
    assert [p.serial for p in select_phones(experiment, phones, ["E*"])] == ["E0005"]


def test_planned_rows_keep_the_plan_ids_order_and_binding() -> None:
    experiment = load_text(SPEC)
    planned = plan(experiment, ["local/A", "local/B"])
    rows = planned_rows(planned)
    assert [r.run_id for r in rows] == [r.run_id for r in planned.runs]
    assert [r.seq for r in rows] == list(range(len(rows)))
    assert len(rows) == 4 * 2 * 2 and {r.device_id for r in rows} == {"local/A", "local/B"}
    assert all(dict(r.factors)["backend"] in ("cpu", "gpu") for r in rows)


def test_gates_come_from_the_experiment() -> None:
    gates = gates_of(load_text(SPEC))
    assert gates.settle_s == 2 and gates.tolerance == pytest.approx(0.1)
    assert gates.disable_charging is True


PROBE = {
    "root": {"uid": 2000, "adbd_root": False, "su_path": "/system/xbin/su", "su_works": True},
    "opencl": {"libraries": ["/vendor/lib64/libOpenCL.so"], "found": True},
    "battery": {
        "dir": "/sys/class/power_supply/battery",
        "current_now": {
            "path": "/sys/class/power_supply/battery/current_now",
            "present": True,
            "readable": True,
        },
        "voltage_now": {
            "path": "/sys/class/power_supply/battery/voltage_now",
            "present": True,
            "readable": False,
        },
        "temp": {"path": "/sys/class/power_supply/battery/temp", "present": True, "readable": True},
    },
    "charging_control": [
        {
            "path": "/sys/class/power_supply/battery/charging_enabled",
            "present": True,
            "writable": False,
            "enable_value": "1",
            "disable_value": "0",
        },
    ],
    "gpu": {
        "family": "adreno",
        "busy": {
            "path": "/sys/class/kgsl/kgsl-3d0/gpubusy",
            "present": True,
            "readable": True,
            "format": "kgsl",
        },
        "freq": None,
    },
    "thermal": [
        {
            "path": "/sys/class/thermal/thermal_zone0/temp",
            "present": True,
            "readable": True,
            "zone": "thermal_zone0",
            "type": "gpuss-0-usr",
        },
        {
            "path": "/sys/class/thermal/thermal_zone1/temp",
            "present": True,
            "readable": False,
            "zone": "thermal_zone1",
            "type": "cpu",
        },
    ],
}


def test_caps_from_probe_picks_usable_nodes_only() -> None:
    caps = caps_from_probe(PROBE)
    assert caps.rooted and caps.opencl and caps.gpu_family == "adreno"
    assert caps.charging is not None and caps.charging.disable_value == "0"  # writable through su
    assert caps.gpu_busy is not None and caps.gpu_busy.format == "kgsl"
    names = [s.name for s in caps.sampler_sources()]
    assert "battery.voltage_now" not in names  # unreadable
    assert "thermal.gpuss-0-usr" in names and "thermal.cpu" not in names
    assert "thermal.battery" in names  # battery temp stands in for a battery zone


def test_no_charging_control_without_root_or_a_writable_node() -> None:
    unrooted = {**PROBE, "root": {"uid": 2000, "adbd_root": False, "su_works": False}}
    assert caps_from_probe(unrooted).charging is None
    assert caps_from_probe({}).charging is None and caps_from_probe({}).gpu_busy is None


def test_last_achieved_load_reads_fractions_and_percentages_and_skips_garbage() -> None:
    text = '{"event":"info"}\n{"event":"load","achieved":0.31}\nnot json\n{"event":"load","achieved":48}\n'
    assert last_achieved_load(text) == pytest.approx(0.48)
    assert last_achieved_load('{"event":"info"}\n') is None


def test_load_argv_uses_the_busy_counter_when_known() -> None:
    caps = caps_from_probe(PROBE)
    argv = load_argv("/bin/gpuload", 0.5, "compute", caps.gpu_busy)
    assert "--target=0.5" in argv and "--busy-path=/sys/class/kgsl/kgsl-3d0/gpubusy" in argv
    assert not any(a.startswith("--busy-path") for a in load_argv("/bin/gpuload", 0.5, "compute", None))


def test_charging_nodes_known_by_path_or_name() -> None:
    control = charging_control_for("/sys/class/power_supply/battery/input_suspend")
    assert control is not None and (control.enable_value, control.disable_value) == ("0", "1")
    vendor = charging_control_for("/sys/class/power_supply/other/charging_enabled")
    assert vendor is not None and vendor.enable_value == "1"
    assert charging_control_for("/sys/whatever") is None


def test_select_by_gpu_family_asks_the_probe_only_when_the_spec_needs_it() -> None:
    asked: list[str] = []

    def family_of(phone: Phone) -> str | None:
        asked.append(phone.serial)
        return "mali" if phone.serial.startswith("M") else "adreno"

    phones = [_phone("M0001"), _phone("A0002")]
    by_family = load_text(SPEC + "devices: {gpu_family: mali}\n")
    assert [p.serial for p in select_phones(by_family, phones, [], gpu_family_of=family_of)] == ["M0001"]
    asked.clear()
    assert len(select_phones(load_text(SPEC), phones, [], gpu_family_of=family_of)) == 2
    assert asked == []
