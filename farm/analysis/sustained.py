"""Sustained-run metrics (pure): how a run's latency drifts as the phone heats up.

A sustained run (measurement.sustained_s) measures for a fixed wall time; its iterations are a
latency-over-time series. The initial latency is the median of the iterations that started in
the first INITIAL_SHARE of the window, the steady one the median of the last STEADY_SHARE; their
ratio steady / initial is above 1 when the phone slowed down (throttling) and about 1 when it
sustained its speed. The series itself is in the run's stdout.jsonl (t_start_ns, t_end_ns). A
program that printed only its first iterations and a uniform sample of the rest
(farm.analysis.iterations) gives weighted medians: each sampled iteration stands for as many as
it was drawn from.

sustained_series gives the run's latency, clocks and temperature over time for the report's
sustained figure, binned on one time axis with the throttle time marked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from farm.analysis.iterations import Iterations
from farm.analysis.metrics import temperature_source, to_celsius, to_mhz
from farm.analysis.series import DEFAULT_SOURCES, Series, SourceNames, TraceLike
from farm.metric import Metric

INITIAL_SHARE = 0.1
STEADY_SHARE = 0.25


def sustained_metrics(iterations: Iterations) -> list[Metric]:
    """latency_initial_ms, latency_steady_ms and steady_initial_ratio; [] for fewer than two
    iterations (no drift to speak of)."""
    if len(iterations) < 2 or iterations.printed == 0:
        return []
    start_ns, end_ns = iterations.window_ns
    span = max(1, end_ns - start_ns)
    at = (iterations.t_start_ns - start_ns) / span
    latency = iterations.latency_ms
    weight = iterations.weight if iterations.weight is not None else np.ones(latency.size)
    first, last = at <= INITIAL_SHARE, at >= 1.0 - STEADY_SHARE
    if not first.any():
        first = np.arange(latency.size) == 0
    if not last.any():
        last = np.arange(latency.size) == latency.size - 1
    initial = _weighted_median(latency[first], weight[first])
    steady = _weighted_median(latency[last], weight[last])
    metrics = [Metric("latency_initial_ms", initial, "ms"), Metric("latency_steady_ms", steady, "ms")]
    if initial > 0:
        metrics.append(Metric("steady_initial_ratio", steady / initial, "ratio"))
    return metrics


def _weighted_median(values: np.ndarray, weight: np.ndarray) -> float:
    """The median of values each counted `weight` times; numpy's median when all weights are 1."""
    if np.all(weight == 1.0):
        return float(np.median(values))
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weight[order])
    middle = np.searchsorted(cumulative, cumulative[-1] / 2.0, side="left")
    return float(values[order][min(int(middle), values.size - 1)])


# The figure's resolution: a 600 s run at 20 Hz has 12,000 clock samples and maybe 100,000
# iterations; medians over this many time bins keep the curve's shape and the SVG small.
SERIES_BINS = 120


@dataclass(frozen=True)
class Curve:
    """One quantity over a sustained run: bin centres in seconds since the series' origin and the
    median of each bin (empty bins left out)."""

    label: str  # `latency`, `cpu policy7`, `gpu`, `thermal.gpuss`
    unit: str
    t_s: NDArray[np.float64]
    values: NDArray[np.float64]


@dataclass(frozen=True)
class SustainedSeries:
    """A sustained run's latency, clocks and temperature over time, on one axis: seconds since the
    sampler's first sample (about when farm's throttle watch started, which times time_to_throttle_s),
    or since the first measured iteration without a trace."""

    latency: Curve
    clocks: tuple[Curve, ...]  # MHz: each CPU policy, then the GPU
    temperature: Curve | None  # °C
    throttle_s: float | None  # time to throttle on this axis; None when the run never throttled
    latency_before_ms: float | None  # median latency of the iterations started before throttle_s
    latency_after_ms: float | None  # ... and after it
    duration_s: float  # the axis' end: the last iteration's end
    origin_ns: int  # the axis' 0 on the phone's CLOCK_MONOTONIC (ground truth uses the same clock)


def _binned(
    t_s: NDArray[np.float64],
    values: NDArray[np.float64],
    edges: NDArray[np.float64],
    weight: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    index = np.clip(np.searchsorted(edges, t_s, side="right") - 1, 0, edges.size - 2)
    centres, medians = [], []
    for b in np.unique(index):
        inside = index == b
        centres.append((edges[b] + edges[b + 1]) / 2.0)
        medians.append(_weighted_median(values[inside], weight[inside]))
    return np.asarray(centres, dtype=np.float64), np.asarray(medians, dtype=np.float64)


def _curve(label: str, unit: str, series: Series, origin_ns: int, edges: NDArray[np.float64]) -> Curve:
    t_s = (series.t_ns - origin_ns).astype(np.float64) / 1e9
    keep = np.isfinite(series.values) & (t_s >= edges[0]) & (t_s <= edges[-1])
    centres, medians = _binned(t_s[keep], series.values[keep], edges, np.ones(int(keep.sum())))
    return Curve(label, unit, centres, medians)


def sustained_series(
    iterations: Iterations,
    trace: TraceLike | None = None,
    *,
    time_to_throttle_s: float | None = None,
    sources: SourceNames = DEFAULT_SOURCES,
    bins: int = SERIES_BINS,
) -> SustainedSeries | None:
    """The series of one sustained run from its measured iterations and its sampler trace (CPU
    policies' and GPU clocks, the temperature farm's metrics use), binned into `bins` steps over
    the run; None without printed iterations. `time_to_throttle_s` (the throttle watch's metric)
    is marked and splits the latency into before and after."""
    if iterations.printed == 0:
        return None
    starts = [int(iterations.t_start_ns.min())]
    names = tuple(getattr(trace, "source_names", ())) if trace is not None else ()
    found = [s for s in (trace.series(n) for n in names) if s is not None and len(s)] if trace else []
    if found:
        starts.append(min(int(s.t_ns[0]) for s in found))
    origin_ns = min(starts)
    at_s = (iterations.t_start_ns - origin_ns).astype(np.float64) / 1e9
    duration_s = float(iterations.t_end_ns.max() - origin_ns) / 1e9
    edges = np.linspace(0.0, max(duration_s, 1e-9), max(1, bins) + 1)
    weight = iterations.weight if iterations.weight is not None else np.ones(iterations.printed)
    latency = iterations.latency_ms
    centres, medians = _binned(at_s, latency, edges, weight)
    clocks = []
    for name in names:
        series = trace.series(name) if trace is not None else None
        if series is None or len(series) == 0:
            continue
        if name.startswith(sources.cpu_freq_prefix):  # scaling_cur_freq: kHz
            mhz = Series(series.t_ns, series.values / 1000.0)
            clocks.append(_curve(f"cpu {name[len(sources.cpu_freq_prefix) :]}", "MHz", mhz, origin_ns, edges))
    gpu = trace.series(sources.gpu_freq) if trace is not None else None
    if gpu is not None and len(gpu):
        clocks.append(_curve("gpu", "MHz", Series(gpu.t_ns, to_mhz(gpu.values)), origin_ns, edges))
    temperature = None
    temp_name = temperature_source(trace, sources.temperature) if trace is not None else None
    temp = trace.series(temp_name) if trace is not None and temp_name else None
    if temp is not None and len(temp):
        celsius = Series(temp.t_ns, to_celsius(temp.values))
        temperature = _curve(temp_name or "temperature", "°C", celsius, origin_ns, edges)
    before = after = None
    if time_to_throttle_s is not None:
        early = at_s < time_to_throttle_s
        before = _weighted_median(latency[early], weight[early]) if early.any() else None
        after = _weighted_median(latency[~early], weight[~early]) if (~early).any() else None
    return SustainedSeries(
        latency=Curve("latency", "ms", centres, medians),
        clocks=tuple(clocks),
        temperature=temperature,
        throttle_s=time_to_throttle_s,
        latency_before_ms=before,
        latency_after_ms=after,
        duration_s=duration_s,
        origin_ns=origin_ns,
    )
