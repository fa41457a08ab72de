"""The ground-truth log: what the physics really did, outside the sandbox, for checking farm.

<state_dir>/ground_truth.jsonl, one JSON object per physics tick (~10 Hz):
  t_ns           CLOCK_MONOTONIC ns (the phone's programs stamp with the same clock: no time ns)
  power_mw       true power of the model (idle + CPU + GPU + screen)
  gpu_busy       GPU busy over this tick, 0..1 (PoCL worker CPU time / (wall * gpu cores))
  cpu_busy_cores CPU cores busy with this phone's other threads over this tick
  temp_c         modelled temperature (all thermal zones, battery temp)
  charging       current really flows into the battery
  level_pct      battery level, fractional
  current_ma     true battery current, > 0 into the battery (before the profile's quirks)
  voltage_mv     battery voltage
  screen_on      the screen term of the power model is on (input keyevent WAKEUP/SLEEP/POWER)
  cpu_speed      speed of the phone's fastest online core, 0..1 of its top clock (pins, caps, heat)
  gpu_speed      GPU clock work runs at, 0..1 of the top one
  cpu_quota_cores / gpu_quota_cores  the CFS quotas in force (host cores; 0 without cgroups)
  thermal_status the thermal HAL's status, 0 NONE .. 6 SHUTDOWN
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO


@dataclass(frozen=True)
class TruthRow:
    t_ns: int
    power_mw: float
    gpu_busy: float
    cpu_busy_cores: float
    temp_c: float
    charging: bool
    level_pct: float
    current_ma: float
    voltage_mv: float
    screen_on: bool = True
    cpu_speed: float = 1.0
    gpu_speed: float = 1.0
    cpu_quota_cores: float = 0.0
    gpu_quota_cores: float = 0.0
    thermal_status: int = 0


_FIELDS = tuple(f.name for f in fields(TruthRow))


class GroundTruthLog:
    """Append-only JSON Lines writer; open/close explicitly (or as a context manager)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f: IO[str] | None = None

    def open(self) -> None:
        self._f = self.path.open("a", encoding="utf-8")

    def write(self, row: TruthRow) -> None:
        if self._f is None:
            return
        # Not dataclasses.asdict: its deep copy of every field was a fifth of a physics tick.
        d = {}
        for f in _FIELDS:
            v = getattr(row, f)
            d[f] = round(v, 4) if isinstance(v, float) else v
        self._f.write(json.dumps(d) + "\n")
        self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self) -> GroundTruthLog:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_ground_truth(path: Path) -> list[TruthRow]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rows.append(TruthRow(**json.loads(line)))
    return rows
