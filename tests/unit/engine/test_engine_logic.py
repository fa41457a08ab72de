"""Pure parts of the engine: retry decisions, phone selection, what the engine takes from the
phone's Capabilities (farm.telemetry.probe), gpuload output, planned rows for the store."""

from __future__ import annotations

import pytest

from farm.device.controls import charging_control_for
from farm.engine.attempt_rules import retry_decision
from farm.engine.conditions import charging_control, temperature_nodes
from farm.engine.onphone import gpu_busy_path, last_achieved_load, load_argv
from farm.engine.planner import plan
from farm.engine.runner import matches_selector, planned_rows, select_phones
from farm.engine.scheduler import gates_of
from farm.experiment import load_text
from farm.experiment.sections import Intensity, RetryOn
from farm.fleet.inventory import Phone, PhoneState
from farm.store import Outcome, RunState
from farm.telemetry.probe import GpuFamily, capabilities_of
from farm.telemetry.sampler import SourceFormat, default_sources

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
        (Outcome.DONE, 1, [RetryOn.TIMEOUT, RetryOn.LOST], RunState.DONE),
        (Outcome.FAILED, 1, [RetryOn.TIMEOUT, RetryOn.LOST], RunState.FAILED),  # benchmark errors are final
        (Outcome.TIMEOUT, 1, [RetryOn.TIMEOUT], RunState.PENDING),
        (Outcome.TIMEOUT, 3, [RetryOn.TIMEOUT], RunState.FAILED),  # limit reached
        (Outcome.TIMEOUT, 1, [RetryOn.LOST], RunState.FAILED),  # timeouts not retried by this spec
        (Outcome.LOST, 2, [RetryOn.LOST], RunState.PENDING),
        (Outcome.LOST, 3, [RetryOn.LOST], RunState.FAILED),
        (Outcome.INTERRUPTED, 99, [], RunState.PENDING),  # never counts, never fails
    ],
)
def test_retry_decision(outcome: Outcome, attempts: int, on: list[RetryOn], expected: RunState) -> None:
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
    "probe_version": 1,
    "root": {"uid": 2000, "adbd_root": False, "su_path": "/system/xbin/su", "su_works": True},
    "opencl": {"libraries": ["/vendor/lib64/libOpenCL.so"], "found": True},
    "battery": {
        "dir": "/sys/class/power_supply/battery",
        "current_now": {
            "path": "/sys/class/power_supply/battery/current_now",
            "present": True,
            "readable": True,
            "value": "-250000",
            "unit_hint": "uA",
        },
        "voltage_now": {
            "path": "/sys/class/power_supply/battery/voltage_now",
            "present": True,
            "readable": False,
        },
        "temp": {
            "path": "/sys/class/power_supply/battery/temp",
            "present": True,
            "readable": True,
            "value": "285",
        },
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
            "value": "41000",
            "unit_hint": "mC",
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


def test_the_engine_uses_usable_nodes_of_the_capabilities_only() -> None:
    caps = capabilities_of(PROBE)
    assert caps.root.available and caps.has_opencl and caps.gpu.family is GpuFamily.ADRENO
    control = charging_control(caps)
    assert control is not None and control.disable_value == "0"  # writable through su
    sources = {s.name: s for s in default_sources(caps)}
    assert sources["gpu.busy"].format is SourceFormat.KGSL
    assert "battery.voltage_now" not in sources  # unreadable
    assert "thermal.gpuss-0-usr" in sources and "thermal.cpu" not in sources
    nodes = temperature_nodes(caps)
    assert "/sys/class/thermal/thermal_zone1/temp" not in nodes  # unreadable
    # battery temp stands in for a battery zone
    assert nodes == ["/sys/class/thermal/thermal_zone0/temp", "/sys/class/power_supply/battery/temp"]


def test_no_charging_control_without_root_or_a_writable_node() -> None:
    unrooted = {**PROBE, "root": {"uid": 2000, "adbd_root": False, "su_works": False}}
    assert charging_control(capabilities_of(unrooted)) is None
    bare = capabilities_of({"probe_version": 1, "root": {"uid": 2000, "adbd_root": False}})
    assert charging_control(bare) is None and gpu_busy_path(bare) is None


def test_last_achieved_load_reads_fractions_and_percentages_and_skips_garbage() -> None:
    text = '{"event":"info"}\n{"event":"load","achieved":0.31}\nnot json\n{"event":"load","achieved":48}\n'
    assert last_achieved_load(text) == pytest.approx(0.48)
    assert last_achieved_load('{"event":"info"}\n') is None


def test_load_argv_uses_the_busy_counter_when_known() -> None:
    argv = load_argv("/bin/gpuload", 0.5, Intensity.COMPUTE, gpu_busy_path(capabilities_of(PROBE)))
    assert "--target=0.5" in argv and "--busy-path=/sys/class/kgsl/kgsl-3d0/gpubusy" in argv
    assert not any(
        a.startswith("--busy-path") for a in load_argv("/bin/gpuload", 0.5, Intensity.COMPUTE, None)
    )


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
