"""Peak resident memory (RSS) of a network's run, predicted from its descriptor and the single-layer
runs of a sampling experiment. Pure.

The cnn program holds every tensor of the network at once (kernels/cnn/cnn_cpu.c allocates one
buffer per tensor), its weights, and on the gpu path the device's copies and an im2col workspace
(PoCL's device memory is host memory, so it is resident too). So the peak RSS of a run is a
process base (libc, the OpenCL runtime and its compiler on gpu) plus a multiple of each of three
footprints: weights, feature maps, im2col workspace. The base and the multiples are learned per
phone and backend by non-negative least squares over the sampled single-layer runs, whose
footprints vary independently; a network's footprints come from its descriptor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from farm.analysis.cnn_descriptor import Network
from farm.analysis.kernel_predictor import BYTES_PER_VALUE, KernelConfig, KernelKind
from farm.analysis.network_model import memory
from farm.errors import ConfigError

MIB = 1024 * 1024
MIN_RUNS = 4


@dataclass(frozen=True)
class Footprint:
    """What a run allocates, in MiB at the storage precision."""

    weights_mib: float
    feature_maps_mib: float
    workspace_mib: float


def kernel_footprint(config: KernelConfig, precision: str = "fp32") -> Footprint:
    """A single-layer run: its input (and the add's copy of it), output, weights, im2col buffer."""
    elem = BYTES_PER_VALUE.get(precision, 4)
    maps = config.in_maps * config.in_size**2 * (2 if config.kind is KernelKind.ADD else 1)
    maps += config.out_maps * config.out_size**2
    workspace = 0
    if config.kind is KernelKind.CONV:
        workspace = config.in_maps * config.kernel**2 * config.out_size**2
    return Footprint(elem * config.weight_count() / MIB, elem * maps / MIB, elem * workspace / MIB)


def network_footprint(network: Network, precision: str = "fp32") -> Footprint:
    elem = BYTES_PER_VALUE.get(precision, 4)
    estimate = memory(network, precision)
    workspace = max((layer.workspace_count for layer in network.layers), default=0)
    return Footprint(
        estimate.weights_bytes / MIB, estimate.all_feature_maps_bytes / MIB, elem * workspace / MIB
    )


@dataclass(frozen=True)
class MemoryModel:
    """peak RSS MiB = base + a * weights + b * feature maps + c * workspace (all >= 0)."""

    base_mib: float
    per_weight: float
    per_feature_map: float
    per_workspace: float
    runs: int

    def predict_mib(self, footprint: Footprint) -> float:
        return (
            self.base_mib
            + self.per_weight * footprint.weights_mib
            + self.per_feature_map * footprint.feature_maps_mib
            + self.per_workspace * footprint.workspace_mib
        )


def fit_memory(pairs: Sequence[tuple[Footprint, float]]) -> MemoryModel:
    """From (footprint, measured peak RSS MiB) of single-layer runs; ConfigError with too few."""
    if len(pairs) < MIN_RUNS:
        raise ConfigError(f"{len(pairs)} runs with a peak RSS: the memory model needs {MIN_RUNS}")
    from scipy.optimize import nnls  # imported here: only fitting needs scipy

    x = np.array([[1.0, f.weights_mib, f.feature_maps_mib, f.workspace_mib] for f, _ in pairs])
    y = np.array([rss for _, rss in pairs])
    # Relative least squares: a 3 MiB run and a 200 MiB one count alike.
    scale = 1.0 / np.maximum(y, 1.0)
    coefficients, _ = nnls(x * scale[:, None], y * scale)
    base, weights, maps, workspace = (float(c) for c in coefficients)
    return MemoryModel(base, weights, maps, workspace, len(pairs))
