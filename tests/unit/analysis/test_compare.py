"""A/B statistics on synthetic data: the false-positive rate over seeds, a real 2x found, Holm
against its hand-computed definition, the exact p-value floor, and the verdict rule."""

from __future__ import annotations

import numpy as np
import pytest

from farm.analysis.compare import Verdict, adjust_holm, compare_samples, holm, min_p_value

RUNS_PER_SIDE = 8
SEEDS = 300


def _latencies(rng: np.random.Generator, median_ms: float, n: int) -> np.ndarray:
    # Phone latencies are right-skewed: lognormal around the median, ~8% spread.
    return median_ms * rng.lognormal(0.0, 0.08, size=n)


def test_identical_configurations_rarely_differ_over_seeds() -> None:
    """Two samples of one distribution: "different" at most about alpha of the time."""
    false_positives = 0
    p_values = []
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        a, b = _latencies(rng, 10.0, RUNS_PER_SIDE), _latencies(rng, 10.0, RUNS_PER_SIDE)
        result = compare_samples(a, b, resamples=400, seed=seed)
        p_values.append(result.p_value)
        false_positives += result.verdict is not Verdict.NO_DIFFERENCE
    rate = false_positives / SEEDS
    # alpha = 0.05; binomial sd over 300 seeds is 0.013, so 0.09 is > 3 sd above it.
    assert rate <= 0.09, rate
    # The p-values of a true null are roughly uniform: their median is near 0.5, not near 0.
    assert 0.35 <= float(np.median(p_values)) <= 0.65


def test_a_real_2x_is_found_with_p_below_0_01() -> None:
    rng = np.random.default_rng(7)
    fast, slow = _latencies(rng, 10.0, 6), _latencies(rng, 20.0, 6)
    result = compare_samples(fast, slow)
    assert result.p_value < 0.01
    assert result.verdict is Verdict.SLOWER
    assert 1.8 <= result.ratio <= 2.2
    assert result.ratio_ci.low > 1.0 and result.ratio_ci.contains(result.ratio)
    assert compare_samples(slow, fast).verdict is Verdict.FASTER


def test_ratio_is_b_over_a_medians() -> None:
    result = compare_samples([1.0, 2.0, 3.0], [4.0, 6.0, 8.0])
    assert (result.median_a, result.median_b, result.ratio) == (2.0, 6.0, 3.0)
    assert (result.n_a, result.n_b) == (3, 3)


def test_three_runs_per_side_cannot_reach_significance() -> None:
    # Exact two-sided MWU: 2 / C(6, 3) = 0.1, whatever the effect.
    assert min_p_value(3, 3) == pytest.approx(0.1)
    assert min_p_value(5, 5) == pytest.approx(2 / 252)
    result = compare_samples([1.0, 1.1, 1.2], [10.0, 11.0, 12.0])
    assert result.p_value == pytest.approx(0.1)
    assert result.verdict is Verdict.NO_DIFFERENCE


def test_holm_matches_its_definition() -> None:
    # sorted p: 0.01 (x4 = 0.04), 0.02 (x3 = 0.06), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 -> max 0.06)
    assert holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_holm_turns_a_borderline_cell_into_no_difference() -> None:
    rng = np.random.default_rng(3)
    strong = compare_samples(_latencies(rng, 10, 8), _latencies(rng, 20, 8))
    borderline = compare_samples([10.0, 10.2, 10.4, 10.1, 10.3], [10.5, 10.6, 10.35, 10.7, 10.8])
    assert borderline.p_value < 0.05 and borderline.verdict is Verdict.SLOWER
    family = adjust_holm([strong, borderline] + [compare_samples([1.0, 2.0], [1.0, 2.0])] * 3)
    assert family[0].verdict is Verdict.SLOWER
    assert family[1].p_adjusted > 0.05 and family[1].verdict is Verdict.NO_DIFFERENCE


def test_all_equal_values_are_no_difference() -> None:
    result = compare_samples([5.0] * 6, [5.0] * 6)
    assert result.p_value == 1.0 and result.ratio == 1.0 and result.verdict is Verdict.NO_DIFFERENCE


@pytest.mark.parametrize(("a", "b"), [([], [1.0]), ([1.0], [float("nan")]), ([0.0, 0.0], [1.0])])
def test_bad_samples_are_refused(a: list[float], b: list[float]) -> None:
    with pytest.raises(ValueError):
        compare_samples(a, b)
