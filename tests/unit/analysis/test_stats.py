import numpy as np
import pytest

from farm.analysis import stats


def test_median_mean_std_against_numpy() -> None:
    rng = np.random.default_rng(1)
    values = rng.lognormal(mean=1.0, sigma=0.5, size=501)
    assert stats.median(values) == pytest.approx(float(np.median(values)))
    assert stats.mean(values) == pytest.approx(float(np.mean(values)))
    assert stats.std(values) == pytest.approx(float(np.std(values, ddof=1)))
    for q in (5, 10, 90, 95, 99):
        assert stats.percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_hand_computed_values() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 100.0]
    assert stats.median(values) == 3.0
    assert stats.mean(values) == 22.0
    # |x - 3| = 2, 1, 0, 1, 97 -> median 1
    assert stats.mad(values) == 1.0
    # linear interpolation: position 0.1 * 4 = 0.4 between 1 and 2
    assert stats.percentile(values, 10) == pytest.approx(1.4)
    assert stats.std([5.0]) == 0.0


def test_rejects_empty_and_nan() -> None:
    with pytest.raises(ValueError):
        stats.median([])
    with pytest.raises(ValueError):
        stats.mean([1.0, float("nan")])
    with pytest.raises(ValueError):
        stats.percentile([1.0], 101)


def test_bootstrap_ci_is_seeded_and_covers_median() -> None:
    rng = np.random.default_rng(7)
    values = rng.normal(10.0, 2.0, size=200)
    first = stats.bootstrap_median_ci(values, seed=3)
    second = stats.bootstrap_median_ci(values, seed=3)
    other = stats.bootstrap_median_ci(values, seed=4)
    assert first == second
    assert first != other
    assert first.contains(stats.median(values))
    assert first.low < first.high
    # a 95% CI of the median of 200 N(10, 2) samples is roughly +-0.35 wide; not absurd
    assert 0.1 < first.high - first.low < 1.5


def test_bootstrap_ci_narrows_with_more_data_and_covers_true_median() -> None:
    rng = np.random.default_rng(11)
    small = stats.bootstrap_median_ci(rng.exponential(1.0, size=50))
    large = stats.bootstrap_median_ci(rng.exponential(1.0, size=2000))
    assert large.high - large.low < small.high - small.low
    assert large.contains(np.log(2.0))  # true median of Exp(1)


def test_bootstrap_single_value() -> None:
    ci = stats.bootstrap_median_ci([4.2])
    assert (ci.low, ci.high) == (4.2, 4.2)


def test_summarise_collects_everything() -> None:
    values = np.arange(1.0, 101.0)
    summary = stats.summarise(values)
    assert summary.count == 100
    assert summary.median == 50.5
    assert summary.percentiles[99.0] == pytest.approx(np.percentile(values, 99))
    assert summary.median_ci.contains(50.5)
