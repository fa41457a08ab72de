"""`farm doctor --json` on every virtual profile (issue 28, Deliver 5): on each it must say what
the profile is built to show (the profile's description and file header say what that is), and
report every check with its evidence. A profile without a row in BUILT_TO_SHOW fails the test:
whoever adds a profile says here what farm doctor must find on it. Hypothetical devices (a
wrapper-only Pixel) run beside them, written into the test's folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vphone.profiles import available_profiles
from vphone.testing.hypothetical import WRAPPER_ONLY_PIXEL, wrapper_only_pixel

from tests.e2e.farm_cli import run_farm

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# profile -> {check: (status, or several as "a|b"; a phrase its evidence contains)}
BUILT_TO_SHOW: dict[str, dict[str, tuple[str, str]]] = {
    "adreno-nexus6p": {  # old rooted phone, slow gauge, positive-discharge current
        "discharge": ("ok", "battery powered the phone"),
        "fuel_gauge": ("ok", "positive while discharging"),
        "android_version": ("degraded", "no thermalservice"),
        "root": ("ok", ""),
    },
    "adreno-sd865": {  # rooted lab phone, input_suspend
        "charging_switch": ("ok", "input_suspend"),
        "discharge": ("ok", "battery powered the phone"),
        "fuel_gauge": ("ok", "uA, negative while discharging"),
        "clock_control": ("ok", "cpufreq policies"),
        "android_version": ("ok", "toybox printf"),
    },
    "adreno-sd865-idle": {  # a switch that leaves the battery idle on USB power
        "charging_switch": ("ok", "op_disable_charge"),
        "discharge": ("missing", "battery idle"),
    },
    "adreno-sd888-hot": {  # production phone: no root
        "root": ("missing|degraded", ""),  # no su, or one that does not answer as root
        "charging_switch": ("missing", ""),
        "clock_control": ("degraded", "fixed-performance"),
    },
    "adreno-sd8gen2": {  # production phone: a switch present, no root to write it
        "root": ("missing|degraded", ""),  # no su, or one that does not answer as root
        "charging_switch": ("missing", "not writable"),
        "discharge": ("missing", ""),
    },
    "mali-tensor": {  # unrooted Pixel 7
        "root": ("missing|degraded", ""),  # no su, or one that does not answer as root
        "charging_switch": ("missing", "charge_disable"),
        "fuel_gauge": ("degraded", "not calibrated from discharging samples"),
    },
    "no-opencl": {  # no vendor OpenCL library
        "opencl": ("missing", "no vendor OpenCL library"),
    },
    "pixel7": {  # Tensor G2: libOpenCL.so beside the Pixel wrapper; vendor SELinux keeps shell out
        "opencl": ("ok", "via libOpenCL.so"),
        "thermal": ("degraded", "the thermal HAL's temperatures through dumpsys thermalservice"),
        "root": ("missing|degraded", ""),
    },
    "galaxy-s23": {  # production Snapdragon 8 Gen 2 phone: input_suspend present, no root to write it
        "opencl": ("ok", "devices: "),
        "root": ("missing|degraded", ""),
        "charging_switch": ("missing", ""),
    },
    "dimensity9200": {  # rooted with Magisk: the first su waits on the grant prompt
        "root": ("ok", ""),
        "opencl": ("ok", ""),
    },
}
# Devices that do not exist, written by the test (vphone.testing.hypothetical): name -> the same.
HYPOTHETICAL: dict[str, dict[str, tuple[str, str]]] = {
    WRAPPER_ONLY_PIXEL: {  # a Pixel 7 with libOpenCL-pixel.so alone: OpenCL through the wrapper
        "opencl": ("ok", "via /vendor/lib64/libOpenCL-pixel.so"),
        "root": ("missing|degraded", ""),
    },
}
ALL_CHECKS = {
    "opencl",
    "charging_switch",
    "discharge",
    "fuel_gauge",
    "thermal",
    "clock_control",
    "screen_control",
    "root",
    "selinux",
    "page_size",
    "android_version",
}


def test_every_profile_has_what_it_is_built_to_show() -> None:
    assert set(available_profiles()) <= BUILT_TO_SHOW.keys(), "add the new profile's row to BUILT_TO_SHOW"


def test_farm_doctor_finds_on_each_profile_what_it_is_built_to_show(virtual_phones, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shipped = sorted(BUILT_TO_SHOW.keys() & set(available_profiles()))
    expected = {**{name: BUILT_TO_SHOW[name] for name in shipped}, **HYPOTHETICAL}
    files = {WRAPPER_ONLY_PIXEL: str(wrapper_only_pixel(tmp_path))}
    profiles = [*shipped, *HYPOTHETICAL]
    phones = virtual_phones(count=len(profiles), profiles=[files.get(name, name) for name in profiles])
    result = run_farm(phones.adb_port, tmp_path / "results", "doctor", "--json", timeout_s=600)
    assert result.returncode == 0, result.stderr
    reports = json.loads(result.stdout)
    by_serial = {r["id"].rsplit("/", 1)[-1]: r for r in reports}
    for phone, profile in zip(phones, profiles, strict=True):
        report = by_serial[phone.serial]
        checks = {c["check"]: c for c in report["checks"]}
        assert set(checks) == ALL_CHECKS, (profile, report)
        print(f"{profile}: {report['summary']}")
        for name, (status, phrase) in expected[profile].items():
            check = checks[name]
            assert check["status"] in status.split("|") and phrase in check["evidence"], (profile, check)
            if status != "ok":
                assert check["todo"] or check["lost"], (profile, check)
