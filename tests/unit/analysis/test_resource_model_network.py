"""CNN descriptors, per-layer prediction and memory, and the model file / store adapters."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from farm.analysis import resource_data
from farm.analysis.cnn_descriptor import LayerKind, network
from farm.analysis.network_model import memory, moved_mb, pool_rate, predict_network
from farm.analysis.resource_data import ModelKey, PhoneModel
from farm.analysis.resource_model import GemmModel, GemmSample, select_model
from farm.cli.model import refuse_unlike
from farm.errors import ConfigError
from farm.store.layers import LayerResult
from farm.store.results import StoredResult
from farm.store.runs import RunState

REPO = Path(__file__).resolve().parents[3]
# Published parameter counts (torchvision squeezenet1_0 / squeezenet1_1, weights + biases).
PARAMETERS = {"squeezenet1.0": 1_248_424, "squeezenet1.1": 1_235_496}
MODEL = GemmModel("flops+bytes", (("intercept_ms", 0.1), ("ms_per_gflop", 10.0), ("ms_per_mb", 0.5)))


@pytest.mark.parametrize("name", ["squeezenet1.0", "squeezenet1.1"])
def test_descriptor_matches_the_published_network(name: str) -> None:
    net = network(name)
    assert sum(layer.weight_count for layer in net.layers) == PARAMETERS[name]
    convs = [layer for layer in net.layers if layer.kind is LayerKind.CONV]
    assert len(convs) == 26  # conv1, 8 fire modules x 3, conv10
    assert net.layers[-1].name == "pool10" and net.layers[-1].out_size == 1
    assert net.layers[-2].gemm_mnk == (1000, 13 * 13, 512)


def test_every_gemm_of_squeezenet10_is_one_the_sweep_measures_or_shares_its_m_n() -> None:
    spec = yaml.safe_load((REPO / "experiments" / "gemm.yaml").read_text())
    swept = set(zip(spec["sweep"]["m"], spec["sweep"]["n"], spec["sweep"]["k"], strict=True))
    convs = [layer.gemm_mnk for layer in network("squeezenet1.0").layers if layer.gemm_mnk]
    assert convs[0] == (96, 111 * 111, 3 * 7 * 7) and convs[0] in swept
    assert sum(mnk in swept for mnk in convs) >= 10


def test_unknown_network_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown network 'resnet50'.*squeezenet1\.0"):
        network("resnet50")


def test_memory_is_weights_plus_the_worst_layers_maps_and_workspace() -> None:
    net = network("squeezenet1.0")
    fp32, fp16 = memory(net, "fp32"), memory(net, "fp16")
    assert fp32.weights_bytes == 4 * PARAMETERS["squeezenet1.0"]
    assert fp16.peak_bytes * 2 == fp32.peak_bytes
    # conv1: input 3x227x227, output 96x111x111, im2col 147 x 12321.
    assert fp32.peak_layer == "conv1"
    assert fp32.workspace_bytes == 4 * 147 * 12321
    assert fp32.peak_activations_bytes == 4 * (3 * 227 * 227 + 96 * 111 * 111)
    assert fp32.peak_bytes == fp32.weights_bytes + fp32.peak_activations_bytes + fp32.workspace_bytes
    # Each fire module's two expand layers share one concat buffer (counted once, not twice):
    # every map at once is the input plus every layer's own output.
    maps = 3 * 227 * 227 + sum(layer.output_count for layer in net.layers)
    assert fp32.all_feature_maps_bytes == 4 * maps


def test_prediction_is_the_gemm_model_per_conv_and_traffic_only_per_pool() -> None:
    net = network("squeezenet1.1")
    prediction = predict_network(MODEL, net, "fp32", {"conv1": 2.0, "pool1": 1.0})
    conv1, pool1 = prediction.layers[0], prediction.layers[1]
    assert conv1.predicted_ms == pytest.approx(MODEL.predict_ms(64, 111 * 111, 27))
    moved_mb = 4 * (64 * 111 * 111 + 64 * 55 * 55) / 1e6
    assert pool1.predicted_ms == pytest.approx(0.5 * moved_mb)
    assert prediction.total_ms == pytest.approx(sum(layer.predicted_ms for layer in prediction.layers))
    assert conv1.error_pct == pytest.approx((conv1.predicted_ms - 2.0) / 2.0 * 100)
    assert prediction.measured_total_ms is None  # not every layer measured
    errors = prediction.conv_errors()
    assert errors is not None and errors[0] == pytest.approx(abs(conv1.error_pct or 0))


def _run(
    run_id: str, factors: dict[str, object], metrics: dict[str, float], state: RunState = RunState.DONE
) -> StoredResult:
    return StoredResult(run_id, run_id, factors, 0, "local/VP1", state, metrics=metrics)


def test_gemm_samples_are_grouped_per_phone_backend_and_precision() -> None:
    runs = [
        _run("a", {"m": 8, "n": 8, "k": 8, "backend": "gpu"}, {"latency_median_ms": 1.0}),
        _run(
            "b", {"m": 16, "n": 8, "k": 8, "backend": "gpu", "precision": "fp16"}, {"latency_median_ms": 2.0}
        ),
        _run("c", {"m": 16, "n": 8, "k": 8}, {"latency_median_ms": 3.0}),  # backend from params
        _run("d", {"m": 32, "n": 8, "k": 8, "backend": "gpu"}, {}),  # no time: skipped
        _run("e", {"m": 32, "n": 8, "k": 8, "backend": "gpu"}, {"latency_median_ms": 9.0}, RunState.FAILED),
    ]
    groups = resource_data.gemm_samples(runs, {"backend": "cpu-mt"})
    assert groups == {
        ModelKey("local/VP1", "gpu", "fp32"): [GemmSample(8, 8, 8, 1.0, "fp32")],
        ModelKey("local/VP1", "gpu", "fp16"): [GemmSample(16, 8, 8, 2.0, "fp16")],
        ModelKey("local/VP1", "cpu-mt", "fp32"): [GemmSample(16, 8, 8, 3.0, "fp32")],
    }


def test_measured_layers_take_the_fastest_run_and_restore_layer_names() -> None:
    runs = [
        _run(f"r{i}", {"backend": "gpu"}, {"layer_02_fire2_squeeze1x1_ms": t, "layer_00_conv1_ms": 1.0})
        for i, t in enumerate([1.0, 5.0, 2.0])
    ] + [_run("other", {"backend": "gpu", "model": "squeezenet1.1"}, {"layer_00_conv1_ms": 99.0})]
    layers = resource_data.measured_layers(runs, {"model": "squeezenet1.0"}, "squeezenet1.0")
    assert layers == {ModelKey("local/VP1", "gpu", "fp32"): {"fire2/squeeze1x1": 1.0, "conv1": 1.0}}


def test_a_layers_statistic_is_its_median_or_its_fastest_iteration() -> None:
    run = _run("r0", {"backend": "gpu"}, {"layer_00_conv1_ms": 7.0})
    rows = {
        "r0": (
            LayerResult(index=0, name="conv1", kind="conv", time_ms=2.0, min_ms=1.5),
            LayerResult(index=1, name="pool1", kind="maxpool", time_ms=0.4),  # an older program: no min
        )
    }
    assert resource_data.run_layer_ms(run, rows) == {"conv1": 2.0, "pool1": 0.4}
    fastest = resource_data.run_layer_ms(run, rows, resource_data.LayerStatistic.FASTEST)
    assert fastest == {"conv1": 1.5, "pool1": 0.4}
    # runs stored before the layers table have medians only, whatever the statistic
    assert resource_data.run_layer_ms(run, {}, resource_data.LayerStatistic.FASTEST) == {"conv1": 7.0}
    key = ModelKey("local/VP1", "gpu", "fp32")
    by_min = resource_data.measured_layers(
        [run], {}, "squeezenet1.0", rows, resource_data.LayerStatistic.FASTEST
    )
    assert by_min == {key: {"conv1": 1.5, "pool1": 0.4}}


def test_model_file_round_trips_and_rejects_other_json() -> None:
    samples = [GemmSample(m, 64, 32, 0.01 * m) for m in (8, 16, 32, 64, 128)]
    phone = PhoneModel(ModelKey("local/VP1", "gpu", "fp32"), select_model(samples))
    document = resource_data.model_file("gemm", "latency_median_ms", [phone])
    assert resource_data.models_from_json(document, "m.json") == [phone]
    with pytest.raises(ConfigError, match=r"m\.json: not a farm resource model"):
        resource_data.models_from_json({"models": []}, "m.json")
    broken = {**document, "models": [{**document["models"][0], "coefficients": {"ms_per_watt": 1}}]}
    with pytest.raises(ConfigError, match=r"m\.json: models\[0\].*ms_per_watt"):
        resource_data.models_from_json(broken, "m.json")


def test_cnn_layers_become_gemm_samples_and_pool_pairs_of_their_network() -> None:
    metrics = {"layer_00_conv1_ms": 3.0, "layer_01_pool1_ms": 0.5, "layer_02_fire2_squeeze1x1_ms": 1.0}
    runs = [
        _run("v11", {"model": "squeezenet1.1", "backend": "gpu"}, metrics),
        _run("v10", {"model": "squeezenet1.0", "backend": "gpu"}, {"layer_00_conv1_ms": 9.0}),
        _run("small", {"model": "squeezenet1.1", "backend": "gpu", "input_size": 64}, metrics),
    ]
    groups = resource_data.cnn_layer_samples(runs, {}, ["squeezenet1.1"])
    (layers,) = groups.values()
    # the 64 px run's layers are GEMMs of their own shapes: conv1 3x3/2 on 64 px gives 31 x 31 outputs
    assert layers.convs == [
        GemmSample(64, 111 * 111, 27, 3.0),
        GemmSample(16, 55 * 55, 64, 1.0),
        GemmSample(64, 31 * 31, 27, 3.0),
        GemmSample(16, 15 * 15, 64, 1.0),
    ]
    pool1 = network("squeezenet1.1").layers[1]
    assert layers.pools == [(moved_mb(pool1), 0.5), (moved_mb(network("squeezenet1.1", 64).layers[1]), 0.5)]


def test_compare_refuses_another_input_size_or_network_in_one_line() -> None:
    runs = [_run("r0", {"backend": "gpu", "input_size": 113}, {"layer_00_conv1_ms": 1.0})]
    measured = resource_data.measured_inputs(runs, {"model": "squeezenet1.0"})
    assert measured == {("squeezenet1.0", 113)}
    refuse_unlike("sq.quick", measured, network("squeezenet1.0", 113))  # like with like: no error
    with pytest.raises(ConfigError) as caught:
        refuse_unlike("sq.quick", measured, network("squeezenet1.0"))
    assert str(caught.value) == (
        "--compare sq.quick: it ran squeezenet1.0 at 113 px, not squeezenet1.0 at 227 px: the layer shapes "
        "differ (predict at its size: --input-size 113)"
    )
    with pytest.raises(ConfigError, match=r"not squeezenet1\.1 at 224 px"):
        refuse_unlike("sq.quick", measured, network("squeezenet1.1"))


def test_pool_rate_is_the_median_ms_per_mb_and_used_for_pools() -> None:
    assert pool_rate([(1.0, 2.0), (2.0, 2.0), (4.0, 40.0)]) == pytest.approx(2.0)
    assert pool_rate([]) is None
    net = network("squeezenet1.0")
    prediction = predict_network(MODEL, net, "fp32", pool_ms_per_mb=3.0)
    pool1 = prediction.layers[1]
    assert pool1.predicted_ms == pytest.approx(3.0 * moved_mb(net.layers[1]))
