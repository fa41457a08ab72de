"""The per-kernel-type layer model: known coefficients are recovered, and a model fitted on
SqueezeNet v1.0's layers predicts v1.1's (a network it never saw) exactly when the truth is of the
model's form, and within the noise when it is not."""

from __future__ import annotations

import numpy as np
import pytest

from farm.analysis.cnn_descriptor import Layer, network
from farm.analysis.kernel_model import (
    FEATURES,
    KernelType,
    LayerSample,
    choose_form,
    features,
    fit_layer_model,
    held_out_error,
    kernel_type,
    transfer_errors,
)
from farm.errors import ConfigError

# A made-up phone: each kernel type with its own costs (ms per unit of each feature).
TRUTH: dict[KernelType, dict[str, float]] = {
    KernelType.CONV_1X1: {
        "intercept_ms": 0.02,
        "ms_per_gflop": 12.0,
        "ms_per_m_out": 0.4,
        "ms_per_m_in": 0.3,
    },
    KernelType.CONV_KXK: {
        "intercept_ms": 0.05,
        "ms_per_gflop": 9.0,
        "ms_per_m_in": 4.0,
        "ms_per_m_weights": 1.0,
    },
    KernelType.MAXPOOL: {"intercept_ms": 0.01, "ms_per_gflop": 300.0},
    KernelType.AVGPOOL: {"intercept_ms": 0.04},
}


def true_ms(layer: Layer) -> float:
    values = features(layer)
    return sum(coef * values[name] for name, coef in TRUTH[kernel_type(layer)].items())


def test_kernel_types_of_squeezenet() -> None:
    types = {layer.name: kernel_type(layer) for layer in network("squeezenet1.1").layers}
    assert types["conv1"] is KernelType.CONV_KXK  # 3x3 stride 2
    assert types["fire2/squeeze1x1"] is KernelType.CONV_1X1
    assert types["fire2/expand3x3"] is KernelType.CONV_KXK
    assert types["pool1"] is KernelType.MAXPOOL and types["pool10"] is KernelType.AVGPOOL
    assert types["conv10"] is KernelType.CONV_1X1


def test_fit_on_v10_predicts_v11_exactly_when_the_truth_has_the_models_form() -> None:
    train = [LayerSample(layer, true_ms(layer)) for layer in network("squeezenet1.0").layers]
    model = fit_layer_model(train)
    conv = model.of(KernelType.CONV_1X1)
    assert conv is not None and conv.shapes >= len(FEATURES)
    assert dict(conv.coefficients)["ms_per_gflop"] == pytest.approx(12.0, rel=1e-6)
    for layer in network("squeezenet1.1").layers:
        assert model.predict_ms(layer) == pytest.approx(true_ms(layer), rel=1e-6), layer.name
    errors = transfer_errors(model, {x: true_ms(x) for x in network("squeezenet1.1").layers})
    assert errors.within_10pct == 1.0 and abs(errors.total_error_pct) < 1e-4 and errors.layers == 30


def test_noisy_repetitions_fit_the_fastest_and_stay_within_the_band() -> None:
    rng = np.random.default_rng(7)
    # Interference only adds time: 3 repetitions, each up to 30 % slower, one of them near clean.
    train = [
        LayerSample(layer, true_ms(layer) * (1 + (0.01 if rep == 0 else 0.3) * rng.random()))
        for rep in range(3)
        for layer in network("squeezenet1.0").layers
    ]
    model = fit_layer_model(train)
    errors = transfer_errors(model, {x: true_ms(x) for x in network("squeezenet1.1").layers})
    assert errors.within_10pct >= 0.9 and abs(errors.total_error_pct) < 5
    # Fitting every repetition instead pulls the model up towards the disturbed ones.
    pooled = fit_layer_model(train, fastest=False)
    assert (
        transfer_errors(pooled, {x: true_ms(x) for x in network("squeezenet1.1").layers}).total_error_pct > 3
    )


def test_a_type_with_few_shapes_gets_a_form_it_can_pin() -> None:
    layers = network("squeezenet1.0").layers
    pools = [LayerSample(x, true_ms(x)) for x in layers if kernel_type(x) is KernelType.MAXPOOL]
    model = fit_layer_model(pools)
    (only,) = model.kernels
    assert only.shapes == 3 and [name for name, _ in only.coefficients] == ["intercept_ms", "ms_per_gflop"]
    avg = fit_layer_model([LayerSample(layers[-1], 0.04)]).kernels[0]
    assert avg.coefficients == (("intercept_ms", pytest.approx(0.04)),)
    with pytest.raises(ConfigError, match=r"layer conv1: no convkxk layer was measured.*fitted: maxpool"):
        model.predict_ms(layers[0])


def test_the_form_is_chosen_by_leave_one_shape_out_error_fewest_terms_on_a_tie() -> None:
    # kxk layers whose truth is intercept + GFLOP + im2col elements: every superset of that form
    # predicts each left-out shape exactly too, so the tie goes to the true form itself
    def truth(layer: Layer) -> float:
        values = features(layer)
        return 0.05 + 9.0 * values["ms_per_gflop"] + 2.0 * values["ms_per_m_im2col"]

    kxk = [x for x in network("squeezenet1.0").layers if kernel_type(x) is KernelType.CONV_KXK]
    samples = [LayerSample(x, truth(x)) for x in kxk]
    chosen = choose_form(samples)
    assert chosen == ("intercept_ms", "ms_per_gflop", "ms_per_m_im2col")
    assert held_out_error(samples, chosen) == pytest.approx(0.0, abs=1e-9)
    assert held_out_error(samples, ("intercept_ms", "ms_per_gflop")) > 0.05
    # a term pinned by one shape alone (conv1's input) does not survive its shape being left out:
    # conv1 20 % slower than the truth is fitted by no extra term
    skewed = [LayerSample(s.layer, s.time_ms * (1.2 if s.layer.name == "conv1" else 1.0)) for s in samples]
    model = fit_layer_model(skewed)
    for layer in network("squeezenet1.1").layers:
        if kernel_type(layer) is KernelType.CONV_KXK and layer.name != "conv1":
            assert model.predict_ms(layer) == pytest.approx(truth(layer), rel=0.1), layer.name


def test_bad_times_and_no_samples_are_config_errors() -> None:
    layer = network("squeezenet1.0").layers[0]
    with pytest.raises(ConfigError, match=r"layer conv1: time -1\.0 ms is not a positive number"):
        fit_layer_model([LayerSample(layer, -1.0)])
    with pytest.raises(ConfigError, match="no measured layers"):
        fit_layer_model([])
