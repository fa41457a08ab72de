"""Profiles of devices that do not exist, written by tests that need a phone stricter than any
shipped profile. Each is a copy of a real device's profile with one thing changed, and says so
in its name and description, so that no test mistakes it for the device it was copied from."""

from __future__ import annotations

from pathlib import Path

import yaml

from vphone.profiles import PROFILES_DIR

WRAPPER_ONLY_PIXEL = "pixel7-wrapper-only"
PIXEL_WRAPPER_LIBRARY = "/vendor/lib64/libOpenCL-pixel.so"


def wrapper_only_pixel(folder: Path) -> Path:
    """A profile file in `folder`: a Pixel 7 whose vendor image ships libOpenCL-pixel.so and no
    libOpenCL.so. The real Pixel 7 ships both (pixel7.yaml, [dump]); this hypothetical device
    keeps the wrapper-only case tested: a program linked with -lOpenCL does not start on it, and
    OpenCL is reached only through enableOpenCL + loadOpenCLPointer."""
    profile = yaml.safe_load((PROFILES_DIR / "pixel7.yaml").read_text(encoding="utf-8"))
    profile["name"] = WRAPPER_ONLY_PIXEL
    profile["description"] = (
        "hypothetical device (not the Pixel 7, which ships libOpenCL.so too): pixel7 with "
        "libOpenCL-pixel.so as its only OpenCL library"
    )
    profile["opencl"] = {"library": PIXEL_WRAPPER_LIBRARY, "loader": "pixel"}
    path = folder / f"{WRAPPER_ONLY_PIXEL}.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False), encoding="utf-8")
    return path


MODE_CAPPING_PHONE = "dimensity9200-mode-caps"


def mode_capping_phone(folder: Path) -> Path:
    """A profile file in `folder`: a Dimensity 9200 phone whose power HAL also caps the CPU maxima
    while the screen is off and in deep Doze. The MT6985 phone whose tables dimensity9200.yaml
    takes its touch boost from has no such scenario (its powerscntbl.xml); this hypothetical device
    keeps the power HAL's modes tested: a cap written on screen-off or idle, the defaults after."""
    profile = yaml.safe_load((PROFILES_DIR / "dimensity9200.yaml").read_text(encoding="utf-8"))
    profile["name"] = MODE_CAPPING_PHONE
    profile["description"] = (
        "hypothetical device (not the vivo X90, whose MediaTek power HAL has no screen-off or idle "
        "scenario): dimensity9200 with the big cores capped on screen-off and every cluster in deep Doze"
    )
    profile["power_hal"]["hints"] += [
        {"trigger": "screen_off", "cpu_max_khz": [1800000, 1800000, 1800000]},
        {"trigger": "idle", "cpu_max_khz": [1000000, 1200000, 1400000]},
    ]
    path = folder / f"{MODE_CAPPING_PHONE}.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False), encoding="utf-8")
    return path
