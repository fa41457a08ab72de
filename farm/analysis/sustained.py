"""Sustained-run metrics (pure): how a run's latency drifts as the phone heats up.

A sustained run (measurement.sustained_s) measures for a fixed wall time; its iterations are a
latency-over-time series. The initial latency is the median of the iterations that started in
the first INITIAL_SHARE of the window, the steady one the median of the last STEADY_SHARE; their
ratio steady / initial is above 1 when the phone slowed down (throttling) and about 1 when it
sustained its speed. The series itself is in the run's stdout.jsonl (t_start_ns, t_end_ns). A
program that printed only its first iterations and a uniform sample of the rest
(farm.analysis.iterations) gives weighted medians: each sampled iteration stands for as many as
it was drawn from.
"""

from __future__ import annotations

import numpy as np

from farm.analysis.iterations import Iterations
from farm.analysis.metric import Metric

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
