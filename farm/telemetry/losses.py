"""Telemetry a phone has but will not show farm (pure).

Real phones refuse the shell user reads that SELinux does not grant: on a Pixel 7 every thermal
zone (sysfs_thermal is system_server's) and the Mali utilisation and clock nodes (only
hint_min_freq and power_policy are sysfs_gpu in the gs201 vendor policy). The probe still sees
those files, with EACCES. What each refused source costs the run (a weaker gate, an open-loop
load, a missing trace column) is named here, so runs record and report it instead of carrying on
as if the phone simply had no such sensor.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from farm.telemetry.probe import Capabilities, Node


class LostSource(enum.StrEnum):
    THERMAL_ZONES = "thermal_zones"
    GPU_BUSY = "gpu_busy"
    GPU_FREQ = "gpu_freq"


_EFFECTS = {
    LostSource.THERMAL_ZONES: "the cooldown gate reads the battery temperature, which lags the SoC; "
    "no zone temperature in the trace",
    LostSource.GPU_BUSY: "gpuload runs open loop, the idle-GPU gate is skipped, "
    "no GPU utilisation in the trace",
    LostSource.GPU_FREQ: "no GPU clock in the trace",
}
_BUSY_WORDS = ("busy", "utilization", "load")


@dataclass(frozen=True)
class Loss:
    """One source the phone has but refused to read: which files, why, and what it costs."""

    source: LostSource
    paths: tuple[str, ...]
    errors: tuple[str, ...]  # errno names, as the probe reported them (EACCES: SELinux or mode)

    @property
    def effect(self) -> str:
        return _EFFECTS[self.source]

    def note(self) -> str:
        """One line for the run's notes."""
        shown = self.paths[0] + (f" and {len(self.paths) - 1} more" if len(self.paths) > 1 else "")
        return f"{self.source.value} unreadable ({'/'.join(self.errors)}: {shown}): {self.effect}"

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source.value,
            "paths": list(self.paths),
            "errors": list(self.errors),
            "effect": self.effect,
        }


def _loss(source: LostSource, refused: list[Node]) -> Loss:
    errors = tuple(sorted({n.error or "unreadable" for n in refused}))
    return Loss(source, tuple(n.path for n in refused), errors)


def lost_telemetry(caps: Capabilities) -> tuple[Loss, ...]:
    """Each kind of source present on the phone whose every file was refused (pure). A kind with
    one readable file is not lost; one with no file at all is a phone without it, not a loss."""
    out: list[Loss] = []
    zones = [z.node for z in caps.thermal if z.node.present]
    if zones and not any(n.readable for n in zones):
        out.append(_loss(LostSource.THERMAL_ZONES, zones))
    present = [n for n in caps.gpu.candidates if n.present]
    busy = [n for n in present if any(w in n.path.rsplit("/", 1)[-1] for w in _BUSY_WORDS)]
    freq = [n for n in present if n not in busy]
    if busy and not any(n.readable for n in busy):
        out.append(_loss(LostSource.GPU_BUSY, busy))
    if freq and not any(n.readable for n in freq):
        out.append(_loss(LostSource.GPU_FREQ, freq))
    return tuple(out)
