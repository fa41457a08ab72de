"""Pure parsers of Android command output: getprop, dumpsys battery, /proc/meminfo, dumpsys meminfo.

Text in, typed values out; no I/O. Formats: shared/reference/adb-and-telemetry.md 4.3, 4.7, 4.10.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

_GETPROP_LINE = re.compile(r"^\[(?P<key>[^\]]*)\]: \[(?P<value>.*)\]$")


def parse_getprop(text: str) -> dict[str, str]:
    """`getprop` with no argument: `[key]: [value]` lines. Multi-line values are joined with \\n."""
    props: dict[str, str] = {}
    pending: tuple[str, list[str]] | None = None
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if pending is not None:
            key, parts = pending
            if line.endswith("]"):
                parts.append(line[:-1])
                props[key] = "\n".join(parts)
                pending = None
            else:
                parts.append(line)
            continue
        match = _GETPROP_LINE.match(line)
        if match:
            props[match["key"]] = match["value"]
        elif line.startswith("[") and "]: [" in line:
            key, _, first = line[1:].partition("]: [")
            pending = (key, [first])
    return props


class BatteryStatus(enum.IntEnum):
    """BatteryManager.BATTERY_STATUS_* as dumpsys prints it."""

    UNKNOWN = 1
    CHARGING = 2
    DISCHARGING = 3
    NOT_CHARGING = 4
    FULL = 5


@dataclass(frozen=True)
class Battery:
    level_pct: float | None
    temperature_c: float | None
    voltage_mv: int | None
    status: BatteryStatus | None
    ac_powered: bool
    usb_powered: bool
    wireless_powered: bool
    updates_stopped: bool

    @property
    def plugged(self) -> bool:
        return self.ac_powered or self.usb_powered or self.wireless_powered


def parse_dumpsys_battery(text: str) -> Battery:
    """`dumpsys battery`: `key: value` lines up to the first blank line after the header."""
    values: dict[str, str] = {}
    stopped = False
    started = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            if started and values:
                break
            continue
        started = True
        if "UPDATES STOPPED" in line:
            stopped = True
            continue
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip().lower()] = value.strip()

    def number(key: str) -> int | None:
        try:
            return int(values[key])
        except (KeyError, ValueError):
            return None

    level, scale = number("level"), number("scale") or 100
    temp = number("temperature")
    status = number("status")
    return Battery(
        level_pct=None if level is None else 100.0 * level / scale,
        temperature_c=None if temp is None else temp / 10.0,
        voltage_mv=number("voltage"),
        status=BatteryStatus(status) if status in {s.value for s in BatteryStatus} else None,
        ac_powered=values.get("ac powered") == "true",
        usb_powered=values.get("usb powered") == "true",
        wireless_powered=values.get("wireless powered") == "true",
        updates_stopped=stopped,
    )


def parse_proc_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo (also /proc/PID/status memory lines): name -> kB."""
    result: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        fields = rest.split()
        if sep and fields and fields[0].isdigit():
            result[key.strip()] = int(fields[0])
    return result


def parse_dumpsys_meminfo_total_pss_kb(text: str) -> int | None:
    """`dumpsys meminfo PID`: the `TOTAL PSS:` of the App Summary, else the older `TOTAL:` row."""
    match = re.search(r"TOTAL PSS:\s+(\d+)", text)
    if match is None:
        match = re.search(r"^\s*TOTAL:?\s+(\d+)", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def parse_thermal_c(raw: str) -> float | None:
    """A thermal_zone temp: millidegrees by the ABI; vendors also use degrees or decidegrees.

    The unit is inferred from the range a phone can have (-40..150 °C)."""
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    magnitude = abs(value)
    celsius = value / 1000.0 if magnitude >= 1000 else value / 10.0 if magnitude >= 150 else value
    return celsius if -40.0 <= celsius <= 150.0 else None


# android.os.Temperature's types that are no temperature: battery current limiter voltage,
# current and percentage (frameworks/base core/java/android/os/Temperature.java TYPE_BCL_*).
_NOT_TEMPERATURE_TYPES = frozenset({6, 7, 8})
_HAL_TEMPERATURE = re.compile(
    r"Temperature\{mValue=(?P<value>-?[0-9.]+(?:[eE]-?[0-9]+)?), "
    r"mType=(?P<type>-?\d+), mName=(?P<name>[^,}]*)"
)
HAL_SECTION = "Current temperatures from HAL"
THERMAL_HAL_SOURCE = "thermalservice (HAL)"  # a gate's source: dumpsys thermalservice's HAL readings


def parse_hal_temperatures(lines: list[str] | tuple[str, ...]) -> dict[str, float]:
    """`dumpsys thermalservice`'s "Current temperatures from HAL:" section, name -> °C (pure).

    ThermalManagerService.dumpInternal prints the HAL's current readings after that header, one
    android.os.Temperature.toString() a line ("Temperature{mValue=33.671, mType=0,
    mName=cpu-0-0-usr, mStatus=0}"), then "Current cooling devices from HAL:"; the "Cached
    temperatures:" above it are the last values the HAL's callback pushed. The BCL types are
    voltages, currents and percentages and are left out. The shell user may read it (DUMP) where
    SELinux refuses it the thermal zones (Pixel's gs201 policy)."""
    temps: dict[str, float] = {}
    inside = False
    for line in lines:
        if not line.startswith((" ", "\t")) and "Temperature{" not in line:
            inside = line.startswith(HAL_SECTION)
            continue
        found = _HAL_TEMPERATURE.search(line)
        if inside and found is not None and int(found.group("type")) not in _NOT_TEMPERATURE_TYPES:
            celsius = float(found.group("value"))
            if -40.0 <= celsius <= 150.0:
                temps[found.group("name")] = celsius
    return temps
