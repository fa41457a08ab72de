"""The sustained figure's series (farm.analysis.sustained.sustained_series) on a synthetic run whose
phone throttles at a known time: 10 ms iterations at 2000 MHz until 6 s, then 15 ms at 1000 MHz
while the temperature climbs."""

from __future__ import annotations

import numpy as np
import pytest

from farm.analysis.iterations import Iterations
from farm.analysis.series import Series, SeriesTrace
from farm.analysis.sustained import sustained_series

THROTTLE_S = 6.0
ORIGIN_NS = 5_000_000_000  # the phone's clock does not start at 0
WARMUP_S = 0.5  # the sampler starts before the first measured iteration


def _run(duration_s: float = 20.0) -> tuple[Iterations, SeriesTrace]:
    starts, ends, t = [], [], ORIGIN_NS + int(WARMUP_S * 1e9)
    while t < ORIGIN_NS + duration_s * 1e9:
        took_ms = 10.0 if t < ORIGIN_NS + THROTTLE_S * 1e9 else 15.0
        starts.append(t)
        t += int(took_ms * 1e6)
        ends.append(t)
    iterations = Iterations(np.array(starts), np.array(ends), None, None, None)
    ticks = ORIGIN_NS + np.arange(0, int(duration_s * 20) + 1) * 50_000_000  # 20 Hz
    throttled = ticks >= ORIGIN_NS + THROTTLE_S * 1e9
    trace = SeriesTrace(
        {
            "cpu.freq.policy7": Series.of(ticks, np.where(throttled, 1_000_000, 2_000_000)),  # kHz
            "gpu.freq": Series.of(ticks, np.full(ticks.size, 585_000_000)),  # Hz (kgsl)
            "thermal.battery": Series.of(ticks, 30_000 + (ticks - ORIGIN_NS) / 1e9 * 1000),  # m°C
        }
    )
    return iterations, trace


def test_the_series_shows_the_latency_rise_and_clock_drop_at_the_throttle_time() -> None:
    iterations, trace = _run()
    series = sustained_series(iterations, trace, time_to_throttle_s=THROTTLE_S, bins=40)
    assert series is not None
    # One axis from the sampler's first sample: the throttle mark is where the data changes.
    assert series.throttle_s == THROTTLE_S
    assert series.duration_s == pytest.approx(20.0, abs=0.02)
    lat = series.latency
    assert lat.unit == "ms" and 30 <= lat.t_s.size <= 40 and lat.t_s[0] >= WARMUP_S - 0.5
    assert np.all(lat.values[lat.t_s < THROTTLE_S - 0.5] == pytest.approx(10.0))
    assert np.all(lat.values[lat.t_s > THROTTLE_S + 0.5] == pytest.approx(15.0))
    assert series.latency_before_ms == pytest.approx(10.0)
    assert series.latency_after_ms == pytest.approx(15.0)
    cpu, gpu = series.clocks
    assert (cpu.label, cpu.unit, gpu.label) == ("cpu policy7", "MHz", "gpu")
    assert np.all(cpu.values[cpu.t_s < THROTTLE_S - 0.5] == 2000.0)
    assert np.all(cpu.values[cpu.t_s > THROTTLE_S + 0.5] == 1000.0)
    assert np.all(gpu.values == 585.0)
    temp = series.temperature
    assert temp is not None and temp.unit == "°C"
    assert temp.values[0] == pytest.approx(30.25, abs=0.3) and temp.values[-1] == pytest.approx(
        49.75, abs=0.3
    )
    assert np.all(np.diff(temp.values) > 0)


def test_without_a_trace_or_a_throttle_the_latency_alone_is_the_series() -> None:
    iterations, _ = _run(8.0)
    series = sustained_series(iterations)
    assert series is not None
    assert series.clocks == () and series.temperature is None and series.throttle_s is None
    assert series.latency_before_ms is None and series.latency_after_ms is None
    assert series.latency.t_s[0] < 0.1  # the origin is the first iteration without a trace
    empty = Iterations(np.array([], dtype=np.int64), np.array([], dtype=np.int64), None, None, None)
    assert sustained_series(empty) is None


def test_a_sampled_run_bins_with_its_weights() -> None:
    # 10 printed fast iterations stand for 1 each, 2 sampled slow ones for 50 each: the bin's
    # median is the slow latency, as in the run itself.
    starts = np.arange(12, dtype=np.int64) * 1_000_000
    took = np.array([1_000] * 10 + [900_000] * 2)
    weight = np.array([1.0] * 10 + [50.0] * 2)
    iterations = Iterations(starts, starts + took, None, None, None, weight=weight)
    series = sustained_series(iterations, bins=1)
    assert series is not None
    assert series.latency.values.tolist() == [pytest.approx(0.9)]
