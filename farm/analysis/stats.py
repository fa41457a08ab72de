"""Summary statistics for repeated measurements: pure functions over 1-D sequences of floats.

Latency distributions on phones are skewed (a slow first iteration after idle, scheduler hiccups),
so reports lead with the median, percentiles and MAD, and give a bootstrap confidence interval of
the median rather than a normal-theory interval of the mean (field-practices.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

# Resamples for the bootstrap CI: 2000 keeps the percentile endpoints stable to ~1% of the spread
# while staying cheap (a few ms for 10^3 samples).
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20170601
BOOTSTRAP_CHUNK_ELEMENTS = 4_000_000  # ~32 MB of indices per chunk

REPORTED_PERCENTILES: tuple[float, ...] = (5.0, 10.0, 90.0, 95.0, 99.0)


def _as_array(values: ArrayLike) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64).ravel()
    if array.size == 0:
        raise ValueError("no values to summarise")
    if not np.all(np.isfinite(array)):
        raise ValueError("values contain NaN or infinity")
    return array


def median(values: ArrayLike) -> float:
    return float(np.median(_as_array(values)))


def mean(values: ArrayLike) -> float:
    return float(np.mean(_as_array(values)))


def std(values: ArrayLike) -> float:
    """Sample standard deviation (ddof=1); 0.0 for a single value."""
    array = _as_array(values)
    return float(np.std(array, ddof=1)) if array.size > 1 else 0.0


def percentile(values: ArrayLike, q: float) -> float:
    """The q-th percentile (0..100), linear interpolation between order statistics (numpy's default)."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    return float(np.percentile(_as_array(values), q))


def mad(values: ArrayLike) -> float:
    """Median absolute deviation from the median (unscaled: not multiplied by 1.4826)."""
    array = _as_array(values)
    return float(np.median(np.abs(array - np.median(array))))


@dataclass(frozen=True)
class ConfidenceInterval:
    low: float
    high: float
    level: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def bootstrap_median_ci(
    values: ArrayLike,
    *,
    level: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> ConfidenceInterval:
    """Percentile-bootstrap confidence interval of the median; seeded, so reports are reproducible."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be within (0, 1), got {level}")
    array = _as_array(values)
    if array.size == 1:
        return ConfidenceInterval(float(array[0]), float(array[0]), level)
    rng = np.random.default_rng(seed)
    # Resample in chunks: a run of tiny iterations has 10^4-10^5 of them, and all resamples at
    # once would take gigabytes.
    per_chunk = max(1, BOOTSTRAP_CHUNK_ELEMENTS // array.size)
    medians = np.empty(resamples, dtype=np.float64)
    for first in range(0, resamples, per_chunk):
        count = min(per_chunk, resamples - first)
        indices = rng.integers(0, array.size, size=(count, array.size))
        medians[first : first + count] = np.median(array[indices], axis=1)
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(medians, [tail, 100.0 - tail])
    return ConfidenceInterval(float(low), float(high), level)


@dataclass(frozen=True)
class Summary:
    """The distribution summary every latency-like metric gets."""

    count: int
    median: float
    mean: float
    std: float
    mad: float
    percentiles: dict[float, float]
    median_ci: ConfidenceInterval


def summarise(values: Sequence[float] | ArrayLike, *, seed: int = BOOTSTRAP_SEED) -> Summary:
    array = _as_array(values)
    return Summary(
        count=int(array.size),
        median=median(array),
        mean=mean(array),
        std=std(array),
        mad=mad(array),
        percentiles={q: percentile(array, q) for q in REPORTED_PERCENTILES},
        median_ci=bootstrap_median_ci(array, seed=seed),
    )
