"""`dumpsys thermalservice` as ThermalManagerService prints it (pure; Android 10+).

The physics writes this text into the control dir; the phone's dumpsys only prints the file.
Layout (frameworks/base .../power/ThermalManagerService.java, dumpInternal): IsStatusOverride,
the two listener lists, Thermal Status, the cached temperatures, HAL Ready, the HAL connection
line (HIDL 2.0 up to Android 12, AIDL from 13), the HAL's current temperatures and cooling
devices, and from Android 13 its static thresholds. Values use Java's toString forms:
Temperature{mValue=41.2, mType=3, mName=skin-therm, mStatus=1}, CoolingDevice{mValue=2, mType=2,
mName=thermal-cpufreq-0}, floats as Float.toString (45.0, NaN).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from vphone.profile import HAL_STATUS_NAMES, Cooled, Profile
from vphone.thermal import CoolingDevice, thermal_status, zone_status, zone_temp_c

AIDL_HAL_MIN_SDK = 33
# android.os.CoolingDevice TYPE_CPU / TYPE_GPU
COOLING_HAL_TYPE = {Cooled.CPU: 2, Cooled.GPU: 3}


def java_float(value: float) -> str:
    """Float.toString for the values we print: shortest form, always with a fraction."""
    if math.isnan(value):
        return "NaN"
    text = repr(round(value, 3))
    return text if "." in text or "e" in text else f"{text}.0"


def _listeners(name: str) -> list[str]:
    return [f"{name}:", "\tcallbacks: 1", "\tkilled: false", "\tbroadcasts count: -1"]


def dump_thermalservice(
    profile: Profile,
    die_c: float,
    devices: Sequence[CoolingDevice],
    device_steps: Sequence[int],
    override_status: int | None = None,
) -> str:
    spec = profile.thermal
    temps = []
    for zone in spec.zones:
        t = zone_temp_c(spec, zone, die_c)
        temps.append(
            f"\tTemperature{{mValue={java_float(t)}, mType={zone.sensor.hal_type}, "
            f"mName={zone.type}, mStatus={zone_status(zone, t)}}}"
        )
    status = thermal_status(spec, die_c) if override_status is None else override_status
    lines = [f"IsStatusOverride: {'true' if override_status is not None else 'false'}"]
    lines += _listeners("ThermalEventListeners") + _listeners("ThermalStatusListeners")
    lines += [
        f"Thermal Status: {status}",
        "Cached temperatures:",
        *temps,
        "HAL Ready: true",
        "HAL connection:",
    ]
    aidl = profile.sdk >= AIDL_HAL_MIN_SDK
    lines.append("\tThermalHAL AIDL 1  connected: yes" if aidl else "\tThermalHAL 2.0 connected: yes")
    lines += ["Current temperatures from HAL:", *temps, "Current cooling devices from HAL:"]
    lines += [
        f"\tCoolingDevice{{mValue={steps}, mType={COOLING_HAL_TYPE[dev.cooled]}, mName={dev.name}}}"
        for dev, steps in zip(devices, device_steps, strict=True)
    ]
    if aidl:
        lines.append("Temperature static thresholds from HAL:")
        nan7 = ", ".join(["NaN"] * (len(HAL_STATUS_NAMES) + 1))
        for zone in spec.zones:
            if not zone.status_c:
                continue
            hot = [math.nan, *zone.status_c] + [math.nan] * (len(HAL_STATUS_NAMES) - len(zone.status_c))
            lines.append(
                f"\tTemperatureThreshold{{mType={zone.sensor.hal_type}, mName={zone.type}, "
                f"mHotThrottlingThresholds=[{', '.join(java_float(v) for v in hot)}], "
                f"mColdThrottlingThresholds=[{nan7}]}}"
            )
    return "\n".join(lines) + "\n"
