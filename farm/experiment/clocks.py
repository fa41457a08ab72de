"""`conditions.clocks:` and the thermal policy of an experiment: how the phone's clocks are held
while it measures, and what a throttled run means.

    conditions:
      clocks:
        mode: auto          # none | fixed_performance | pin | auto (the strongest the phone allows)
        cpu: nominal        # pin level for every CPU policy: max | nominal | min | 0.5 | 1800MHz
        gpu: max            # pin level for the GPU (devfreq / kgsl)
        governor: performance
        required: false     # true: a phone that cannot do `mode` is skipped, with one line why
        affinity: big       # cpu backends: big | little | all (toybox taskset)
      on_throttle: flag     # flag | retry | fail
      cooldown: {max_temp_c: 40, within_c_of_idle: 2}

`clocks: pin` (a bare mode) is a shorthand for `clocks: {mode: pin}`. Levels are resolved against
each phone's own frequency table by farm.engine.clockplan (pure); a frequency is taken to the
nearest entry of the table, and what the phone really ran at is stored with every run.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints, model_validator

from farm.experiment.programs import show


class _Frozen(BaseModel):
    # The same configuration as farm.experiment.sections.Frozen (sections imports this module).
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False, allow_inf_nan=False)


class ClockMode(StrEnum):
    NONE = "none"  # record the clocks only
    FIXED_PERFORMANCE = "fixed_performance"  # Android 11+ `cmd power set-fixed-performance-mode-enabled`
    PIN = "pin"  # root: CPU policies and GPU at min = max = a level
    AUTO = "auto"  # the strongest of pin > fixed_performance > none the phone allows


class Affinity(StrEnum):
    ALL = "all"
    BIG = "big"  # the CPUs of the fastest policy (the highest maximum frequency)
    LITTLE = "little"  # the CPUs of the slowest policy


class OnThrottle(StrEnum):
    FLAG = "flag"  # keep the run, marked not valid (not_throttled = false)
    RETRY = "retry"  # cool down and run it again (bounded by retries.max_attempts)
    FAIL = "fail"  # the run fails with the throttling as its reason


class LevelKind(StrEnum):
    MAX = "max"
    NOMINAL = "nominal"  # the middle entry of the table: a speed most phones sustain
    MIN = "min"
    FRACTION = "fraction"  # of the table's maximum: the highest entry at or below it
    FREQUENCY = "frequency"  # the table's entry nearest to it


_FREQUENCY = re.compile(r"^(\d+(?:\.\d+)?)\s*(GHz|MHz|kHz)$", re.IGNORECASE)
_KHZ_PER = {"ghz": 1_000_000, "mhz": 1_000, "khz": 1}
MAX_FREQUENCY_KHZ = 10_000_000  # 10 GHz: beyond any phone, so a typo


class ClockLevel(_Frozen):
    """A pin level; written as `max`, `nominal`, `min`, a fraction `0.5` or a frequency `1.8GHz`."""

    kind: LevelKind
    fraction: Annotated[float, Field(gt=0, le=1)] | None = None
    khz: Annotated[int, Field(gt=0, le=MAX_FREQUENCY_KHZ)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return data
        if isinstance(data, str) and data in {
            k.value for k in (LevelKind.MAX, LevelKind.NOMINAL, LevelKind.MIN)
        }:
            return {"kind": data}
        if isinstance(data, float) and not isinstance(data, bool):
            if not 0 < data <= 1:
                raise ValueError(f"a fraction of the frequency table must be in (0, 1], got {data:g}")
            return {"kind": LevelKind.FRACTION, "fraction": data}
        if isinstance(data, str) and (match := _FREQUENCY.match(data.strip())):
            khz = round(float(match.group(1)) * _KHZ_PER[match.group(2).lower()])
            if not 0 < khz <= MAX_FREQUENCY_KHZ:
                raise ValueError(f"frequency {data} is outside 1 kHz .. 10 GHz")
            return {"kind": LevelKind.FREQUENCY, "khz": khz}
        raise ValueError(
            f"expected max, nominal, min, a fraction like 0.5 or a frequency like 1800MHz, got {show(data)}"
        )

    def __str__(self) -> str:
        if self.kind is LevelKind.FRACTION:
            return f"{self.fraction:g} of max"
        if self.kind is LevelKind.FREQUENCY:
            return f"{self.khz} kHz"
        return self.kind.value


NOMINAL = ClockLevel(kind=LevelKind.NOMINAL)
Governor = Annotated[str, StringConstraints(strict=True, pattern=r"^[a-z][a-z0-9_-]*$", max_length=32)]


class Clocks(_Frozen):
    """How the clocks are held while a run measures (see the module docstring)."""

    mode: ClockMode = ClockMode.NONE
    cpu: ClockLevel = NOMINAL
    gpu: ClockLevel = NOMINAL
    # `performance` runs at scaling_max_freq, which pinning sets equal to scaling_min_freq.
    governor: Governor = "performance"
    required: StrictBool = False
    affinity: Affinity = Affinity.ALL

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"mode": data}
        if not isinstance(data, dict):
            raise ValueError(
                f"expected a mode (none, fixed_performance, pin, auto) or a mapping (mode, cpu, gpu, "
                f"governor, required, affinity), got {show(data)}"
            )
        return data

    @model_validator(mode="after")
    def _required_needs_a_mode(self) -> Clocks:
        if self.required and self.mode in (ClockMode.NONE, ClockMode.AUTO):
            raise ValueError(
                "required: true needs a mode a phone can lack (pin or fixed_performance), "
                f"not {self.mode.value}"
            )
        return self


DEFAULT_CLOCKS = Clocks()
