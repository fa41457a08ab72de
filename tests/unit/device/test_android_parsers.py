"""Android output parsers on real-format text."""

from __future__ import annotations

import pytest

from farm.device.android import (
    BatteryStatus,
    parse_dumpsys_battery,
    parse_dumpsys_meminfo_total_pss_kb,
    parse_getprop,
    parse_proc_meminfo,
    parse_thermal_c,
)

GETPROP = """[dalvik.vm.heapsize]: [512m]
[ro.product.model]: [Pixel 7]
[ro.board.platform]: [gs201]
[empty.value]: []
[multi.line]: [first
second]
[ro.product.cpu.abi]: [arm64-v8a]
garbage line
"""

BATTERY = """Current Battery Service state:
  (UPDATES STOPPED -- use 'reset' to restart)
  AC powered: false
  USB powered: true
  Wireless powered: false
  Max charging current: 500000
  Charge counter: 3270000
  status: 3
  health: 2
  present: true
  level: 171
  scale: 200
  voltage: 4123
  temperature: 285
  technology: Li-ion

Battery history:
  level: 3
"""


def test_getprop_all_keys_including_empty_and_multiline() -> None:
    props = parse_getprop(GETPROP)
    assert props["ro.product.model"] == "Pixel 7"
    assert props["empty.value"] == ""
    assert props["multi.line"] == "first\nsecond"
    assert props["ro.product.cpu.abi"] == "arm64-v8a"
    assert "garbage line" not in props


def test_dumpsys_battery_fields_and_units() -> None:
    battery = parse_dumpsys_battery(BATTERY)
    assert battery.level_pct == pytest.approx(85.5)
    assert battery.temperature_c == pytest.approx(28.5)
    assert battery.voltage_mv == 4123
    assert battery.status is BatteryStatus.DISCHARGING
    assert battery.usb_powered and battery.plugged and not battery.ac_powered
    assert battery.updates_stopped


def test_dumpsys_battery_stops_at_the_first_blank_line() -> None:
    text = "Current Battery Service state:\n  level: 50\n\nOther:\n  level: 3\n"
    assert parse_dumpsys_battery(text).level_pct == 50


def test_dumpsys_battery_missing_fields_are_none() -> None:
    battery = parse_dumpsys_battery("Current Battery Service state:\n  status: 9\n")
    assert battery.level_pct is None and battery.temperature_c is None and battery.status is None


def test_proc_meminfo_kb() -> None:
    text = "MemTotal:        7823456 kB\nMemAvailable:    3000000 kB\nHugePages_Total:       0\n"
    assert parse_proc_meminfo(text) == {"MemTotal": 7823456, "MemAvailable": 3000000, "HugePages_Total": 0}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("App Summary\n  TOTAL PSS:    90277   TOTAL RSS:   190372   TOTAL SWAP PSS:   253\n", 90277),
        ("     TOTAL    41234    30000\n", 41234),
        ("nothing here", None),
    ],
)
def test_dumpsys_meminfo_total_pss(text: str, expected: int | None) -> None:
    assert parse_dumpsys_meminfo_total_pss_kb(text) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("41200\n", 41.2), ("412", 41.2), ("38", 38.0), ("-5000", -5.0), ("oops", None), ("999999", None)],
)
def test_thermal_units_are_inferred_from_range(raw: str, expected: float | None) -> None:
    got = parse_thermal_c(raw)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_bundle_of_files_parses_binary_bodies_and_drops_a_cut_tail() -> None:
    from farm.device.session import parse_bundle

    data = b"3 /a\nx\ny" + b"0 /empty\n" + b"4 /bin\n\x00\n\xff7" + b"10 /cut\nabc"
    assert parse_bundle(data) == {"/a": b"x\ny", "/empty": b"", "/bin": b"\x00\n\xff7"}
