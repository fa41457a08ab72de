"""The phone's OpenCL devices as a benchmark program lists them (`PROGRAM --list-devices`), pure.

A library file proves nothing: a Pixel's libOpenCL-pixel.so needs its own entry points, a Mali
GLES driver may carry no OpenCL, an ICD may find no device. OpenCL is there when a program that
loads it the way farm's programs do (kernels/common/clload.c) lists a device.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# kernels/README.md: exit 3 = no usable OpenCL library or device.
NO_DEVICE_EXIT = 3


@dataclass(frozen=True)
class OpenClDevice:
    index: str  # "P:D"
    platform: str
    name: str
    type: str  # gpu | cpu | accelerator | other
    fp16: bool
    library: str | None  # the library the program loaded it through

    def to_json(self) -> dict[str, object]:
        return {
            "index": self.index,
            "platform": self.platform,
            "name": self.name,
            "type": self.type,
            "fp16": self.fp16,
            "library": self.library,
        }


def device_of(event: dict[str, object]) -> OpenClDevice:
    library = event.get("library")
    return OpenClDevice(
        index=str(event.get("index", "")),
        platform=str(event.get("platform", "")),
        name=str(event.get("name", "")),
        type=str(event.get("type", "other")),
        fp16=bool(event.get("fp16", False)),
        library=str(library) if library is not None else None,
    )


def parse_cl_devices(stdout: str, exit_code: int) -> tuple[OpenClDevice, ...] | None:
    """The devices a `--list-devices` run printed; () when it found none (exit 3); None when the
    run says nothing either way (another exit, or output that is not the contract's)."""
    if exit_code == NO_DEVICE_EXIT:
        return ()
    if exit_code != 0:
        return None
    devices = []
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            return None
        if isinstance(event, dict) and event.get("event") == "device":
            devices.append(device_of(event))
    return tuple(devices)
