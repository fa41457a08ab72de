"""The newest readings in a (partial) trace: what the live view shows of a running phone. Pure.

The engine reads the tail of the sampler's trace while a run goes on (farm.engine.watch) and asks
here for the last GPU busy, battery power and temperature in it, with the same conventions the
run's metrics use (busy as 0..1 by source format, power through the phone's battery calibration,
thermal units by range), so the live numbers and the stored ones agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from farm.analysis.metrics import busy_fraction, source_format, temperature_source, to_celsius
from farm.analysis.power import BatteryCalibration, battery_power
from farm.analysis.series import DEFAULT_SOURCES, Series, SourceNames, TraceLike


@dataclass(frozen=True)
class Readings:
    """The newest value of each, None when the trace has none (or no calibration for power).
    `t_ns` is the newest sample time on the phone's clock (None: no sample at all)."""

    gpu_busy: float | None = None  # 0..1
    power_mw: float | None = None  # positive while discharging
    temperature_c: float | None = None
    t_ns: int | None = None


def _last(series: Series | None) -> tuple[int, float] | None:
    if series is None or len(series) == 0:
        return None
    return int(series.t_ns[-1]), float(series.values[-1])


def newest_readings(
    trace: TraceLike, calibration: BatteryCalibration | None, sources: SourceNames = DEFAULT_SOURCES
) -> Readings:
    times: list[int] = []
    busy = _last(trace.series(sources.gpu_busy))
    gpu = None
    if busy is not None:
        times.append(busy[0])
        gpu = float(busy_fraction(np.array([busy[1]]), source_format(trace, sources.gpu_busy))[0])
    power = None
    if calibration is not None or trace.series(sources.battery_power) is not None:
        try:
            newest = _last(battery_power(trace, calibration, sources))
        except ValueError:
            newest = None
        if newest is not None:
            times.append(newest[0])
            power = newest[1]
    temperature = None
    thermal = _last(trace.series(temperature_source(trace, sources.temperature)))
    if thermal is not None:
        times.append(thermal[0])
        temperature = float(to_celsius(np.array([thermal[1]]))[0])
    return Readings(gpu, power, temperature, max(times) if times else None)
