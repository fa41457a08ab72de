"""`farm model predict --network FILE`: a descriptor a user wrote, priced by a kernel predictor file
(synthetic samples: no phone needed), and a malformed one refused in one line naming file:line."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

from farm.analysis import kernel_data
from farm.analysis.kernel_predictor import KernelConfig, KernelKind, KernelSample, fit
from farm.analysis.resource_data import ModelKey
from tests.unit.analysis.test_network_descriptors import readme_example


def _model_file(path: Path) -> Path:
    """Every kernel type the README's example runs, timed by a roofline-like law at 1 GHz."""
    samples = []
    for kind, maps, size, k in itertools.product(
        [KernelKind.CONV, KernelKind.POINTWISE, KernelKind.DWCONV, KernelKind.ADD, KernelKind.AVGPOOL],
        [8, 32, 128],
        [8, 32],
        [1, 3],
    ):
        kernel = 1 if kind is KernelKind.POINTWISE else k
        config = KernelConfig(kind, maps, size, maps, kernel, 1, kernel // 2)
        samples.append(KernelSample(config, 0.01 + config.flops() / 2e6, 1000.0))
    for maps, out in itertools.product([8, 32, 128], [10, 100]):
        config = KernelConfig(KernelKind.FC, maps, 1, out, 1)
        samples.append(KernelSample(config, 0.01 + config.flops() / 2e6, 1000.0))
    document = kernel_data.model_file("synthetic", {ModelKey("local/p", "cpu", "fp32"): fit(samples)})
    path.write_text(json.dumps(document))
    return path


def _predict(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "farm", "model", "predict", *args], capture_output=True, text=True, timeout=120
    )


def test_predict_a_descriptor_file_and_refuse_a_bad_one(tmp_path: Path) -> None:
    model = _model_file(tmp_path / "kernels.json")
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text(readme_example())
    done = _predict("--model", str(model), "--network", str(tiny), "--json")
    assert done.returncode == 0, done.stderr
    (prediction,) = json.loads(done.stdout)["predictions"]
    assert [layer["name"] for layer in prediction["layers"]] == ["conv1", "dw1", "pw1", "res1", "pool", "fc"]
    assert all(layer["predicted_ms"] > 0 for layer in prediction["layers"])

    bad = tmp_path / "bad.yaml"
    bad.write_text(
        readme_example().replace(
            "out: [32, 32, 32], kernel: 3, stride: 2", "out: [32, 31, 31], kernel: 3, stride: 2"
        )
    )
    refused = _predict("--model", str(model), "--network", str(bad))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[0].startswith(f"farm: {bad}:4: layer conv1: out is 31x31")
    assert "Traceback" not in refused.stderr
