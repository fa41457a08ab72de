"""The peak-RSS model (farm.analysis.memory_model): footprints by hand, and a synthetic process
law recovered from single-layer footprints and carried to a whole network."""

from __future__ import annotations

import pytest

from farm.analysis.cnn_descriptor import network
from farm.analysis.kernel_predictor import KernelConfig, KernelKind
from farm.analysis.kernel_sampling import shipped_configs
from farm.analysis.memory_model import MIB, Footprint, fit_memory, kernel_footprint, network_footprint
from farm.errors import ConfigError


def test_kernel_footprints_by_hand() -> None:
    conv = kernel_footprint(KernelConfig(KernelKind.CONV, 8, 10, 16, 3, 1, 1))
    assert conv.weights_mib * MIB == 4 * 16 * (8 * 9 + 1)
    assert conv.feature_maps_mib * MIB == 4 * (8 * 100 + 16 * 100)
    assert conv.workspace_mib * MIB == 4 * 8 * 9 * 100
    add = kernel_footprint(KernelConfig(KernelKind.ADD, 8, 10, 8), "fp16")
    assert (add.weights_mib, add.feature_maps_mib * MIB, add.workspace_mib) == (0, 2 * 3 * 800, 0)


def _law(f: Footprint) -> float:  # a process of 80 MiB holding weights twice, maps once, im2col once
    return 80.0 + 2.0 * f.weights_mib + f.feature_maps_mib + f.workspace_mib


def test_a_law_learned_on_sampled_kernels_predicts_a_network() -> None:
    pairs = [(kernel_footprint(c), _law(kernel_footprint(c))) for c in shipped_configs()]
    model = fit_memory(pairs)
    assert model.base_mib == pytest.approx(80.0, rel=1e-6)
    footprint = network_footprint(network("resnet18"))
    assert model.predict_mib(footprint) == pytest.approx(_law(footprint), rel=1e-6)
    with pytest.raises(ConfigError, match="needs 4"):
        fit_memory(pairs[:3])
