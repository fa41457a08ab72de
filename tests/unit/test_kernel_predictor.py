"""farm.analysis.kernel_predictor: features against hand-counted shapes, fits against a synthetic
latency law (the independent truth the learned model must recover), refusals, nn-Meter's terms."""

from __future__ import annotations

import itertools

import pytest

from farm.analysis.cnn_descriptor import network
from farm.analysis.kernel_predictor import (
    KernelConfig,
    KernelKind,
    KernelSample,
    accuracy,
    fit,
    kernel_of_layer,
    predict_many,
)
from farm.errors import ConfigError


def test_conv_counts_match_hand_arithmetic() -> None:
    # 3x3 stride 2 pad 1 over 16x16x8 -> 8x8x32: 2 * 32*8*8 * 8*3*3 flops
    c = KernelConfig(KernelKind.CONV, 8, 16, 32, 3, 2, 1)
    assert c.out_size == 8
    assert c.flops() == 2 * 32 * 64 * 72
    assert c.moved_bytes("fp32") == 4 * (8 * 256 + 32 * 64 + 32 * (72 + 1))
    assert c.moved_bytes("fp16") == c.moved_bytes("fp32") / 2
    d = KernelConfig(KernelKind.DWCONV, 8, 16, 8, 3, 1, 1)
    assert d.flops() == 2 * 8 * 256 * 9
    assert KernelConfig(KernelKind.MAXPOOL, 4, 55, 4, 3, 2).out_size == 27  # ceil mode, as pool1
    assert KernelConfig(KernelKind.FC, 16, 7, 10).flops() == 2 * 10 * 16 * 49


def test_squeezenet_layers_map_to_kernels_with_their_padding() -> None:
    layers = {layer.name: layer for layer in network("squeezenet1.1").layers}
    e3 = kernel_of_layer(layers["fire2/expand3x3"])
    assert (e3.kind, e3.kernel, e3.pad, e3.out_size) == (
        KernelKind.CONV,
        3,
        1,
        layers["fire2/expand3x3"].out_size,
    )
    assert kernel_of_layer(layers["fire2/squeeze1x1"]).kind is KernelKind.POINTWISE
    conv1 = kernel_of_layer(layers["conv1"])
    assert (conv1.pad, conv1.out_size) == (0, layers["conv1"].out_size)
    assert kernel_of_layer(layers["pool1"]).out_size == layers["pool1"].out_size
    assert kernel_of_layer(layers["pool10"]).kind is KernelKind.AVGPOOL


def _law_ms(config: KernelConfig, clock_mhz: float) -> float:
    # a roofline-like synthetic phone: compute at 2 flops/cycle, memory at 8 bytes/ns, 20 us launch
    compute_ms = config.flops() / (2.0 * clock_mhz * 1e6) * 1e3
    memory_ms = config.moved_bytes() / 8e9 * 1e3
    return 0.02 + max(compute_ms, memory_ms)


def _samples(clock_mhz: float) -> list[KernelSample]:
    grid = itertools.product([8, 16, 32, 64, 128], [7, 14, 28, 56], [1, 3, 5], [1, 2])
    return [
        KernelSample(cfg, _law_ms(cfg, clock_mhz), clock_mhz)
        for cin, size, k, s in grid
        for cfg in [KernelConfig(KernelKind.CONV, cin, size, 2 * cin, k, s, k // 2)]
    ]


def test_fit_recovers_a_synthetic_law_on_unseen_shapes_and_another_clock() -> None:
    predictor = fit(_samples(1000.0))
    unseen = [
        KernelConfig(KernelKind.CONV, 48, 20, 96, 3, 1, 1),
        KernelConfig(KernelKind.CONV, 24, 40, 40, 3, 2, 1),
    ]
    got = predict_many(predictor, unseen, 1000.0)
    for config, ms in zip(unseen, got, strict=True):
        assert ms == pytest.approx(_law_ms(config, 1000.0), rel=0.25)
    # compute-bound at half the clock: twice the cycles' time (what a per-clock fit cannot know)
    big = KernelConfig(KernelKind.CONV, 64, 28, 128, 3, 1, 1)
    slow, fast = predict_many(predictor, [big], 500.0)[0], predict_many(predictor, [big], 1000.0)[0]
    assert slow / fast == pytest.approx(2.0, rel=0.05)


def test_too_few_samples_of_a_type_and_unsampled_types_are_refused() -> None:
    few = [KernelSample(KernelConfig(KernelKind.ADD, 8, 8, 8), 0.1)] * 3
    with pytest.raises(ConfigError, match="too few sampled configurations of add"):
        fit(few)
    predictor = fit(_samples(1000.0))
    with pytest.raises(ConfigError, match="no sampled dwconv"):
        predict_many(predictor, [KernelConfig(KernelKind.DWCONV, 8, 8, 8, 3)], 1000.0)


def test_accuracy_in_nn_meter_terms() -> None:
    acc = accuracy([(1.04, 1.0), (0.9, 1.0), (1.2, 1.0), (2.0, 2.0)])
    assert acc.within_5pct == 0.5 and acc.within_10pct == 0.75 and acc.within_15pct == 0.75
    assert acc.total_error_pct == pytest.approx((5.14 / 5.0 - 1) * 100)
    assert acc.rmspe_pct == pytest.approx(((0.04**2 + 0.1**2 + 0.2**2 + 0) / 4) ** 0.5 * 100)


def test_single_layer_runs_become_samples_and_the_file_round_trips() -> None:
    from farm.analysis import kernel_data
    from farm.store.results import StoredResult
    from farm.store.runs import RunState

    def run(i: int, factors: dict, state: RunState = RunState.DONE) -> StoredResult:
        metrics = {
            "layer_00_layer_ms": 1.0 + i,
            "cpu_policy4_freq_mean_mhz": 2400.0,
            "cpu_policy0_freq_mean_mhz": 1800.0,
        }
        return StoredResult(f"r{i}", "c", factors, 0, "local/p", state, metrics=metrics)

    base = {"model": "layer", "backend": "cpu"}
    runs = [
        run(
            0,
            {
                **base,
                "layer": "conv",
                "channels": 8,
                "out_channels": 16,
                "kernel": 1,
                "stride": 1,
                "input_size": 14,
            },
        ),
        run(
            1,
            {**base, "layer": "dwconv", "channels": 8, "kernel": 3, "stride": 2, "pad": 1, "input_size": 14},
        ),
        run(2, {**base, "layer": "conv", "channels": 8, "kernel": 3, "input_size": 14}, RunState.FAILED),
        run(3, {"model": "squeezenet1.1", "backend": "cpu"}),
    ]
    (samples,) = kernel_data.kernel_samples(runs, {}, {}).values()
    assert [s.config.kind for s in samples] == [KernelKind.POINTWISE, KernelKind.DWCONV]
    assert samples[1].config == KernelConfig(KernelKind.DWCONV, 8, 14, 8, 3, 2, 1)  # out maps = channels
    assert samples[0].clock_mhz == 2400.0  # the fastest policy: where the cpu backends run
    assert kernel_data.is_sampling(runs, {}) and not kernel_data.is_sampling(runs[3:], {})
    predictor = fit(_samples(1000.0))
    key = kernel_data.ModelKey("local/p", "cpu", "fp32")
    document = kernel_data.model_file("x", {key: predictor})
    assert kernel_data.is_model_file(document)
    assert kernel_data.predictors_from_json(document, "f.json")[key].samples == predictor.samples
    with pytest.raises(ConfigError, match=r"f.json: models\[0\] is malformed"):
        kernel_data.predictors_from_json({"models": [{"device_id": "p"}]}, "f.json")
