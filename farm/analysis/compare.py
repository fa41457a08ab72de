"""A/B statistics (pure): is configuration B faster or slower than A on one phone, and how sure?

Each side is a sample of per-run values (one latency median per run: runs are the replicates;
iterations inside a run share its clocks and temperature, so they are not independent). For each
pair of samples:
- the ratio of medians B/A with a percentile-bootstrap confidence interval (both sides resampled);
- the two-sided Mann-Whitney U p-value (scipy; exact for small samples without ties);
- across all pairs of one comparison, Holm's step-down adjustment of the p-values;
- a verdict: "no detectable difference" when the CI spans 1 or the adjusted p-value is not below
  alpha, else faster / slower.

With n runs per side the smallest possible two-sided exact p is 2 / C(2n, n): 0.1 for 3 vs 3,
0.029 for 4 vs 4, 0.0079 for 5 vs 5. `min_p_value` says it, so a caller can tell "no difference"
from "too few runs to see one".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from math import comb

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as scipy_stats

from farm.analysis.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, ConfidenceInterval

DEFAULT_ALPHA = 0.05
DEFAULT_LEVEL = 0.95


class Verdict(StrEnum):
    FASTER = "faster"  # B's values are lower (latency: B is faster)
    SLOWER = "slower"
    NO_DIFFERENCE = "no detectable difference"


@dataclass(frozen=True)
class Comparison:
    """B against A for one pair of samples. `p_adjusted` is the Holm-adjusted p (equal to
    p_value until adjust_holm has seen the whole family)."""

    n_a: int
    n_b: int
    median_a: float
    median_b: float
    ratio: float  # median_b / median_a
    ratio_ci: ConfidenceInterval
    p_value: float
    p_adjusted: float
    verdict: Verdict


def _sample(values: ArrayLike, side: str) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64).ravel()
    if array.size == 0:
        raise ValueError(f"no values on side {side}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"side {side} has NaN or infinite values")
    return array


def min_p_value(n_a: int, n_b: int) -> float:
    """The smallest two-sided exact Mann-Whitney p-value samples of these sizes can reach."""
    return min(1.0, 2.0 / comb(n_a + n_b, n_a))


def bootstrap_ratio_ci(
    a: NDArray[np.float64],
    b: NDArray[np.float64],
    *,
    level: float = DEFAULT_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> ConfidenceInterval:
    """Percentile-bootstrap CI of median(b) / median(a), each side resampled on its own."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be within (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    med_a = np.median(a[rng.integers(0, a.size, size=(resamples, a.size))], axis=1)
    med_b = np.median(b[rng.integers(0, b.size, size=(resamples, b.size))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = med_b / med_a
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        raise ValueError("side A's median is 0: a ratio is not defined")
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return ConfidenceInterval(float(low), float(high), level)


def _verdict(ratio: float, ci: ConfidenceInterval, p_adjusted: float, alpha: float) -> Verdict:
    if ci.contains(1.0) or p_adjusted >= alpha:
        return Verdict.NO_DIFFERENCE
    return Verdict.FASTER if ratio < 1.0 else Verdict.SLOWER


def compare_samples(
    a: ArrayLike,
    b: ArrayLike,
    *,
    alpha: float = DEFAULT_ALPHA,
    level: float = DEFAULT_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Comparison:
    """B against A (see the module docstring). Raises ValueError for an empty or non-finite side."""
    xa, xb = _sample(a, "A"), _sample(b, "B")
    median_a, median_b = float(np.median(xa)), float(np.median(xb))
    if median_a == 0.0:
        raise ValueError("side A's median is 0: a ratio is not defined")
    ci = bootstrap_ratio_ci(xa, xb, level=level, resamples=resamples, seed=seed)
    if np.ptp(np.concatenate([xa, xb])) == 0.0:
        p = 1.0  # every value equal: scipy would divide by a zero variance
    else:
        p = float(scipy_stats.mannwhitneyu(xb, xa, alternative="two-sided").pvalue)
    ratio = median_b / median_a
    return Comparison(xa.size, xb.size, median_a, median_b, ratio, ci, p, p, _verdict(ratio, ci, p, alpha))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order (monotone, capped at 1)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def adjust_holm(comparisons: Sequence[Comparison], *, alpha: float = DEFAULT_ALPHA) -> list[Comparison]:
    """The family's comparisons with Holm-adjusted p-values and verdicts that use them."""
    adjusted = holm([c.p_value for c in comparisons])
    return [
        replace(c, p_adjusted=p, verdict=_verdict(c.ratio, c.ratio_ci, p, alpha))
        for c, p in zip(comparisons, adjusted, strict=True)
    ]
