"""Time series on the phone's clock, and the narrow view of a sampler trace that metrics need.

Every on-device program stamps CLOCK_MONOTONIC nanoseconds, so benchmark iterations and telemetry
samples share one axis and can be cut by the same windows. Metrics only need "give me the samples
of this source"; `TraceLike` is that seam, so the sampler trace type (farm.telemetry.trace), the
virtual phone's ground-truth log and Trepn exports can all feed the same functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray


@dataclass(frozen=True)
class Series:
    """Samples of one source: strictly the phone's CLOCK_MONOTONIC ns and the values, same length."""

    t_ns: NDArray[np.int64]
    values: NDArray[np.float64]

    @classmethod
    def of(cls, t_ns: ArrayLike, values: ArrayLike) -> Series:
        times = np.asarray(t_ns, dtype=np.int64).ravel()
        vals = np.asarray(values, dtype=np.float64).ravel()
        if times.shape != vals.shape:
            raise ValueError(f"series has {times.size} times but {vals.size} values")
        order = np.argsort(times, kind="stable")
        return cls(times[order], vals[order])

    def __len__(self) -> int:
        return int(self.t_ns.size)

    def within(self, start_ns: int, end_ns: int) -> Series:
        """Samples with start_ns <= t <= end_ns."""
        mask = (self.t_ns >= start_ns) & (self.t_ns <= end_ns)
        return Series(self.t_ns[mask], self.values[mask])

    def update_points(self) -> Series:
        """Only the samples where the value changed (plus the first one).

        A fuel gauge refreshes `current_now` every few hundred ms to seconds; sampling it faster
        repeats the last value. Those repeats are not measurements, and averaging them would weight
        each real reading by how long the gauge happened to sit on it twice over.
        """
        if len(self) == 0:
            return self
        keep = np.ones(self.values.size, dtype=bool)
        keep[1:] = self.values[1:] != self.values[:-1]
        return Series(self.t_ns[keep], self.values[keep])

    def scaled(self, factor: float) -> Series:
        return Series(self.t_ns, self.values * factor)

    def update_period_ns(self) -> int | None:
        """The source's update period: about the shortest gap between two value changes (None if it
        did not change three times). A gauge that re-reads an unchanged value makes longer gaps,
        never shorter."""
        # The first sample marks when sampling began, not an update: gaps from the first change on.
        points = self.update_points()
        gaps = np.diff(points.t_ns[1:])
        gaps = gaps[gaps > 0]
        # The 10th percentile, not the minimum: a glitch (a value read mid-update) makes one short gap.
        return int(np.percentile(gaps, 10, method="lower")) if gaps.size else None

    def readings(self, period_ns: int | None = None) -> Series:
        """Every reading the source made: its update points plus, where the value stayed the same
        for several periods, the silent re-readings of that value, one per update period.

        A steady load makes a deterministic gauge report the same current again and again; those
        are readings too, and without them a steady run would look as if the gauge never updated.
        The period is estimated from the data unless given (it is too long if the value rarely
        changes: then fewer readings are reconstructed than were made).
        """
        points = self.update_points()
        period = period_ns or self.update_period_ns()
        if period is None or len(points) == 0:
            return points
        times: list[np.ndarray] = []
        values: list[np.ndarray] = []
        ends = np.append(points.t_ns[1:], self.t_ns[-1] + 1)
        for start, end, value in zip(points.t_ns, ends, points.values, strict=True):
            gap = int(end - start)
            # Between two changes: round(gap / period) readings; after the last one, whole periods.
            count = max(1, round(gap / period)) if end <= self.t_ns[-1] else gap // period + 1
            step = gap / count if end <= self.t_ns[-1] else period
            times.append(start + np.round(np.arange(count) * step).astype(np.int64))
            values.append(np.full(count, value))
        return Series(np.concatenate(times), np.concatenate(values))


class TraceLike(Protocol):
    """What metrics need from a telemetry trace: the samples of one source by name, or None."""

    def series(self, source: str) -> Series | None: ...


@dataclass(frozen=True)
class SeriesTrace:
    """A TraceLike over a plain mapping; adapters build one from any trace format."""

    sources: dict[str, Series]

    @property
    def source_names(self) -> tuple[str, ...]:
        return tuple(self.sources)

    def series(self, source: str) -> Series | None:
        return self.sources.get(source)


@dataclass(frozen=True)
class SourceNames:
    """Which trace source plays which role. One place to change when the sampler names differ."""

    battery_current: str = "battery.current_now"
    battery_voltage: str = "battery.voltage_now"
    battery_power: str = "battery.power"  # already in mW (Trepn, ground truth): no calibration
    gpu_busy: str = "gpu.busy"
    gpu_freq: str = "gpu.freq"
    cpu_freq_prefix: str = "cpu.freq."  # + a cpufreq policy's folder name; scaling_cur_freq in kHz
    temperature: str = "thermal.battery"
    rss: str = "mem.rss"  # kB
    rss_peak: str = "mem.hwm"  # kB, VmHWM


DEFAULT_SOURCES = SourceNames()


def step_integral(series: Series, start_ns: int, end_ns: int, *, trailing: bool) -> float:
    """Integral of a piecewise-constant signal over [start_ns, end_ns], in value x seconds.

    `trailing=False`: a sample holds from its time until the next sample (an instantaneous
    reading). `trailing=True`: a sample stands for the interval that ends at its time (a gauge that
    reports the average over its last update period); the last sample then also holds forward to
    the window's end, and the first one backward to its start.
    """
    if end_ns <= start_ns or len(series) == 0:
        return 0.0
    t = series.t_ns
    v = series.values
    # Segments: (-inf, t0], (t0, t1], ..., (t[n-1], +inf); the outer ones hold the nearest sample.
    lows = np.concatenate(([np.iinfo(np.int64).min], t))
    highs = np.concatenate((t, [np.iinfo(np.int64).max]))
    values = np.concatenate((v, v[-1:])) if trailing else np.concatenate((v[:1], v))
    clipped_low = np.clip(lows, start_ns, end_ns)
    clipped_high = np.clip(highs, start_ns, end_ns)
    durations_s = (clipped_high - clipped_low).astype(np.float64) / 1e9
    return float(np.sum(values * durations_s))


def step_mean(series: Series, start_ns: int, end_ns: int, *, trailing: bool) -> float:
    """Time-weighted mean of a piecewise-constant signal over the window."""
    duration_s = (end_ns - start_ns) / 1e9
    if duration_s <= 0:
        raise ValueError("empty window")
    return step_integral(series, start_ns, end_ns, trailing=trailing) / duration_s
