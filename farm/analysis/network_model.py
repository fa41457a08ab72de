"""Predict a CNN's per-layer time and its memory from a descriptor and a fitted GEMM model, and hold
the prediction against measured per-layer times. Pure.

Time: a convolution is the GEMM (m, n, k) of its im2col form. Pooling layers are no GEMM; they only
read and write maps, so they cost a rate per MB moved: the pools' own rate where a cnn experiment
measured pools (pool_rate), else the GEMM model's traffic term (ms_per_mb). Or, from a model per
kernel type fitted on a cnn experiment's own layers (farm.analysis.kernel_model), each layer by its
kernel type's model (predict_network_by_kernel).

Memory (Augur): weights + feature maps + workspace. Layers run one after another, so the peak is
all weights plus, at the worst layer, its input, the buffer it writes (a fire module's concat for
both expand layers) and its im2col workspace (k x n elements; none for a 1x1 stride-1 conv).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from farm.analysis.cnn_descriptor import Layer, LayerKind, Network
from farm.analysis.kernel_model import LayerModel
from farm.analysis.resource_model import ELEMENT_BYTES, WITHIN_FRACTION, GemmModel


@dataclass(frozen=True)
class LayerPrediction:
    name: str
    kind: LayerKind
    gemm_mnk: tuple[int, int, int] | None
    gflop: float
    predicted_ms: float
    measured_ms: float | None = None

    @property
    def error_pct(self) -> float | None:
        if self.measured_ms is None or self.measured_ms <= 0:
            return None
        return (self.predicted_ms - self.measured_ms) / self.measured_ms * 100


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: int
    peak_activations_bytes: int  # input + written buffer of the worst layer
    workspace_bytes: int  # im2col buffer of that layer
    peak_layer: str
    all_feature_maps_bytes: int  # every map at once (the cnn benchmark's activations_bytes)

    @property
    def peak_bytes(self) -> int:
        return self.weights_bytes + self.peak_activations_bytes + self.workspace_bytes


@dataclass(frozen=True)
class NetworkPrediction:
    network: str
    precision: str
    layers: tuple[LayerPrediction, ...]
    memory: MemoryEstimate

    @property
    def total_ms(self) -> float:
        return sum(layer.predicted_ms for layer in self.layers)

    @property
    def measured_total_ms(self) -> float | None:
        measured = [layer.measured_ms for layer in self.layers]
        if not measured or any(m is None for m in measured):
            return None
        return float(sum(m for m in measured if m is not None))

    def layer_errors(self) -> tuple[float, float] | None:
        """(MAPE %, share within +-10 %) over every layer that has a measurement."""
        errors = [abs(layer.error_pct) / 100 for layer in self.layers if layer.error_pct is not None]
        if not errors:
            return None
        values = np.array(errors)
        return float(np.mean(values) * 100), float(np.mean(values <= WITHIN_FRACTION))

    def conv_errors(self) -> tuple[float, float] | None:
        """(MAPE %, share within +-10 %) over the convolutions that have a measurement."""
        errors = [
            abs(layer.error_pct) / 100
            for layer in self.layers
            if layer.kind is LayerKind.CONV and layer.error_pct is not None
        ]
        if not errors:
            return None
        values = np.array(errors)
        return float(np.mean(values) * 100), float(np.mean(values <= WITHIN_FRACTION))


def moved_mb(layer: Layer, precision: str = "fp32") -> float:
    """Maps a layer reads and writes, in MB at the storage precision."""
    return ELEMENT_BYTES.get(precision, 4) * (layer.input_count + layer.output_count) / 1e6


def _layer_ms(model: GemmModel, layer: Layer, precision: str, pool_ms_per_mb: float | None) -> float:
    mnk = layer.gemm_mnk
    if mnk is not None:
        return model.predict_ms(*mnk, precision)
    per_mb = model.coefficient("ms_per_mb") if pool_ms_per_mb is None else pool_ms_per_mb
    return per_mb * moved_mb(layer, precision)


def memory(network: Network, precision: str = "fp32") -> MemoryEstimate:
    elem = ELEMENT_BYTES.get(precision, 4)
    worst = max(network.layers, key=lambda x: x.input_count + x.out_buffer_count + x.workspace_count)
    concat_counted: set[tuple[str, int]] = set()
    maps = network.input_maps * network.input_size * network.input_size
    for layer in network.layers:
        # Both expand layers of a fire module write one concat buffer: count it once.
        key = (layer.name.split("/")[0], layer.out_buffer_count)
        if layer.out_buffer_maps != layer.out_maps:
            if key in concat_counted:
                continue
            concat_counted.add(key)
        maps += layer.out_buffer_count
    return MemoryEstimate(
        weights_bytes=elem * sum(layer.weight_count for layer in network.layers),
        peak_activations_bytes=elem * (worst.input_count + worst.out_buffer_count),
        workspace_bytes=elem * worst.workspace_count,
        peak_layer=worst.name,
        all_feature_maps_bytes=elem * maps,
    )


def pool_rate(pools: Sequence[tuple[float, float]]) -> float | None:
    """ms per MB of pooling from measured (MB moved, ms) pairs: the median ratio (robust to one
    disturbed layer). None without a measurement."""
    ratios = [ms / mb for mb, ms in pools if mb > 0 and ms > 0]
    return float(np.median(ratios)) if ratios else None


def predict_network(
    model: GemmModel,
    network: Network,
    precision: str = "fp32",
    measured_ms: Mapping[str, float] | None = None,
    pool_ms_per_mb: float | None = None,
) -> NetworkPrediction:
    """Per-layer prediction; `measured_ms` (layer name -> ms) is attached for comparison.
    `pool_ms_per_mb`: the pools' own rate where measured pools gave one, else the GEMM traffic term."""
    return _predict(network, precision, measured_ms, lambda x: _layer_ms(model, x, precision, pool_ms_per_mb))


def predict_network_by_kernel(
    model: LayerModel,
    network: Network,
    precision: str = "fp32",
    measured_ms: Mapping[str, float] | None = None,
) -> NetworkPrediction:
    """Per-layer prediction from a per-kernel-type model (farm.analysis.kernel_model)."""
    return _predict(network, precision, measured_ms, model.predict_ms)


def _predict(
    network: Network,
    precision: str,
    measured_ms: Mapping[str, float] | None,
    layer_ms: Callable[[Layer], float],
) -> NetworkPrediction:
    measured = measured_ms or {}
    layers = tuple(
        LayerPrediction(
            name=layer.name,
            kind=layer.kind,
            gemm_mnk=layer.gemm_mnk,
            gflop=2.0 * np.prod(layer.gemm_mnk) / 1e9 if layer.gemm_mnk else 0.0,
            predicted_ms=layer_ms(layer),
            measured_ms=measured.get(layer.name),
        )
        for layer in network.layers
    )
    return NetworkPrediction(network.name, precision, layers, memory(network, precision))
