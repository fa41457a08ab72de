"""Profiles of devices that do not exist, written by tests that need a phone stricter than any
shipped profile. Each is a copy of a real device's profile with one thing changed, and says so
in its name and description, so that no test mistakes it for the device it was copied from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from vphone.profiles import PROFILES_DIR

WRAPPER_ONLY_PIXEL = "pixel7-wrapper-only"
PIXEL_WRAPPER_LIBRARY = "/vendor/lib64/libOpenCL-pixel.so"
MODE_CAPPING_PHONE = "dimensity9200-mode-caps"


def _variant(folder: Path, source: str, name: str, description: str, change: Callable[[Any], None]) -> Path:
    """The shipped profile `source` as `name` with `description`, `change`d (it edits the parsed
    YAML in place), written to folder/NAME.yaml; its path."""
    profile = yaml.safe_load((PROFILES_DIR / f"{source}.yaml").read_text(encoding="utf-8"))
    profile["name"] = name
    profile["description"] = description
    change(profile)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False), encoding="utf-8")
    return path


def wrapper_only_pixel(folder: Path) -> Path:
    """A profile file in `folder`: a Pixel 7 whose vendor image ships libOpenCL-pixel.so and no
    libOpenCL.so. The real Pixel 7 ships both (pixel7.yaml, [dump]); this hypothetical device
    keeps the wrapper-only case tested: a program linked with -lOpenCL does not start on it, and
    OpenCL is reached only through enableOpenCL + loadOpenCLPointer."""

    def wrapper_only(profile: Any) -> None:
        profile["opencl"] = {"library": PIXEL_WRAPPER_LIBRARY, "loader": "pixel"}

    return _variant(
        folder,
        "pixel7",
        WRAPPER_ONLY_PIXEL,
        "hypothetical device (not the Pixel 7, which ships libOpenCL.so too): pixel7 with "
        "libOpenCL-pixel.so as its only OpenCL library",
        wrapper_only,
    )


def mode_capping_phone(folder: Path) -> Path:
    """A profile file in `folder`: a Dimensity 9200 phone whose power HAL also caps the CPU maxima
    while the screen is off and in deep Doze. The MT6985 phone whose tables dimensity9200.yaml
    takes its touch boost from has no such scenario (its powerscntbl.xml); this hypothetical device
    keeps the power HAL's modes tested: a cap written on screen-off or idle, the defaults after."""

    def mode_caps(profile: Any) -> None:
        profile["power_hal"]["hints"] += [
            {"trigger": "screen_off", "cpu_max_khz": [1800000, 1800000, 1800000]},
            {"trigger": "idle", "cpu_max_khz": [1000000, 1200000, 1400000]},
        ]

    return _variant(
        folder,
        "dimensity9200",
        MODE_CAPPING_PHONE,
        "hypothetical device (not the vivo X90, whose MediaTek power HAL has no screen-off or idle "
        "scenario): dimensity9200 with the big cores capped on screen-off and every cluster in deep Doze",
        mode_caps,
    )
