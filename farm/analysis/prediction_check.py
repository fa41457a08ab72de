"""A kernel predictor file held against a cnn experiment's measured networks: every layer of every
network the experiment ran, predicted at the clock its runs ran at, beside the measured time, and
the accuracy in nn-Meter's terms (RMSPE, share within +-5/10/15 %, the total's error). What
`farm report EXPERIMENT --model FILE` shows and `farm model predict --compare` prints per network.
Pure: runs, layers and env.json documents in, checks out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from farm.analysis import kernel_data, resource_data
from farm.analysis.cnn_descriptor import network
from farm.analysis.kernel_predictor import Accuracy, KernelPredictor, accuracy, kernel_of_layer, predict_many
from farm.analysis.resource_data import ModelKey
from farm.store.layers import LayerResult
from farm.store.results import StoredResult


@dataclass(frozen=True)
class LayerCheck:
    name: str
    kind: str  # the kernel type the layer runs as (conv, pointwise, dwconv, ...)
    predicted_ms: float
    measured_ms: float


@dataclass(frozen=True)
class NetworkCheck:
    network: str
    input_size: int
    key: ModelKey
    clock_mhz: float | None  # the clock predicted at: the runs' own, None where unrecorded
    layers: tuple[LayerCheck, ...]
    accuracy: Accuracy

    @property
    def predicted_total_ms(self) -> float:
        return sum(layer.predicted_ms for layer in self.layers)

    @property
    def measured_total_ms(self) -> float:
        return sum(layer.measured_ms for layer in self.layers)


def check_networks(
    runs: Sequence[StoredResult],
    params: Mapping[str, Any],
    layers: Mapping[str, Sequence[LayerResult]],
    predictors: Mapping[ModelKey, KernelPredictor],
    envs: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[NetworkCheck, ...]:
    """One check per network the finished runs measured and phone, backend and precision a
    predictor exists for. A network the experiment ran at several input sizes is left out: its
    per-layer times pool shapes that differ."""
    measured_inputs = resource_data.measured_inputs(runs, params)
    sizes: dict[str, list[int]] = {}
    for name, size in measured_inputs:
        sizes.setdefault(name, []).append(size)
    checks = []
    for name, found in sorted(sizes.items()):
        if len(found) != 1:
            continue
        descriptor = network(name, found[0])
        measured = resource_data.measured_layers(runs, params, name, layers)
        clocks = kernel_data.network_clocks(runs, params, name, envs)
        for key in sorted(set(measured) & set(predictors)):
            configs = [kernel_of_layer(layer) for layer in descriptor.layers]
            times = predict_many(predictors[key], configs, clocks.get(key))
            rows = tuple(
                LayerCheck(layer.name, str(config.kind), ms, measured[key][layer.name])
                for layer, config, ms in zip(descriptor.layers, configs, times, strict=True)
                if measured[key].get(layer.name, 0.0) > 0
            )
            if rows:
                pairs = [(row.predicted_ms, row.measured_ms) for row in rows]
                checks.append(NetworkCheck(name, found[0], key, clocks.get(key), rows, accuracy(pairs)))
    return tuple(checks)


def networks_of(checks: Iterable[NetworkCheck]) -> list[str]:
    """The networks checked, in order of first appearance."""
    return list(dict.fromkeys(check.network for check in checks))
