"""GEMM time model: fitted on synthetic sweeps with a known generating model."""

from __future__ import annotations

import numpy as np
import pytest

from farm.analysis import resource_model as rm
from farm.analysis.resource_model import GemmSample
from farm.errors import ConfigError

TRUE = {"intercept_ms": 0.05, "ms_per_gflop": 20.0, "ms_per_mb": 0.3}


def _shapes(count: int, seed: int = 0) -> list[tuple[int, int, int]]:
    rng = np.random.default_rng(seed)
    dims = rng.integers(16, 2048, size=(count, 3))
    return [(int(m), int(n), int(k)) for m, n, k in dims]


def _truth(m: int, n: int, k: int, coefficients: dict[str, float] = TRUE) -> float:
    return sum(coef * rm.FEATURES[name](m, n, k, "fp32") for name, coef in coefficients.items())


def _sweep(
    count: int = 24, noise: float = 0.0, repetitions: int = 1, coefficients: dict[str, float] = TRUE
) -> list[GemmSample]:
    rng = np.random.default_rng(7)
    return [
        GemmSample(m, n, k, _truth(m, n, k, coefficients) * (1 + noise * rng.standard_normal()))
        for m, n, k in _shapes(count)
        for _ in range(repetitions)
    ]


def test_recovers_the_generating_coefficients_without_noise() -> None:
    model = rm.fit(_sweep(), "flops+bytes")
    for name, value in TRUE.items():
        assert model.coefficient(name) == pytest.approx(value, rel=1e-6)


def test_with_noise_coefficients_are_close_and_held_out_error_is_small() -> None:
    samples = _sweep(count=30, noise=0.02)
    model = rm.fit(samples, "flops+bytes")
    assert model.coefficient("ms_per_gflop") == pytest.approx(TRUE["ms_per_gflop"], rel=0.05)
    assert model.coefficient("ms_per_mb") == pytest.approx(TRUE["ms_per_mb"], rel=0.3)
    held_out = rm.leave_one_shape_out(samples, "flops+bytes")
    assert held_out.count == 30
    assert held_out.mape_pct < 4.0
    assert held_out.within_10pct >= 0.95


def test_held_out_error_is_larger_for_the_model_that_misses_a_term() -> None:
    samples = _sweep(count=20, coefficients={"intercept_ms": 0.0, "ms_per_gflop": 1.0, "ms_per_mb": 2.0})
    chosen = rm.select_model(samples)
    errors = dict(chosen.candidates)
    assert chosen.model.form == "flops+bytes"
    assert errors["flops"].mape_pct > 5 * max(errors["flops+bytes"].mape_pct, 0.1)


def test_simpler_form_wins_a_tie() -> None:
    samples = _sweep(count=12, coefficients={"intercept_ms": 0.1, "ms_per_gflop": 15.0})
    chosen = rm.select_model(samples)
    assert chosen.model.form == "flops"
    assert chosen.held_out.mape_pct < 1e-6


def test_coefficients_are_never_negative() -> None:
    # Times that fall with traffic would need a negative c: the constrained fit sets it to 0.
    samples = [
        GemmSample(m, n, k, max(0.01, 10 * rm.gflop(m, n, k) - 0.05 * rm.mbytes(m, n, k)))
        for m, n, k in _shapes(16)
    ]
    model = rm.fit(samples, "flops+bytes")
    assert all(value >= 0 for _, value in model.coefficients)


def test_nnls_matches_the_unconstrained_solution_when_it_is_feasible_and_clips_otherwise() -> None:
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert rm.nnls(a, np.array([1.0, 2.0, 3.0])) == pytest.approx([1.0, 2.0])
    # Unconstrained: x = (-1, 2) roughly; with x >= 0 the first goes to 0.
    solution = rm.nnls(a, np.array([-1.0, 2.0, 1.0]))
    assert solution[0] == 0.0
    assert solution[1] == pytest.approx(1.5)


def test_fastest_repetition_per_shape_is_fitted_and_repeatability_measures_the_spread() -> None:
    slow = [GemmSample(64, 64, 64, 2.0), GemmSample(64, 64, 64, 1.0), GemmSample(32, 32, 32, 0.5)]
    fastest = rm.fastest_per_shape(slow)
    assert sorted(s.time_ms for s in fastest) == [0.5, 1.0]
    spread = rm.repeatability(slow)
    assert spread is not None
    # 2.0 vs 1.0: |1 - 2| / 2 = 50 %; 1.0 vs 2.0: 100 %; the single shape has no pair.
    assert spread.count == 2
    assert spread.mape_pct == pytest.approx(75.0)
    assert rm.repeatability(fastest) is None


def test_interference_on_some_repetitions_does_not_spoil_the_fit() -> None:
    clean = _sweep(count=20)
    disturbed = [GemmSample(s.m, s.n, s.k, s.time_ms * 3) for s in clean[::2]]
    chosen = rm.select_model(clean + disturbed)
    assert chosen.held_out.mape_pct < 1e-3
    assert chosen.repeatability is not None and chosen.repeatability.mape_pct > 50


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        ([], "0 distinct GEMM shape"),
        ([GemmSample(64, 64, 64, 1.0)] * 5, "1 distinct GEMM shape"),
        ([GemmSample(64, 64, 64, 1.0), GemmSample(32, 64, 64, 0.0)], "not a positive number"),
    ],
)
def test_degenerate_inputs_give_a_clear_error(samples: list[GemmSample], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        rm.select_model(samples)


def test_held_out_needs_one_shape_more_than_coefficients() -> None:
    three = _sweep(count=3)
    rm.fit(three, "flops+bytes")  # exactly determined: fits
    with pytest.raises(ConfigError, match="more than 3 distinct shapes"):
        rm.leave_one_shape_out(three, "flops+bytes")
    assert rm.select_model(three).model.form == "flops"  # the form it can check is kept


def test_fp16_halves_the_traffic_term() -> None:
    assert rm.mbytes(10, 20, 30, "fp16") == pytest.approx(rm.mbytes(10, 20, 30, "fp32") / 2)
    model = rm.GemmModel("flops+bytes", (("ms_per_mb", 1.0),))
    assert model.predict_ms(10, 20, 30, "fp16") == pytest.approx(rm.mbytes(10, 20, 30, "fp16"))
