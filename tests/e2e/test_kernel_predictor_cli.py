"""`farm model fit` on a kernel sampling experiment (single-layer cnn runs) measured on a virtual
phone, then `farm model predict` for SqueezeNet 1.1, a network never run in the fit, against a
measured cnn run; and the Augur baseline's refusal of a kernel predictor file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vphone.testing.phones import PhoneFactory

from farm.experiment.files import load
from tests.e2e.farm_cli import run_farm, write_experiment
from tests.e2e.test_model_cli import FAST

pytestmark = pytest.mark.integration

# Four configurations of each kernel type SqueezeNet runs (the predictor's minimum per type).
SAMPLING = (
    "benchmark: {program: cnn, params: {model: layer, backend: cpu}}\n"
    "sweep:\n"
    "  layer: [conv, conv, conv, conv, conv, conv, conv, conv, maxpool, maxpool, maxpool, maxpool,"
    " avgpool, avgpool, avgpool, avgpool]\n"
    "  channels: [3, 16, 32, 64, 16, 32, 64, 128, 64, 96, 128, 256, 128, 256, 512, 1000]\n"
    "  out_channels: [32, 64, 64, 128, 16, 32, 128, 256, 1, 1, 1, 1, 1, 1, 1, 1]\n"
    "  kernel: [3, 3, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3, 1, 1, 1, 1]\n"
    "  stride: [2, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1]\n"
    "  pad: [0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n"
    "  input_size: [64, 28, 14, 14, 28, 28, 14, 14, 56, 28, 28, 14, 7, 14, 14, 7]\n"
    "zip: [[layer, channels, out_channels, kernel, stride, pad, input_size]]\n" + FAST
)
CNN = "benchmark: {program: cnn, params: {model: squeezenet1.1, backend: cpu}}\n" + FAST


def test_fit_on_sampled_kernels_then_predict_an_unseen_network(
    virtual_phones: PhoneFactory, tmp_path: Path
) -> None:
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    port = phones.adb_port
    for name, body in (("sampling_tiny", SAMPLING), ("cnn_tiny", CNN)):
        done = run_farm(port, results, "run", str(write_experiment(tmp_path, name, body)), "--no-live")
        assert done.returncode == 0, done.stdout + done.stderr

    fitted = run_farm(port, results, "model", "fit", "sampling_tiny", "--json")
    assert fitted.returncode == 0, fitted.stderr
    document = json.loads(fitted.stdout)
    assert document["format"] == "farm-kernel-predictor/1"
    (model,) = document["models"]
    assert (model["device_id"], model["backend"]) == (f"local/{phones[0].serial}", "cpu")
    kinds = sorted(s["kind"] for s in model["samples"])
    assert kinds == sorted(["conv"] * 4 + ["pointwise"] * 4 + ["maxpool"] * 4 + ["avgpool"] * 4)
    assert all(s["time_ms"] > 0 for s in model["samples"])
    model_file = results / "sampling_tiny" / "kernel_predictor.json"

    predicted = run_farm(
        port, results, "model", "predict", "--model", str(model_file), "--network", "squeezenet1.1",
        "--compare", "cnn_tiny", "--json",
    )  # fmt: skip
    assert predicted.returncode == 0, predicted.stderr
    (prediction,) = json.loads(predicted.stdout)["predictions"]
    layers = prediction["layers"]
    assert len(layers) == 30 and layers[0]["name"] == "conv1"
    assert all(layer["predicted_ms"] > 0 and layer["measured_ms"] > 0 for layer in layers)
    assert prediction["total_ms"] == pytest.approx(sum(layer["predicted_ms"] for layer in layers))
    assert prediction["accuracy"]["rmspe_pct"] >= 0

    # the adaptive round: an experiment farm can load, around the worst held-out configurations
    round2 = tmp_path / "round2.yaml"
    refined = run_farm(port, results, "model", "fit", "sampling_tiny", "--refine", str(round2))
    assert refined.returncode == 0, refined.stderr
    assert (
        f"written to {round2}" in refined.stdout
        and "farm model fit sampling_tiny sampling_tiny_refine" in refined.stdout
    )
    spec = load(round2)
    assert spec.name == "sampling_tiny_refine" and len(spec.sweep["layer"]) >= 4
    mixed = run_farm(port, results, "model", "fit", "sampling_tiny", "cnn_tiny")
    assert mixed.returncode == 2 and "'cnn_tiny' is no kernel sampling experiment" in mixed.stderr

    refused = run_farm(
        port, results, "model", "predict", "--model", str(model_file), "--network", "squeezenet1.1",
        "--baseline", "augur",
    )  # fmt: skip
    assert refused.returncode == 2
    assert "--baseline augur needs a GEMM model file" in refused.stderr
    assert "Traceback" not in refused.stderr
