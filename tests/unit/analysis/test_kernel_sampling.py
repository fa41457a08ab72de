"""Kernel sampling (farm.analysis.kernel_sampling): the shipped experiment is the generator's
output, it covers every kernel type the networks run without measuring any network layer's own
configuration, the adaptive round draws near the worst-predicted configurations; held-out errors
and the pinned clock a run's env.json reads back."""

from __future__ import annotations

import math
from pathlib import Path

from farm.analysis.cnn_descriptor import NETWORKS, network
from farm.analysis.kernel_data import pinned_clock_mhz
from farm.analysis.kernel_predictor import (
    Estimator,
    KernelConfig,
    KernelKind,
    KernelSample,
    fit,
    held_out_errors,
    kernel_of_layer,
    predict_many,
)
from farm.analysis.kernel_sampling import (
    MAX_GFLOP,
    PER_KIND,
    SHIPPED_SIZES,
    experiment_text,
    refine,
    shipped_configs,
)
from farm.experiment.files import load

SHIPPED = Path(__file__).resolve().parents[3] / "experiments" / "kernel_sampling.yaml"


def test_the_shipped_experiment_is_the_generators_output_and_loads() -> None:
    assert SHIPPED.read_text() == experiment_text(shipped_configs()), (
        "regenerate: .venv/bin/python -m farm.analysis.kernel_sampling > experiments/kernel_sampling.yaml"
    )
    assert load(SHIPPED).name == "kernel_sampling" and load(SHIPPED, "quick").name == "kernel_sampling"


def test_samples_cover_every_kind_the_networks_run_but_no_layer_of_theirs() -> None:
    layers = {kernel_of_layer(x) for n in NETWORKS for s in SHIPPED_SIZES for x in network(n, s).layers}
    configs = shipped_configs()
    assert {c.kind for c in configs} == {c.kind for c in layers} == set(PER_KIND)
    for kind, count in PER_KIND.items():
        assert sum(c.kind is kind for c in configs) == count
    assert not layers & set(configs)
    assert len(set(configs)) == len(configs)
    assert all(c.flops() <= MAX_GFLOP * 1e9 and c.out_size >= 1 for c in configs)


def test_the_adaptive_round_draws_near_the_worst_configurations() -> None:
    worst = KernelConfig(KernelKind.DWCONV, 512, 14, 512, 3, 1, 1)
    errors = [(worst, 0.9)] + [
        (KernelConfig(KernelKind.DWCONV, 16 * i, 56, 16 * i, 3, 2, 1), 0.01) for i in range(1, 4)
    ]
    drawn = refine(errors, {KernelKind.DWCONV: 6}, seed=1)
    assert len(drawn) == 6 and all(c.kind is KernelKind.DWCONV for c in drawn)
    for config in drawn:  # half the first round's spread: channels within 2**0.5, side within 2**0.35
        assert (config.kernel, config.stride, config.pad) == (3, 1, 1)
        assert abs(math.log2(config.in_maps / 512)) <= 0.5 + 0.02
        assert abs(math.log2(config.in_size / 14)) <= 0.35 + 0.1


def _law_samples(clock_mhz: float) -> list[KernelSample]:
    configs = [
        KernelConfig(KernelKind.POINTWISE, c, s, 2 * c) for c in (8, 16, 32, 64, 128) for s in (7, 14, 28, 56)
    ]
    return [KernelSample(c, 0.01 + c.flops() / (clock_mhz * 1e6), clock_mhz) for c in configs]


def test_held_out_errors_cover_every_sample() -> None:
    samples = _law_samples(1000.0)
    errors = held_out_errors(fit(samples))
    assert sorted(id(s) for s, _ in errors) == sorted(id(s) for s in samples)
    # a smooth law between sampled points: most held-out points land within a factor of two
    assert all(e >= 0 for _, e in errors) and sum(e < 1.0 for _, e in errors) >= 0.8 * len(errors)


def test_the_forest_predicts_between_its_samples() -> None:
    samples = _law_samples(1000.0)
    between = KernelConfig(KernelKind.POINTWISE, 48, 20, 96)
    (ms,) = predict_many(fit(samples, estimator=Estimator.FOREST), [between], 1000.0)
    assert 0.01 < ms < 0.01 + KernelConfig(KernelKind.POINTWISE, 64, 28, 128).flops() / 1e9


def test_the_pinned_clock_comes_from_the_readback() -> None:
    readback = {  # as a pinned sd865 virtual phone's env.json reads it back
        "/sys/class/kgsl/kgsl-3d0/devfreq/max_freq": "587000000",
        "/sys/class/kgsl/kgsl-3d0/devfreq/min_freq": "587000000",
        "/sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq": "1804800",
        "/sys/devices/system/cpu/cpufreq/policy0/scaling_min_freq": "1804800",
        "/sys/devices/system/cpu/cpufreq/policy7/scaling_max_freq": "2841600",
        "/sys/devices/system/cpu/cpufreq/policy7/scaling_min_freq": "2841600",
    }
    env = {"clocks": {"mode": "pin", "as_requested": True, "readback": readback}}
    assert pinned_clock_mhz(env, "gpu") == 587.0 and pinned_clock_mhz(env, "cpu") == 2841.6
    mali = {
        "/sys/class/devfreq/13000000.mali/max_freq": "981000000",
        "/sys/class/devfreq/13000000.mali/min_freq": "981000000",
    }
    assert pinned_clock_mhz({"clocks": {"mode": "pin", "readback": mali}}, "gpu") == 981.0
    unpinned = {**readback, "/sys/devices/system/cpu/cpufreq/policy7/scaling_min_freq": "300000"}
    assert pinned_clock_mhz({"clocks": {"mode": "pin", "readback": unpinned}}, "cpu") == 1804.8
    assert pinned_clock_mhz({"clocks": {"mode": "none", "readback": readback}}, "cpu") is None
    assert pinned_clock_mhz({}, "gpu") is None
