"""Regression detection on synthetic nightly histories: noise, step changes, direction, too few points."""

from __future__ import annotations

import pytest

from farm.analysis.regression import (
    MIN_HISTORY_POINTS,
    Direction,
    Point,
    RegressionPolicy,
    Verdict,
    detect,
    direction_of,
    judge,
    regressions,
)


def _series(
    values: list[float], metric: str = "latency_median_ms", cell: str = "c1", device: str = "local/A"
):
    return [
        Point(cell, device, metric, value, f"night{i}", float(i), {"hidden": 32})
        for i, value in enumerate(values)
    ]


def test_a_step_up_in_latency_beyond_the_threshold_is_a_regression() -> None:
    history = [10.0, 10.1, 9.9, 10.0, 10.05, 9.95]
    (finding,) = detect(_series([*history, 11.0]))
    assert finding.verdict is Verdict.REGRESSION
    assert finding.baseline == pytest.approx(10.0)
    assert finding.change_pct == pytest.approx(10.0)
    assert finding.history_n == 6
    assert finding.new_series == "night6"
    assert finding.threshold == pytest.approx(0.5)  # 5 % of 10 ms beats 3 x the small noise


def test_a_change_inside_the_percentage_floor_is_unchanged() -> None:
    (finding,) = detect(_series([10.0] * 6 + [10.4]))
    assert finding.verdict is Verdict.UNCHANGED


def test_noisy_history_widens_the_threshold() -> None:
    noisy = [9.4, 10.6, 9.5, 10.5, 9.6, 10.4, 10.0, 9.3, 10.7, 10.0]  # a GPU under load: +-6 %
    (finding,) = detect(_series([*noisy, 11.0]))  # +10 %: inside 3 sigma of this benchmark
    assert finding.verdict is Verdict.UNCHANGED
    assert finding.threshold is not None and finding.threshold > 0.5
    quiet = [10.0 + 0.01 * (i % 3) for i in range(10)]
    (quiet_finding,) = detect(_series([*quiet, 11.0]))
    assert quiet_finding.verdict is Verdict.REGRESSION


def test_one_outlier_night_in_the_history_does_not_hide_a_step() -> None:
    history = [10.0, 10.1, 9.9, 30.0, 10.0, 10.05]  # one night under thermal throttling
    (finding,) = detect(_series([*history, 11.5]))
    assert finding.verdict is Verdict.REGRESSION  # MAD ignores the outlier a std would not


def test_direction_latency_down_is_an_improvement_throughput_down_a_regression() -> None:
    (faster,) = detect(_series([10.0] * 6 + [8.0]))
    assert faster.verdict is Verdict.IMPROVEMENT
    policy = RegressionPolicy(metrics=("throughput_per_s",))
    (slower,) = detect(_series([100.0] * 6 + [80.0], metric="throughput_per_s"), policy)
    assert slower.verdict is Verdict.REGRESSION
    assert direction_of("energy_per_inference_mj") is Direction.LOWER_IS_BETTER
    assert direction_of("throughput_per_s") is Direction.HIGHER_IS_BETTER


def test_too_few_history_points_are_not_judged() -> None:
    (finding,) = detect(_series([10.0] * (MIN_HISTORY_POINTS - 1) + [50.0]))
    assert finding.verdict is Verdict.INSUFFICIENT_HISTORY
    assert finding.baseline is None and finding.change is None
    assert regressions([finding]) == []
    (enough,) = detect(_series([10.0] * MIN_HISTORY_POINTS + [50.0]))
    assert enough.verdict is Verdict.REGRESSION


def test_only_the_window_of_latest_points_is_the_history() -> None:
    old_slow = [20.0] * 10
    recent = [10.0] * 5
    policy = RegressionPolicy(window=5)
    (finding,) = detect(_series([*old_slow, *recent, 10.2]), policy)
    assert finding.baseline == pytest.approx(10.0) and finding.verdict is Verdict.UNCHANGED
    assert finding.history_n == 5


def test_threshold_pct_is_a_knob() -> None:
    values = [10.0] * 6 + [10.8]
    assert detect(_series(values), RegressionPolicy(threshold_pct=5))[0].verdict is Verdict.REGRESSION
    assert detect(_series(values), RegressionPolicy(threshold_pct=10))[0].verdict is Verdict.UNCHANGED


def test_cells_phones_and_metrics_are_judged_separately_and_stale_cells_are_not() -> None:
    points = (
        _series([10.0] * 6 + [12.0], cell="slow")
        + _series([10.0] * 6 + [10.0], cell="fine")
        + _series([10.0] * 6 + [12.0], device="local/B")
        + _series([5.0] * 6 + [5.0], metric="energy_per_inference_mj")
        + _series([1.0] * 6 + [9.0], metric="power_mean_mw")  # not asked for
        + _series([10.0] * 6, cell="gone")  # did not run in the newest night (night6)
    )
    findings = {(f.cell_id, f.device, f.metric): f.verdict for f in detect(points)}
    assert findings == {
        ("slow", "local/A", "latency_median_ms"): Verdict.REGRESSION,
        ("fine", "local/A", "latency_median_ms"): Verdict.UNCHANGED,
        ("c1", "local/B", "latency_median_ms"): Verdict.REGRESSION,
        ("c1", "local/A", "energy_per_inference_mj"): Verdict.UNCHANGED,
    }


def test_judge_and_policy_validation() -> None:
    verdict, baseline, noise, threshold = judge(
        [2.0, 2.0, 2.0, 2.0, 2.0], 2.0, "latency_median_ms", RegressionPolicy()
    )
    assert (verdict, baseline, noise, threshold) == (Verdict.UNCHANGED, 2.0, 0.0, pytest.approx(0.1))
    with pytest.raises(ValueError):
        RegressionPolicy(min_history=6, window=5)
    with pytest.raises(ValueError):
        RegressionPolicy(threshold_pct=-1)
