"""Regression detection over a history of nightly points: pure, no store, no clock.

A *point* is one value of one metric for one cell on one phone from one nightly execution (the
median of that night's repetitions). For each (cell, phone, metric) the newest point is held
against the previous `window` points (at least MIN_HISTORY_POINTS, as FAI-PEP requires; fewer
gives the verdict INSUFFICIENT_HISTORY rather than a guess):

    baseline  = median(history)
    noise     = MAD(history) x 1.4826      (robust standard deviation; one slow night does not
                                            widen it the way a standard deviation would)
    threshold = max(threshold_pct % of |baseline|, k x noise)

and the change new - baseline is a REGRESSION when it exceeds the threshold in the metric's bad
direction (latency or energy up, throughput down), an IMPROVEMENT past it the other way, else
UNCHANGED. The percentage floor (IREE uses 5 %) keeps quiet benchmarks from flagging jitter; the
noise term keeps noisy ones (GPU under background load) from flagging their usual spread.

    findings = detect(points, RegressionPolicy(threshold_pct=5.0))
    flagged = [f for f in findings if f.verdict is Verdict.REGRESSION]
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from farm.analysis import stats

MIN_HISTORY_POINTS = 5
DEFAULT_WINDOW = 10
DEFAULT_THRESHOLD_PCT = 5.0
DEFAULT_NOISE_K = 3.0
MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution x this = its standard deviation
DEFAULT_METRICS: tuple[str, ...] = ("latency_median_ms", "energy_per_inference_mj")


class Direction(enum.StrEnum):
    LOWER_IS_BETTER = "lower_is_better"
    HIGHER_IS_BETTER = "higher_is_better"


class Verdict(enum.StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    INSUFFICIENT_HISTORY = "insufficient_history"


# Metrics where more is better; everything else farm stores (latency, energy, power, memory,
# temperature) is better lower.
_HIGHER_IS_BETTER_SUFFIXES = ("_per_s", "_gflops", "_reached")


def direction_of(metric: str) -> Direction:
    if metric.endswith(_HIGHER_IS_BETTER_SUFFIXES) or metric.startswith("throughput"):
        return Direction.HIGHER_IS_BETTER
    return Direction.LOWER_IS_BETTER


@dataclass(frozen=True)
class Point:
    """One nightly value: `series` is the execution it came from (ordered by `order`)."""

    cell_id: str
    device: str
    metric: str
    value: float
    series: str
    order: float  # e.g. the nightly's slot time: larger is newer
    factors: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RegressionPolicy:
    metrics: tuple[str, ...] = DEFAULT_METRICS
    threshold_pct: float = DEFAULT_THRESHOLD_PCT
    noise_k: float = DEFAULT_NOISE_K
    window: int = DEFAULT_WINDOW
    min_history: int = MIN_HISTORY_POINTS

    def __post_init__(self) -> None:
        if self.threshold_pct < 0 or self.noise_k < 0:
            raise ValueError("threshold_pct and noise_k must be >= 0")
        if self.min_history < 1 or self.window < self.min_history:
            raise ValueError(f"need 1 <= min_history <= window, got {self.min_history}, {self.window}")


@dataclass(frozen=True)
class Finding:
    cell_id: str
    device: str
    metric: str
    factors: Mapping[str, Any]
    verdict: Verdict
    new_value: float
    new_series: str
    history_n: int
    baseline: float | None = None  # median of the history
    noise: float | None = None  # robust standard deviation of the history
    threshold: float | None = None  # absolute, in the metric's unit

    @property
    def change(self) -> float | None:
        return None if self.baseline is None else self.new_value - self.baseline

    @property
    def change_pct(self) -> float | None:
        if self.baseline is None or self.baseline == 0:
            return None
        return 100.0 * (self.new_value - self.baseline) / abs(self.baseline)

    def to_json(self) -> dict[str, Any]:
        return {
            "cell_id": self.cell_id,
            "device": self.device,
            "metric": self.metric,
            "factors": dict(self.factors),
            "verdict": self.verdict.value,
            "baseline": self.baseline,
            "new_value": self.new_value,
            "new_series": self.new_series,
            "change": self.change,
            "change_pct": self.change_pct,
            "noise": self.noise,
            "threshold": self.threshold,
            "history_n": self.history_n,
        }


def judge(
    history: Sequence[float], new_value: float, metric: str, policy: RegressionPolicy
) -> tuple[Verdict, float | None, float | None, float | None]:
    """(verdict, baseline, noise, threshold) of `new_value` against `history` (oldest first)."""
    recent = list(history)[-policy.window :]
    if len(recent) < policy.min_history:
        return Verdict.INSUFFICIENT_HISTORY, None, None, None
    baseline = stats.median(recent)
    noise = MAD_TO_SIGMA * stats.mad(recent)
    threshold = max(policy.threshold_pct / 100.0 * abs(baseline), policy.noise_k * noise)
    change = new_value - baseline
    worse = change if direction_of(metric) is Direction.LOWER_IS_BETTER else -change
    if worse > threshold:
        verdict = Verdict.REGRESSION
    elif worse < -threshold:
        verdict = Verdict.IMPROVEMENT
    else:
        verdict = Verdict.UNCHANGED
    return verdict, baseline, noise, threshold


def detect(points: Iterable[Point], policy: RegressionPolicy | None = None) -> list[Finding]:
    """Judge the newest point of every (cell, device, metric) in `policy.metrics`.

    Only series that are the newest overall count as "new": a cell that did not run in the latest
    nightly is not judged on a stale value. Two points of one series for one cell (should not
    happen: points are per-night medians) keep the last given.
    """
    policy = policy or RegressionPolicy()
    wanted = set(policy.metrics)
    by_key: dict[tuple[str, str, str], dict[str, Point]] = {}
    newest_order: float | None = None
    newest_series: set[str] = set()
    for point in points:
        if point.metric not in wanted:
            continue
        by_key.setdefault((point.cell_id, point.device, point.metric), {})[point.series] = point
        if newest_order is None or point.order > newest_order:
            newest_order, newest_series = point.order, {point.series}
        elif point.order == newest_order:
            newest_series.add(point.series)
    findings = []
    for (cell_id, device, metric), series in sorted(by_key.items()):
        ordered = sorted(series.values(), key=lambda p: p.order)
        newest = ordered[-1]
        if newest.series not in newest_series:
            continue
        history = [p.value for p in ordered[:-1]]
        verdict, baseline, noise, threshold = judge(history, newest.value, metric, policy)
        findings.append(
            Finding(
                cell_id,
                device,
                metric,
                newest.factors,
                verdict,
                newest.value,
                newest.series,
                min(len(history), policy.window),
                baseline,
                noise,
                threshold,
            )
        )
    return findings


def regressions(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.verdict is Verdict.REGRESSION]


def describe(finding: Finding) -> str:
    """One line: metric, verdict, phone, cell, old median -> new value (change, threshold)."""
    cell = " ".join(f"{k}={v}" for k, v in sorted(finding.factors.items())) or finding.cell_id
    change = f"{finding.change_pct:+.1f}%" if finding.change_pct is not None else "n/a"
    baseline = f"{finding.baseline:.4g}" if finding.baseline is not None else "n/a"
    threshold = f"{finding.threshold:.3g}" if finding.threshold is not None else "n/a"
    return (
        f"{finding.metric} {finding.verdict.value} on {finding.device} [{cell}]: "
        f"{baseline} -> {finding.new_value:.4g} ({change}, threshold {threshold})"
    )
