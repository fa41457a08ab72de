"""farm doctor's pure parts: the shell facts, the gauge's update interval, the summary line."""

from __future__ import annotations

from farm.cli.doctor import summary
from farm.doctor.checks import Check, Finding, Status, gauge_interval_s, parse_facts
from farm.doctor.probe import after_first_update


def test_facts_from_the_shell_script() -> None:
    facts = parse_facts("selinux=Enforcing\npagesize=16384\ntool.svc=1\ntool.input=1\nwakefulness=Awake\n")
    assert facts.selinux == "Enforcing" and facts.page_size_bytes == 16384
    assert facts.tools == frozenset({"svc", "input"}) and facts.wakefulness == "Awake"
    empty = parse_facts("selinux=\npagesize=\n")
    assert empty.selinux is None and empty.page_size_bytes is None and not empty.tools


def test_gauge_interval_is_the_median_gap_between_changes() -> None:
    times = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    currents = [5.0, 5.0, 6.0, 6.0, 7.0, 7.0, 8.0]
    assert gauge_interval_s(times, currents) == 1.0
    assert gauge_interval_s(times, [5.0] * 7) is None


def test_readings_before_the_gauges_first_update_are_dropped() -> None:
    assert after_first_update([2500.0, 2500.0, -300.0, -310.0]) == [-300.0, -310.0]
    assert after_first_update([2500.0, 2500.0]) == []  # never updated: no evidence


def test_summary_names_what_is_not_ok() -> None:
    findings = (
        Finding(Check.OPENCL, Status.OK, "x"),
        Finding(Check.DISCHARGE, Status.MISSING, "battery idle"),
        Finding(Check.THERMAL, Status.DEGRADED, "battery only"),
    )
    assert summary(findings) == "1 ok, 1 degraded (thermal), 1 missing (discharge)"


def test_refused_thermal_zones_on_android_10_and_later_fall_back_to_the_thermal_hal() -> None:
    from farm.doctor.checks import diagnose
    from farm.telemetry.probe import capabilities_of

    refused = {"path": "/sys/class/thermal/thermal_zone0/temp", "present": True, "readable": False}
    doc = {
        "probe_version": 1,
        "root": {"uid": 2000, "adbd_root": False},
        "thermal": [{**refused, "zone": "thermal_zone0", "type": "cpu", "error": "EACCES"}],
        "props": {"ro.build.version.sdk": "33"},
    }
    facts = parse_facts("selinux=Enforcing\npagesize=4096\n")
    (thermal,) = [f for f in diagnose(capabilities_of(doc), facts, None) if f.check is Check.THERMAL]
    assert thermal.status is Status.DEGRADED and "dumpsys thermalservice" in thermal.evidence, thermal
