"""Augur-style GEMM time model (Lu et al., ACM MM 2017): time of C = A x B as a non-negative linear
function of work and traffic, fitted per phone (and backend, precision) from farm's own GEMM sweep,
and checked on shapes the fit never saw. Pure: samples in, coefficients and errors out.

Model: t_ms = a + b * GFLOP + c * MB, GFLOP = 2mnk / 1e9, MB = elem * (mk + kn + mn) / 1e6.
`a` is the per-call cost (launch, synchronisation), `b` the inverse compute rate, `c` the cost of
moving A, B and C (the gemm sweep copies them every iteration, and small-k shapes are bound by it).
Coefficients are non-negative (a negative per-call cost or rate has no meaning and extrapolates
badly), and the fit minimises RELATIVE squared error: times span three orders of magnitude and an
ordinary fit would serve only the largest shapes. The simpler flops-only model is fitted too;
`select_model` keeps the one with the lower held-out error (leave-one-shape-out).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from farm.errors import ConfigError

# Share of predictions within this relative error: nn-Meter's bar is 99 % within +-10 %.
WITHIN_FRACTION = 0.10
ELEMENT_BYTES: dict[str, int] = {"fp32": 4, "fp16": 2}


@dataclass(frozen=True)
class GemmSample:
    """One measured GEMM: shape, storage precision and time per call."""

    m: int
    n: int
    k: int
    time_ms: float
    precision: str = "fp32"

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.m, self.n, self.k


def gflop(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k / 1e9


def mbytes(m: int, n: int, k: int, precision: str = "fp32") -> float:
    return ELEMENT_BYTES.get(precision, 4) * (m * k + k * n + m * n) / 1e6


# Feature name -> value of one GEMM; the names are the coefficient names in model files.
FEATURES: dict[str, Callable[[int, int, int, str], float]] = {
    "intercept_ms": lambda m, n, k, p: 1.0,
    "ms_per_gflop": lambda m, n, k, p: gflop(m, n, k),
    "ms_per_mb": lambda m, n, k, p: mbytes(m, n, k, p),
}
MODEL_FORMS: dict[str, tuple[str, ...]] = {
    "flops": ("intercept_ms", "ms_per_gflop"),
    "flops+bytes": ("intercept_ms", "ms_per_gflop", "ms_per_mb"),
}


@dataclass(frozen=True)
class HeldOut:
    """Errors of predictions on shapes left out of the fit."""

    mape_pct: float
    within_10pct: float  # share of held-out predictions within +-10 %
    max_error_pct: float
    count: int


@dataclass(frozen=True)
class GemmModel:
    form: str
    coefficients: tuple[tuple[str, float], ...]

    def predict_ms(self, m: int, n: int, k: int, precision: str = "fp32") -> float:
        return sum(coef * FEATURES[name](m, n, k, precision) for name, coef in self.coefficients)

    def coefficient(self, name: str) -> float:
        return dict(self.coefficients).get(name, 0.0)


@dataclass(frozen=True)
class FittedModel:
    """The chosen model, its held-out errors, and every form's held-out error (why it was chosen)."""

    model: GemmModel
    held_out: HeldOut
    candidates: tuple[tuple[str, HeldOut], ...]
    samples: int
    shapes: int
    in_sample: HeldOut
    repeatability: HeldOut | None = None  # repetitions of one shape against each other


def fastest_per_shape(samples: Sequence[GemmSample]) -> list[GemmSample]:
    """The fastest repetition of each shape. Interference from other work only ever adds time, so
    on a shared or busy device the minimum is the best estimate of the GEMM's own cost."""
    best: dict[tuple[int, int, int, str], GemmSample] = {}
    for sample in samples:
        key = (*sample.shape, sample.precision)
        if key not in best or sample.time_ms < best[key].time_ms:
            best[key] = sample
    return list(best.values())


def repeatability(samples: Sequence[GemmSample]) -> HeldOut | None:
    """How well one repetition predicts another of the same shape (each against the median of the
    others): the noise floor no model of (m, n, k) can beat. None without repeated shapes."""
    by_shape: dict[tuple[int, int, int], list[float]] = {}
    for sample in samples:
        by_shape.setdefault(sample.shape, []).append(sample.time_ms)
    rel = []
    for times in by_shape.values():
        for index, time_ms in enumerate(times):
            others = times[:index] + times[index + 1 :]
            if others:
                rel.append(abs(float(np.median(others)) - time_ms) / time_ms)
    if not rel:
        return None
    values = np.array(rel)
    return HeldOut(
        mape_pct=float(np.mean(values) * 100),
        within_10pct=float(np.mean(values <= WITHIN_FRACTION)),
        max_error_pct=float(np.max(values) * 100),
        count=len(rel),
    )


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Non-negative least squares for a few columns: the best feasible solution over all column
    subsets is the exact optimum (the KKT point has some active set), and 2^p solves are cheap."""
    cols = a.shape[1]
    best, best_residual = np.zeros(cols), float(np.sum(b * b))
    for size in range(1, cols + 1):
        for subset in itertools.combinations(range(cols), size):
            sol, *_ = np.linalg.lstsq(a[:, subset], b, rcond=None)
            if np.any(sol < 0):
                continue
            residual = float(np.sum((a[:, subset] @ sol - b) ** 2))
            if residual < best_residual - 1e-15 * max(best_residual, 1.0):
                best_residual = residual
                best = np.zeros(cols)
                best[list(subset)] = sol
    return best


def relative_nnls(design: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Non-negative coefficients minimising the squared RELATIVE error (pred - t) / t of
    `design @ coefficients` against `times` (columns scaled first: features differ by orders of
    magnitude)."""
    weighted = design / times[:, None]
    scale = np.max(np.abs(weighted), axis=0)
    scale[scale == 0] = 1.0
    return nnls(weighted / scale, np.ones(len(times))) / scale


def _check(samples: Sequence[GemmSample], form: str) -> None:
    if form not in MODEL_FORMS:
        raise ConfigError(f"unknown model form {form!r}", hint=f"known: {', '.join(MODEL_FORMS)}")
    bad = [s for s in samples if not (s.time_ms > 0 and np.isfinite(s.time_ms))]
    if bad:
        raise ConfigError(f"GEMM {bad[0].shape}: time {bad[0].time_ms} ms is not a positive number")
    shapes = {s.shape for s in samples}
    needed = len(MODEL_FORMS[form])
    if len(shapes) < needed:
        raise ConfigError(
            f"{len(shapes)} distinct GEMM shape(s) cannot fix the {needed} coefficients of "
            f"the {form!r} model",
            hint=f"sweep at least {needed} shapes (m, n, k)",
        )


def fit(samples: Sequence[GemmSample], form: str = "flops+bytes") -> GemmModel:
    """Non-negative fit minimising relative squared error. ConfigError on too few shapes."""
    _check(samples, form)
    names = MODEL_FORMS[form]
    times = np.array([s.time_ms for s in samples])
    design = np.array([[FEATURES[n](s.m, s.n, s.k, s.precision) for n in names] for s in samples])
    solution = relative_nnls(design, times)
    return GemmModel(form, tuple(zip(names, (float(c) for c in solution), strict=True)))


def errors(model: GemmModel, samples: Iterable[GemmSample]) -> HeldOut:
    rel = [abs(model.predict_ms(s.m, s.n, s.k, s.precision) - s.time_ms) / s.time_ms for s in samples]
    if not rel:
        return HeldOut(float("nan"), float("nan"), float("nan"), 0)
    values = np.array(rel)
    return HeldOut(
        mape_pct=float(np.mean(values) * 100),
        within_10pct=float(np.mean(values <= WITHIN_FRACTION)),
        max_error_pct=float(np.max(values) * 100),
        count=len(rel),
    )


def leave_one_shape_out(samples: Sequence[GemmSample], form: str = "flops+bytes") -> HeldOut:
    """Fit without each shape (all its repetitions) in turn and predict that shape: the error on
    configurations the model never saw. Needs one shape more than the model has coefficients."""
    _check(samples, form)
    shapes = sorted({s.shape for s in samples})
    if len(shapes) <= len(MODEL_FORMS[form]):
        raise ConfigError(
            f"held-out evaluation of the {form!r} model needs more than "
            f"{len(MODEL_FORMS[form])} distinct shapes, got {len(shapes)}"
        )
    predictions: list[tuple[GemmModel, GemmSample]] = []
    for shape in shapes:
        model = fit([s for s in samples if s.shape != shape], form)
        predictions += [(model, s) for s in samples if s.shape == shape]
    rel = np.array(
        [abs(m.predict_ms(s.m, s.n, s.k, s.precision) - s.time_ms) / s.time_ms for m, s in predictions]
    )
    return HeldOut(
        mape_pct=float(np.mean(rel) * 100),
        within_10pct=float(np.mean(rel <= WITHIN_FRACTION)),
        max_error_pct=float(np.max(rel) * 100),
        count=len(rel),
    )


def select_model(samples: Sequence[GemmSample], *, fastest: bool = True) -> FittedModel:
    """Fit every form, keep the one with the lowest held-out MAPE (ties: the simpler one).
    `fastest`: fit the fastest repetition of each shape (see fastest_per_shape), else every one."""
    fit_on = fastest_per_shape(samples) if fastest else list(samples)
    candidates: list[tuple[str, HeldOut]] = []
    for form in MODEL_FORMS:
        try:
            candidates.append((form, leave_one_shape_out(fit_on, form)))
        except ConfigError:
            if not candidates:
                raise
    best_form, best = min(candidates, key=lambda c: (round(c[1].mape_pct, 6), len(MODEL_FORMS[c[0]])))
    model = fit(fit_on, best_form)
    return FittedModel(
        model=model,
        held_out=best,
        candidates=tuple(candidates),
        samples=len(fit_on),
        shapes=len({s.shape for s in fit_on}),
        in_sample=errors(model, fit_on),
        repeatability=repeatability(samples),
    )
