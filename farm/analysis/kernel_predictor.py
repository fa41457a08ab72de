"""Kernel-level latency predictors learned per phone and backend from sampled kernel
configurations (nn-Meter, Zhang et al. MobiSys 2021: a network's latency is the sum of its
kernels', each kernel type predicted by its own regressor trained on sampled configurations, not on
any network). Pure: no I/O.

Each kernel type gets a gradient-boosted tree ensemble over the configuration's shape, FLOPs and
bytes moved (log scale: the space spans four orders of magnitude). The run's clock is an input
too, in the target: the model learns log(time x clock), the kernel's time in cycles, so a fit at
one pinned clock predicts another by the clock ratio where the kernel is compute-bound (trees do
not extrapolate; a ratio does), and the clock feature lets the trees learn where that is not so
when the samples span several clocks.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.analysis.cnn_descriptor import Layer, LayerKind
from farm.errors import ConfigError

BYTES_PER_VALUE = {"fp32": 4, "fp16": 2}
MIN_SAMPLES = 4  # fewer configurations of a type than this cannot be learned (and held out)
SEED = 0  # the ensembles are refitted from the stored samples: the same file predicts the same


class KernelKind(enum.StrEnum):
    """nn-Meter's kernel types, as the cnn program's single-layer mode (--layer) runs them."""

    CONV = "conv"  # k x k, any stride
    POINTWISE = "pointwise"  # 1x1 stride 1: the input is the GEMM's B as it is
    DWCONV = "dwconv"
    MAXPOOL = "maxpool"
    AVGPOOL = "avgpool"  # global
    FC = "fc"
    ADD = "add"


@dataclass(frozen=True)
class KernelConfig:
    """One kernel: square input in_size x in_size x in_maps."""

    kind: KernelKind
    in_maps: int
    in_size: int
    out_maps: int
    kernel: int = 1
    stride: int = 1
    pad: int = 0

    @property
    def out_size(self) -> int:
        if self.kind in (KernelKind.AVGPOOL, KernelKind.FC):
            return 1
        if self.kind is KernelKind.ADD:
            return self.in_size
        if self.kind is KernelKind.MAXPOOL:  # ceil mode, no padding (the cnn program's pools)
            return -(-(self.in_size - self.kernel) // self.stride) + 1
        return (self.in_size + 2 * self.pad - self.kernel) // self.stride + 1

    def flops(self) -> float:
        out = float(self.out_maps * self.out_size * self.out_size)
        if self.kind in (KernelKind.CONV, KernelKind.POINTWISE):
            return 2.0 * out * self.in_maps * self.kernel * self.kernel
        if self.kind is KernelKind.FC:
            return 2.0 * self.out_maps * self.in_maps * self.in_size * self.in_size
        if self.kind is KernelKind.DWCONV:
            return 2.0 * out * self.kernel * self.kernel
        if self.kind is KernelKind.MAXPOOL:
            return out * self.kernel * self.kernel
        return float(self.in_maps * self.in_size * self.in_size)  # avgpool, add: one op per input

    def weight_count(self) -> int:
        if self.kind in (KernelKind.CONV, KernelKind.POINTWISE):
            return self.out_maps * (self.in_maps * self.kernel * self.kernel + 1)
        if self.kind is KernelKind.FC:
            return self.out_maps * (self.in_maps * self.in_size * self.in_size + 1)
        if self.kind is KernelKind.DWCONV:
            return self.out_maps * (self.kernel * self.kernel + 1)
        return 0

    def moved_bytes(self, precision: str = "fp32") -> float:
        values = self.in_maps * self.in_size**2 * (2 if self.kind is KernelKind.ADD else 1)
        values += self.out_maps * self.out_size**2 + self.weight_count()
        return float(values * BYTES_PER_VALUE.get(precision, 4))


def kernel_of_layer(layer: Layer) -> KernelConfig:
    """A descriptor layer as the kernel the single-layer mode would run: a conv whose window is its
    whole input (a classifier after the global pool) is the fc kernel, a 1x1 stride-1 conv the
    pointwise one."""
    if layer.kind in (LayerKind.AVGPOOL, LayerKind.ADD):
        return KernelConfig(KernelKind(layer.kind.value), layer.in_maps, layer.in_size, layer.out_maps)
    if (
        layer.kind is LayerKind.CONV
        and layer.kernel == layer.in_size
        and layer.out_size == 1
        and not layer.pad
    ):
        return KernelConfig(KernelKind.FC, layer.in_maps, layer.in_size, layer.out_maps, layer.kernel)
    if layer.kind is LayerKind.CONV:
        kind = KernelKind.POINTWISE if layer.kernel == 1 and layer.stride == 1 else KernelKind.CONV
    else:  # maxpool, dwconv: the same names
        kind = KernelKind(layer.kind.value)
    shape = (layer.in_maps, layer.in_size, layer.out_maps, layer.kernel, layer.stride, layer.pad)
    return KernelConfig(kind, *shape)


FEATURE_NAMES: tuple[str, ...] = (
    "log2_flops",
    "log2_bytes",
    "log2_in_maps",
    "log2_out_maps",
    "log2_in_size",
    "log2_out_size",
    "kernel",
    "stride",
    "flops_per_byte",
    "log2_clock_mhz",
)


def features(config: KernelConfig, clock_mhz: float | None, precision: str = "fp32") -> tuple[float, ...]:
    flops, moved = config.flops(), config.moved_bytes(precision)
    return (
        math.log2(max(flops, 1.0)),
        math.log2(max(moved, 1.0)),
        math.log2(config.in_maps),
        math.log2(config.out_maps),
        math.log2(config.in_size),
        math.log2(max(config.out_size, 1)),
        float(config.kernel),
        float(config.stride),
        flops / max(moved, 1.0),
        math.log2(clock_mhz) if clock_mhz else 0.0,
    )


@dataclass(frozen=True)
class KernelSample:
    config: KernelConfig
    time_ms: float
    clock_mhz: float | None = None  # the backend's clock during the run (cpu or gpu), if recorded


def _target(sample: KernelSample) -> float:
    return math.log(sample.time_ms * (sample.clock_mhz or 1.0))


class Estimator(enum.StrEnum):
    """The regressor per kernel type (both scikit-learn tree ensembles over the same features)."""

    BOOSTING = "boosting"  # GradientBoostingRegressor
    FOREST = "forest"  # RandomForestRegressor


@dataclass(frozen=True)
class KernelPredictor:
    """The samples of one phone, backend and precision; `predict_ms` refits per type (seeded) on
    first use, so the model file stores data, not pickled estimators."""

    precision: str
    samples: tuple[KernelSample, ...]
    estimator: Estimator = Estimator.BOOSTING

    def kinds(self) -> tuple[KernelKind, ...]:
        return tuple(sorted({s.config.kind for s in self.samples}))


def _ensemble(samples: Sequence[KernelSample], precision: str, estimator: Estimator) -> Any:
    # Imported here: scikit-learn loads in ~1 s, and only fitting needs it.
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor

    x = np.array([features(s.config, s.clock_mhz, precision) for s in samples])
    y = np.array([_target(s) for s in samples])
    if estimator is Estimator.FOREST:
        forest = RandomForestRegressor(n_estimators=300, min_samples_leaf=1, random_state=SEED)
        return forest.fit(x, y)
    model = GradientBoostingRegressor(
        n_estimators=300, learning_rate=0.05, max_depth=3, subsample=0.8, random_state=SEED
    )
    return model.fit(x, y)


class _Fitted:
    """Ensembles per kernel kind of one predictor (built once per predict call)."""

    def __init__(self, predictor: KernelPredictor) -> None:
        self.predictor = predictor
        self.models = {
            kind: _ensemble(
                [s for s in predictor.samples if s.config.kind is kind],
                predictor.precision,
                predictor.estimator,
            )
            for kind in predictor.kinds()
        }

    def predict_ms(self, config: KernelConfig, clock_mhz: float | None) -> float:
        kind = config.kind
        if kind not in self.models and kind is KernelKind.POINTWISE and KernelKind.CONV in self.models:
            kind = KernelKind.CONV
        if kind not in self.models:
            known = ", ".join(self.models) or "none"
            raise ConfigError(
                f"no sampled {config.kind} kernels to predict from (sampled: {known})",
                hint="add the kernel type to the sampling experiment (experiments/kernel_sampling.yaml)",
            )
        x = np.array([features(config, clock_mhz, self.predictor.precision)])
        return float(math.exp(self.models[kind].predict(x)[0]) / (clock_mhz or 1.0))


def check_samples(samples: Iterable[KernelSample]) -> None:
    """Refuses samples a predictor cannot be learned from: per kind, MIN_SAMPLES configurations."""
    counts: dict[KernelKind, int] = {}
    for sample in samples:
        if not sample.time_ms > 0:
            raise ConfigError(f"{sample.config}: time {sample.time_ms} ms is not positive")
        counts[sample.config.kind] = counts.get(sample.config.kind, 0) + 1
    few = [f"{kind} ({n})" for kind, n in sorted(counts.items()) if n < MIN_SAMPLES]
    if few:
        raise ConfigError(
            f"too few sampled configurations of {', '.join(few)}: a predictor needs {MIN_SAMPLES} per type",
            hint="run the sampling experiment's full variant",
        )


def fit(
    samples: Sequence[KernelSample], precision: str = "fp32", estimator: Estimator = Estimator.BOOSTING
) -> KernelPredictor:
    check_samples(samples)
    return KernelPredictor(precision, tuple(samples), estimator)


FOLDS = 5


def held_out_errors(predictor: KernelPredictor) -> list[tuple[KernelSample, float]]:
    """Each sample's relative error |predicted / measured - 1| from a fit without it (FOLDS-fold
    per kernel type, seeded): where the predictor errs, for the adaptive sampling round."""
    found: list[tuple[KernelSample, float]] = []
    for kind in predictor.kinds():
        group = [s for s in predictor.samples if s.config.kind is kind]
        order = np.random.default_rng(SEED).permutation(len(group))
        for fold in range(min(FOLDS, len(group))):
            held_out = set(order[fold::FOLDS].tolist())
            held = [group[i] for i in sorted(held_out)]
            kept = [group[i] for i in range(len(group)) if i not in held_out]
            if len(kept) < 2:
                continue
            model = _ensemble(kept, predictor.precision, predictor.estimator)
            x = np.array([features(s.config, s.clock_mhz, predictor.precision) for s in held])
            for sample, log_cycles in zip(held, model.predict(x), strict=True):
                predicted = math.exp(log_cycles) / (sample.clock_mhz or 1.0)
                found.append((sample, abs(predicted / sample.time_ms - 1.0)))
    return found


def predict_many(
    predictor: KernelPredictor, configs: Sequence[KernelConfig], clock_mhz: float | None
) -> list[float]:
    fitted = _Fitted(predictor)
    return [fitted.predict_ms(config, clock_mhz) for config in configs]


@dataclass(frozen=True)
class Accuracy:
    """nn-Meter's terms: RMSPE and the share of predictions within +-5/10/15 % of the measured."""

    count: int
    rmspe_pct: float
    within_5pct: float
    within_10pct: float
    within_15pct: float
    total_error_pct: float  # sum of predictions against sum of measurements, signed


def accuracy(pairs: Sequence[tuple[float, float]]) -> Accuracy:
    """`pairs`: (predicted_ms, measured_ms) per layer."""
    if not pairs:
        raise ConfigError("no measured layer to compare the predictions with")
    predicted = np.array([p for p, _ in pairs])
    measured = np.array([m for _, m in pairs])
    rel = np.abs(predicted / measured - 1.0)
    return Accuracy(
        len(pairs),
        float(np.sqrt(np.mean(rel**2)) * 100.0),
        float(np.mean(rel <= 0.05)),
        float(np.mean(rel <= 0.10)),
        float(np.mean(rel <= 0.15)),
        float((predicted.sum() / measured.sum() - 1.0) * 100.0),
    )
