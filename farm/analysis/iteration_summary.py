"""A benchmark's `iter_summary` event (kernels/README.md "Output"): exact statistics of every measured
iteration when the program printed `iter` events for only the first --iteration-events of them.

Count, window, mean, std, min, max and the OpenCL split sums are exact. Quantiles come from the
wall-time histogram, whose bin k holds [2^(k/B), 2^((k+1)/B)) ns (B bins per octave, 64 in farm's
programs): each order statistic is read as its bin's geometric midpoint, within a factor
2^(1/(2B)) of the true value, so a percentile (numpy's linear interpolation between two order
statistics) is within `relative_error` (0.54% for B = 64) of what all iterations give. The median's
confidence interval is the distribution-free order-statistic interval (ranks n/2 -+ z sqrt(n) / 2),
which the bootstrap interval of all iterations matches for the thousands of iterations that make
a program stop printing. The MAD is off by at most relative_error x (2 median + MAD).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from farm.analysis import stats

# Two-sided 95% normal quantile: the level stats.bootstrap_median_ci reports by default.
Z_95 = 1.959963984540054


@dataclass(frozen=True)
class LatencyHistogram:
    """Counts of wall times per log-spaced bin; `index` ascending, `count` > 0."""

    bins_per_octave: int
    index: NDArray[np.int64]
    count: NDArray[np.int64]

    @property
    def total(self) -> int:
        return int(self.count.sum())

    @property
    def relative_error(self) -> float:
        """Largest relative error of a quantile read from the histogram."""
        return float(2.0 ** (1.0 / (2 * self.bins_per_octave)) - 1.0)

    def _midpoints_ms(self) -> NDArray[np.float64]:
        return np.asarray(2.0 ** ((self.index + 0.5) / self.bins_per_octave) / 1e6, dtype=np.float64)

    def order_statistic_ms(self, rank: NDArray[np.int64]) -> NDArray[np.float64]:
        """The 0-based rank-th smallest wall times, as their bins' midpoints."""
        return _order_statistic(self._midpoints_ms(), self.count, rank)

    def percentile_ms(self, q: float) -> float:
        """numpy's default (linear) percentile, 0..100."""
        position = q / 100.0 * (self.total - 1)
        low = math.floor(position)
        values = self.order_statistic_ms(np.array([low, min(low + 1, self.total - 1)], dtype=np.int64))
        return float(values[0] + (position - low) * (values[1] - values[0]))

    def mad_ms(self, median_ms: float) -> float:
        """Median absolute deviation from median_ms, each bin at its midpoint."""
        deviation = np.abs(self._midpoints_ms() - median_ms)
        order = np.argsort(deviation, kind="stable")
        n = self.total
        middle = np.array([(n - 1) // 2, n // 2], dtype=np.int64)  # one rank twice for odd n
        return float(np.mean(_order_statistic(deviation[order], self.count[order], middle)))


def _order_statistic(
    values: NDArray[np.float64], counts: NDArray[np.int64], rank: NDArray[np.int64]
) -> NDArray[np.float64]:
    """The rank-th (0-based) of `values` (ascending) each repeated `counts` times."""
    where = np.searchsorted(np.cumsum(counts), rank, side="right")
    return values[np.clip(where, 0, values.size - 1)]


@dataclass(frozen=True)
class IterationSummary:
    """Every measured iteration of a run, summarised by the program itself."""

    iterations: int
    iter_events: int  # `iter` events printed: the first iterations
    samples: int  # `iter_sample` events printed: a uniform sample of the others
    t_start_ns: int
    t_end_ns: int
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    h2d_ns_sum: float | None
    kernel_ns_sum: float | None
    d2h_ns_sum: float | None
    histogram: LatencyHistogram

    @property
    def truncated(self) -> bool:
        """Whether iterations went unprinted (then the summary, not the events, gives statistics)."""
        return self.iterations > self.iter_events

    def latency_summary(self) -> stats.Summary:
        """stats.summarise's figures over all iterations, within the errors the module states."""
        hist = self.histogram
        median = hist.percentile_ms(50.0)
        n = self.iterations
        half_width = Z_95 * math.sqrt(n) / 2.0
        ranks = np.array([math.floor(n / 2.0 - half_width), math.ceil(n / 2.0 + half_width)], dtype=np.int64)
        low, high = hist.order_statistic_ms(np.clip(ranks, 0, n - 1))
        return stats.Summary(
            count=n,
            median=median,
            mean=self.mean_ms,
            std=self.std_ms,
            mad=hist.mad_ms(median),
            percentiles={q: hist.percentile_ms(q) for q in stats.REPORTED_PERCENTILES},
            median_ci=stats.ConfidenceInterval(float(low), float(high), 0.95),
        )


def _int(event: Mapping[str, Any], key: str) -> int:
    value = event.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"iter_summary without a non-negative integer {key}")
    return value


def _float(event: Mapping[str, Any], key: str) -> float:
    value = event.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"iter_summary without a finite number {key}")
    return float(value)


def _optional(event: Mapping[str, Any], key: str) -> float | None:
    return _float(event, key) if event.get(key) is not None else None


def parse_iteration_summary(event: Mapping[str, Any]) -> IterationSummary:
    """An `iter_summary` event; ValueError naming the bad field."""
    bins = event.get("hist")
    if not isinstance(bins, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int) and v >= 0 for v in pair)
        for pair in bins
    ):
        raise ValueError("iter_summary `hist` is not a list of [bin, count] integer pairs")
    pairs = np.array(sorted(bins), dtype=np.int64).reshape(-1, 2)
    histogram = LatencyHistogram(_int(event, "hist_bins_per_octave"), pairs[:, 0], pairs[:, 1])
    iterations = _int(event, "iterations")
    if histogram.total != iterations or iterations == 0 or histogram.bins_per_octave == 0:
        raise ValueError(f"iter_summary histogram holds {histogram.total} of {iterations} iterations")
    return IterationSummary(
        iterations=iterations,
        iter_events=_int(event, "iter_events"),
        samples=_int(event, "samples"),
        t_start_ns=_int(event, "t_start_ns"),
        t_end_ns=_int(event, "t_end_ns"),
        mean_ms=_float(event, "mean_ms"),
        std_ms=_float(event, "std_ms"),
        min_ms=_int(event, "min_ns") / 1e6,
        max_ms=_int(event, "max_ns") / 1e6,
        h2d_ns_sum=_optional(event, "h2d_ns_sum"),
        kernel_ns_sum=_optional(event, "kernel_ns_sum"),
        d2h_ns_sum=_optional(event, "d2h_ns_sum"),
        histogram=histogram,
    )
