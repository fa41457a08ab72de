"""Verdicts on claims from samples with known effects: reproduced, contradicted, too few runs."""

from __future__ import annotations

import numpy as np
import pytest

from farm.analysis.verdict import Hypothesis, Verdict, level_test, ratio_test, sign_test_min_p

FASTER = Hypothesis("speedup of gpu over cpu", 1.0)


def _noisy(center: float, n: int, seed: int) -> np.ndarray:
    return center * (1 + 0.03 * np.random.default_rng(seed).standard_normal(n))


def test_a_clear_speedup_is_reproduced_with_its_ratio_ci_and_p() -> None:
    judged = ratio_test(_noisy(30.0, 5, 1), _noisy(10.0, 5, 2), FASTER)
    assert judged.verdict is Verdict.REPRODUCED and judged.reason == ""
    evidence = judged.evidence
    assert evidence is not None and evidence.effect == pytest.approx(3.0, rel=0.05)
    assert evidence.ci is not None and 1.0 < evidence.ci.low < 3.0 < evidence.ci.high
    # 5 vs 5 with no overlap: the exact two-sided Mann-Whitney p is 2 / C(10, 5)
    assert evidence.p_value == pytest.approx(2 / 252) and evidence.runs == (5, 5)


def test_the_opposite_effect_is_not_reproduced_and_says_which_side() -> None:
    judged = ratio_test(_noisy(10.0, 4, 1), _noisy(25.0, 4, 2), FASTER)
    assert judged.verdict is Verdict.NOT_REPRODUCED
    assert "below 1, not above" in judged.reason


def test_one_run_a_side_is_undecided_has_no_interval_and_names_the_smallest_p() -> None:
    judged = ratio_test([30.0], [10.0], FASTER)
    assert judged.verdict is Verdict.UNDECIDED
    assert judged.evidence is not None and judged.evidence.ci is None
    assert "can give no p below 1" in judged.reason


def test_three_runs_a_side_cannot_reach_alpha_even_with_an_8x_effect() -> None:
    judged = ratio_test(_noisy(80.0, 3, 1), _noisy(10.0, 3, 2), FASTER)
    assert judged.verdict is Verdict.UNDECIDED and "0.1" in judged.reason


def test_a_threshold_other_than_one_is_tested_as_a_scale_shift() -> None:
    share = Hypothesis("cpu-mt share of the gpu's speedup", 0.7)
    # gpu / cpu-mt = 0.5: below the claimed 0.7
    judged = ratio_test(_noisy(10.0, 5, 1), _noisy(20.0, 5, 2), share)
    assert judged.verdict is Verdict.NOT_REPRODUCED
    judged = ratio_test(_noisy(18.0, 5, 1), _noisy(20.0, 5, 2), share)
    assert judged.verdict is Verdict.REPRODUCED


def test_a_level_claim_uses_the_sign_test() -> None:
    below = Hypothesis("energy per image [mJ]", 600.0, above=False)
    judged = level_test(_noisy(200.0, 6, 3), below)
    assert judged.verdict is Verdict.REPRODUCED
    assert judged.evidence is not None and judged.evidence.p_value == pytest.approx(2 * 0.5**6)
    assert level_test(_noisy(200.0, 5, 3), below).verdict is Verdict.UNDECIDED  # 5 runs: p >= 0.0625
    assert sign_test_min_p(5) == pytest.approx(0.0625)


def test_ties_never_give_a_p_below_what_the_run_counts_allow() -> None:
    # tied values push scipy to its normal approximation (p 0.046 here, below the exact 2/35)
    judged = ratio_test([30.0, 30.0, 31.0, 31.0], [10.0, 10.0, 11.0], FASTER)
    assert judged.evidence is not None
    assert judged.evidence.p_value >= judged.evidence.min_p == pytest.approx(2 / 35)
    assert judged.verdict is Verdict.UNDECIDED
