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
