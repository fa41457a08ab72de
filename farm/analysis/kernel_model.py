"""A per-kernel-type layer time model (nn-Meter's idea, Zhang et al. MobiSys 2021: a network's
latency is the sum of its kernels', each kernel type with a model of its own), fitted on the cnn
program's own per-layer times of one network and applied to another. Pure.

Why not the GEMM model alone (farm.analysis.resource_model): the cnn program's convolutions are
not the gemm program's calls. On CPU devices they are a direct loop nest, and on GPUs an im2col
(gathered or packed) in front of the GEMM, so their cost depends on how many outputs, inputs,
weights and im2col elements they touch, not on the multiply-adds only. Each kernel type gets

    t_ms = a + b * GFLOP + c * M_out + d * M_in + e * M_weights + f * M_im2col

(M_x: millions of elements of the layer's output, input, weights and im2col matrix, from the
network's descriptor, so a network never measured can be predicted), fitted non-negative and on
relative error as the GEMM model is. Which terms a type keeps is chosen on the fitted network's own
shapes, by leave-one-shape-out error (a form is fitted without one shape and predicts it, for each
shape in turn; the lowest mean relative error wins, the fewer terms on a tie): a network's unique
layers (SqueezeNet's conv1) must be predicted by terms the other shapes agree on, not by a term only
that layer pins. On SqueezeNet 1.0 -> 1.1 (2026-12-02, one virtual phone, host load 7-14) that took
the gpu total from +9.7 % to -1.6 % (conv1: +114 % -> -22 %). A form never has more terms than
shapes less one (each left-out fit must be pinned); with fewer than three shapes, intercept + GFLOP
when two shapes pin it, else the intercept alone.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from farm.analysis.cnn_descriptor import Layer, LayerKind
from farm.analysis.resource_model import WITHIN_FRACTION, relative_nnls
from farm.errors import ConfigError


class KernelType(enum.StrEnum):
    """What a layer runs as: pointwise convs read their input as the GEMM's B, other convs gather
    a window (im2col or a direct loop over it), pools only read and write maps."""

    CONV_1X1 = "conv1x1"
    CONV_KXK = "convkxk"
    DWCONV = "dwconv"
    MAXPOOL = "maxpool"
    AVGPOOL = "avgpool"
    ADD = "add"


def kernel_type(layer: Layer) -> KernelType:
    if layer.kind is LayerKind.MAXPOOL:
        return KernelType.MAXPOOL
    if layer.kind is LayerKind.AVGPOOL:
        return KernelType.AVGPOOL
    if layer.kind is LayerKind.DWCONV:
        return KernelType.DWCONV
    if layer.kind is LayerKind.ADD:
        return KernelType.ADD
    return KernelType.CONV_1X1 if layer.kernel == 1 and layer.stride == 1 else KernelType.CONV_KXK


FEATURES: tuple[str, ...] = (
    "intercept_ms",
    "ms_per_gflop",
    "ms_per_m_out",
    "ms_per_m_in",
    "ms_per_m_weights",
    "ms_per_m_im2col",
)
TIE_ERROR = 1e-4  # mean relative held-out errors closer than this choose the form with fewer terms
# The candidate forms: intercept, intercept + GFLOP, and that plus any of the other terms.
FORMS: tuple[tuple[str, ...], ...] = (
    FEATURES[:1],
    FEATURES[:2],
    *(
        (*FEATURES[:2], *extra)
        for size in range(1, len(FEATURES) - 1)
        for extra in itertools.combinations(FEATURES[2:], size)
    ),
)


def features(layer: Layer) -> dict[str, float]:
    mnk = layer.gemm_mnk
    # A pool's work is its window over each output element (compares or adds: 1 "flop" each).
    work = 2.0 * np.prod(mnk) if mnk else float(layer.output_count * layer.kernel * layer.kernel)
    return {
        "intercept_ms": 1.0,
        "ms_per_gflop": float(work) / 1e9,
        "ms_per_m_out": layer.output_count / 1e6,
        "ms_per_m_in": layer.input_count / 1e6,
        "ms_per_m_weights": layer.weight_count / 1e6,
        "ms_per_m_im2col": layer.workspace_count / 1e6,
    }


@dataclass(frozen=True)
class LayerSample:
    """One measured layer: its descriptor (shape) and time."""

    layer: Layer
    time_ms: float


@dataclass(frozen=True)
class KernelModel:
    kernel: KernelType
    coefficients: tuple[tuple[str, float], ...]
    samples: int
    shapes: int

    def predict_ms(self, layer: Layer) -> float:
        values = features(layer)
        return sum(coef * values[name] for name, coef in self.coefficients)


@dataclass(frozen=True)
class LayerModel:
    """One model per kernel type, for one phone, backend and precision."""

    kernels: tuple[KernelModel, ...]

    def of(self, kernel: KernelType) -> KernelModel | None:
        return next((k for k in self.kernels if k.kernel is kernel), None)

    def predict_ms(self, layer: Layer) -> float:
        """ConfigError when the layer's kernel type was never measured (nothing to extrapolate)."""
        model = self.of(kernel_type(layer))
        if model is None:
            fitted = ", ".join(str(k.kernel) for k in self.kernels) or "none"
            raise ConfigError(
                f"layer {layer.name}: no {kernel_type(layer)} layer was measured to fit its model "
                f"(fitted: {fitted})",
                hint="fit on a network that has this kind of layer",
            )
        return model.predict_ms(layer)


def _shape(layer: Layer) -> tuple[int, ...]:
    return (layer.in_maps, layer.in_size, layer.out_maps, layer.out_size, layer.kernel, layer.stride)


def fastest_per_shape(samples: Iterable[LayerSample]) -> list[LayerSample]:
    """The fastest measurement of each layer shape: interference only ever adds time."""
    best: dict[tuple[int, ...], LayerSample] = {}
    for sample in samples:
        key = _shape(sample.layer)
        if key not in best or sample.time_ms < best[key].time_ms:
            best[key] = sample
    return list(best.values())


def _fit_form(samples: Sequence[LayerSample], names: Sequence[str]) -> tuple[float, ...]:
    times = np.array([s.time_ms for s in samples])
    design = np.array([[features(s.layer)[n] for n in names] for s in samples])
    return tuple(float(c) for c in relative_nnls(design, times))


def _predict(
    samples: Sequence[LayerSample], names: Sequence[str], coefficients: Sequence[float]
) -> np.ndarray:
    design = np.array([[features(s.layer)[n] for n in names] for s in samples])
    return design @ np.asarray(coefficients)


def held_out_error(samples: Sequence[LayerSample], names: Sequence[str]) -> float:
    """Mean relative error of `names` fitted without each shape in turn, predicting that shape."""
    errors = []
    for shape in sorted({_shape(s.layer) for s in samples}):
        left_out = [s for s in samples if _shape(s.layer) == shape]
        fitted = _fit_form([s for s in samples if _shape(s.layer) != shape], names)
        times = np.array([s.time_ms for s in left_out])
        errors.extend(np.abs(_predict(left_out, names, fitted) / times - 1.0))
    return float(np.mean(errors))


def choose_form(samples: Sequence[LayerSample]) -> tuple[str, ...]:
    """The form with the lowest leave-one-shape-out error (fewer terms on a tie, TIE_ERROR) among those the
    shapes less one can pin; below three shapes, the fullest of GFLOP / intercept they pin."""
    shapes = len({_shape(s.layer) for s in samples})
    if shapes < 3:
        return FEATURES[:2] if shapes == 2 else FEATURES[:1]
    candidates = [form for form in FORMS if len(form) <= shapes - 1]
    # errors within TIE_ERROR of each other are a tie (rounding of the fits' own arithmetic)
    return min(candidates, key=lambda form: (round(held_out_error(samples, form) / TIE_ERROR), len(form)))


def fit_kernel(kernel: KernelType, samples: Sequence[LayerSample]) -> KernelModel:
    bad = [s for s in samples if not (s.time_ms > 0 and np.isfinite(s.time_ms))]
    if bad:
        raise ConfigError(f"layer {bad[0].layer.name}: time {bad[0].time_ms} ms is not a positive number")
    shapes = len({_shape(s.layer) for s in samples})
    names = choose_form(samples)
    coefficients = _fit_form(samples, names)
    return KernelModel(kernel, tuple(zip(names, coefficients, strict=True)), len(samples), shapes)


def fit_layer_model(samples: Sequence[LayerSample], *, fastest: bool = True) -> LayerModel:
    """One model per kernel type among the samples (fastest repetition of each shape unless
    `fastest` is False). ConfigError without samples."""
    if not samples:
        raise ConfigError("no measured layers to fit", hint="run a cnn experiment first")
    fit_on = fastest_per_shape(samples) if fastest else list(samples)
    by_kernel: dict[KernelType, list[LayerSample]] = {}
    for sample in fit_on:
        by_kernel.setdefault(kernel_type(sample.layer), []).append(sample)
    return LayerModel(tuple(fit_kernel(kernel, group) for kernel, group in sorted(by_kernel.items())))


@dataclass(frozen=True)
class Transfer:
    """How well a model predicts measured layers it was not fitted on."""

    within_10pct: float  # share of layers within +-10 %
    mape_pct: float
    total_error_pct: float  # predicted total against measured total, signed
    layers: int


def transfer_errors(model: LayerModel, measured: Mapping[Layer, float]) -> Transfer:
    """Errors of the model's predictions of `measured` (layer -> measured ms)."""
    if not measured:
        raise ConfigError("no measured layers to compare with")
    predicted = {layer: model.predict_ms(layer) for layer in measured}
    rel = np.array([abs(predicted[x] - t) / t for x, t in measured.items()])
    total_measured = float(sum(measured.values()))
    return Transfer(
        within_10pct=float(np.mean(rel <= WITHIN_FRACTION)),
        mape_pct=float(np.mean(rel) * 100),
        total_error_pct=(float(sum(predicted.values())) / total_measured - 1) * 100,
        layers=len(measured),
    )
