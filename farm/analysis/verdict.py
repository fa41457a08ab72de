"""Verdicts on a paper's claims (pure): does this phone's data reproduce a claim, contradict it,
leave it undecided, or can the claim not be tested on this phone at all?

A claim becomes a one-sided statement about an effect and a threshold ("the GPU's speedup over
cpu is above 1", "the share of time moving data is above 0.5"), tested on runs as replicates
(one value per run; iterations inside a run share its clocks and are not independent):
- a ratio of medians between two samples (`ratio_test`): the ratio with its percentile-bootstrap
  CI (farm.analysis.compare), and the two-sided Mann-Whitney p of the numerator against the
  threshold times the denominator (a scale shift: "ratio = threshold" is the null);
- a sample against a fixed level (`level_test`): the median with its bootstrap CI and the
  two-sided exact sign test's p.
The claim is reproduced when p < alpha, the CI lies wholly on the claimed side, and the effect is
there; not reproduced when the same holds on the other side; otherwise undecided, and the reason
says whether the runs are too few to ever reach alpha (the smallest p they could give) or the
data are simply not clear. A single run per side has no interval: `ci` is None then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as scipy_stats

from farm.analysis.compare import DEFAULT_ALPHA, bootstrap_ratio_ci, min_p_value
from farm.analysis.stats import ConfidenceInterval, bootstrap_median_ci


class Verdict(StrEnum):
    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"
    UNDECIDED = "undecided"  # the runs do not tell either way (too few, or too noisy)
    UNTESTABLE = "cannot be tested on this phone"


@dataclass(frozen=True)
class Hypothesis:
    """What a claim says about an effect: it lies above (or below) `threshold`."""

    effect: str  # what the number is: "speedup of gpu over cpu"
    threshold: float
    above: bool = True

    @property
    def relation(self) -> str:
        return ">" if self.above else "<"


@dataclass(frozen=True)
class Evidence:
    effect: float
    ci: ConfidenceInterval | None  # None when a side has one run: one run is not an interval
    runs: tuple[int, ...]  # runs per side (one entry for a level test)
    p_value: float
    min_p: float  # the smallest p these sample sizes can give


@dataclass(frozen=True)
class Judgement:
    hypothesis: Hypothesis
    verdict: Verdict
    evidence: Evidence | None  # None when the claim cannot be tested
    reason: str  # why, unless reproduced ("" then)


def _sample(values: ArrayLike) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64).ravel()
    return array[np.isfinite(array)]


def untestable(hypothesis: Hypothesis, reason: str) -> Judgement:
    return Judgement(hypothesis, Verdict.UNTESTABLE, None, reason)


def _decide(hypothesis: Hypothesis, evidence: Evidence, alpha: float) -> Judgement:
    side = "above" if hypothesis.above else "below"
    other = "below" if hypothesis.above else "above"
    if evidence.min_p >= alpha:
        runs = " vs ".join(str(n) for n in evidence.runs)
        return Judgement(
            hypothesis,
            Verdict.UNDECIDED,
            evidence,
            f"{runs} runs can give no p below {evidence.min_p:.2g}, not below alpha {alpha:g}: "
            "more repetitions are needed",
        )
    holds = (
        evidence.effect > hypothesis.threshold if hypothesis.above else evidence.effect < hypothesis.threshold
    )
    clear = evidence.ci is not None and not evidence.ci.contains(hypothesis.threshold)
    if evidence.p_value < alpha and clear:
        if holds:
            return Judgement(hypothesis, Verdict.REPRODUCED, evidence, "")
        return Judgement(
            hypothesis,
            Verdict.NOT_REPRODUCED,
            evidence,
            f"the {hypothesis.effect} is {other} {hypothesis.threshold:g}, not {side}",
        )
    why = (
        f"p {evidence.p_value:.2g} is not below alpha {alpha:g}"
        if evidence.p_value >= alpha
        else f"the 95% CI includes {hypothesis.threshold:g}"
    )
    return Judgement(hypothesis, Verdict.UNDECIDED, evidence, why)


def ratio_test(
    numerator: ArrayLike, denominator: ArrayLike, hypothesis: Hypothesis, *, alpha: float = DEFAULT_ALPHA
) -> Judgement:
    """median(numerator) / median(denominator) against the hypothesis's threshold. For a speedup
    of B over A: numerator = A's latencies, denominator = B's."""
    num, den = _sample(numerator), _sample(denominator)
    if num.size == 0 or den.size == 0 or float(np.median(den)) == 0.0:
        return Judgement(hypothesis, Verdict.UNDECIDED, None, "no valid run on one side")
    effect = float(np.median(num) / np.median(den))
    ci = bootstrap_ratio_ci(den, num) if num.size > 1 and den.size > 1 else None
    scaled = hypothesis.threshold * den
    pooled = np.concatenate([num, scaled])
    smallest = min_p_value(num.size, den.size)
    p = 1.0 if np.ptp(pooled) == 0.0 else float(scipy_stats.mannwhitneyu(num, scaled).pvalue)
    # With ties scipy falls back to the normal approximation, which can undercut what any
    # arrangement of these runs could give exactly; never claim more than that.
    p = max(p, smallest)
    evidence = Evidence(effect, ci, (int(num.size), int(den.size)), p, smallest)
    return _decide(hypothesis, evidence, alpha)


def sign_test_min_p(n: int) -> float:
    return min(1.0, 2.0 * 0.5**n) if n > 0 else 1.0


def level_test(values: ArrayLike, hypothesis: Hypothesis, *, alpha: float = DEFAULT_ALPHA) -> Judgement:
    """The median of `values` (one per run) against the hypothesis's threshold: exact sign test."""
    sample = _sample(values)
    if sample.size == 0:
        return Judgement(hypothesis, Verdict.UNDECIDED, None, "no valid run")
    above = int(np.sum(sample > hypothesis.threshold))
    decided = int(np.sum(sample != hypothesis.threshold))
    p = float(scipy_stats.binomtest(above, decided, 0.5).pvalue) if decided else 1.0
    ci = bootstrap_median_ci(sample) if sample.size > 1 else None
    evidence = Evidence(
        float(np.median(sample)), ci, (int(sample.size),), p, sign_test_min_p(int(sample.size))
    )
    return _decide(hypothesis, evidence, alpha)


def tally(judgements: Sequence[Judgement]) -> dict[Verdict, int]:
    """How many judgements reached each verdict, in the enum's order, zeros left out."""
    counts = {verdict: sum(1 for j in judgements if j.verdict is verdict) for verdict in Verdict}
    return {verdict: count for verdict, count in counts.items() if count}
