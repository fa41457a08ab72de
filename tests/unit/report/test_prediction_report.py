"""`farm report --model`: a kernel predictor file held against every network a cnn experiment
measured. The measured layers are the predictor's own times at the runs' pinned clock, every odd
layer 1.5x slower, so the truth is known without the code under test: the even layers are within
+-5 %, the odd ones 33 % off (RMSPE sqrt(odd share / 9)); the report shows that table in nn-Meter's
terms and one predicted-vs-measured figure with the +-10 % band per network; a file that holds no
kernel predictor is refused in one line."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

from farm.analysis.cnn_descriptor import network
from farm.analysis.kernel_predictor import (
    KernelConfig,
    KernelKind,
    KernelPredictor,
    KernelSample,
    fit,
    kernel_of_layer,
    predict_many,
)
from farm.analysis.prediction_check import check_networks
from farm.analysis.resource_data import ModelKey
from farm.report.layers import layer_figures
from farm.report.model import ReportData
from farm.report.render import render_html, render_markdown
from farm.store.layers import LayerResult
from farm.store.results import StoredResult
from farm.store.runs import RunState

KEY = ModelKey("lab/p1", "cpu", "fp32")
NETS = ("mobilenetv1", "squeezenet1.1")
SIZE = 112
CLOCK_MHZ = 1500.0  # the networks ran here; the kernels were sampled at 1000 MHz
POLICY = "/sys/devices/system/cpu/cpufreq/policy7/scaling_"
ENV = {
    "clocks": {"mode": "pin", "readback": {f"{POLICY}max_freq": "1500000", f"{POLICY}min_freq": "1500000"}}
}


def predictor() -> KernelPredictor:
    """Every kernel type the two networks run, timed by a roofline-like law at 1 GHz."""
    samples = []
    for kind, maps, size, k in itertools.product(
        [KernelKind.CONV, KernelKind.POINTWISE, KernelKind.DWCONV, KernelKind.AVGPOOL, KernelKind.MAXPOOL],
        [8, 32, 128],
        [8, 32],
        [1, 3],
    ):
        kernel = 1 if kind is KernelKind.POINTWISE else 3 if kind is KernelKind.MAXPOOL else k
        stride = 2 if kind is KernelKind.MAXPOOL else 1
        config = KernelConfig(kind, maps, size, maps, kernel, stride, kernel // 2 if stride == 1 else 0)
        samples.append(KernelSample(config, 0.01 + config.flops() / 2e6, 1000.0))
    for maps, out in itertools.product([8, 32, 128, 1024], [10, 100, 1000]):
        config = KernelConfig(KernelKind.FC, maps, 1, out, 1)
        samples.append(KernelSample(config, 0.01 + config.flops() / 2e6, 1000.0))
    return fit(samples)


def build(model: KernelPredictor) -> ReportData:
    runs, layers = [], {}
    for name in NETS:
        descriptor = network(name, SIZE)
        times = predict_many(model, [kernel_of_layer(x) for x in descriptor.layers], CLOCK_MHZ)
        run_id = f"r{len(runs)}"
        runs.append(
            StoredResult(
                run_id,
                name,
                {"model": name, "backend": "cpu", "input_size": SIZE},
                0,
                KEY.device_id,
                RunState.DONE,
                None,
                {"latency_median_ms": sum(times)},
                {"latency_median_ms": "ms"},
            )
        )
        layers[run_id] = tuple(
            LayerResult(index, layer.name, str(layer.kind), ms * (1.5 if index % 2 else 1.0))
            for index, (layer, ms) in enumerate(zip(descriptor.layers, times, strict=True))
        )
    return ReportData(
        experiment="nets",
        benchmark="cnn",
        spec=None,
        factor_names=("model", "backend", "input_size"),
        phones=(),
        runs=tuple(runs),
        layers=layers,
    )


def test_every_network_measured_gets_its_accuracy_table_row_and_band_figure() -> None:
    model = predictor()
    data = build(model)
    checks = check_networks(data.runs, {}, data.layers, {KEY: model}, {run.run_id: ENV for run in data.runs})
    assert [c.network for c in checks] == list(NETS)
    for check in checks:
        count = len(network(check.network, SIZE).layers)
        odd = count // 2
        assert check.clock_mhz == CLOCK_MHZ
        assert check.accuracy.count == count
        assert check.accuracy.within_5pct == check.accuracy.within_10pct == (count - odd) / count
        assert check.accuracy.within_15pct == (count - odd) / count
        assert math.isclose(check.accuracy.rmspe_pct, 100 * math.sqrt(odd / count / 9), rel_tol=1e-9)
        assert check.accuracy.total_error_pct < 0

    shown = dataclasses.replace(data, predictions=checks, predictor_source="kernels.json")
    markdown = render_markdown(shown)
    assert "Kernel predictor vs measured per network (kernels.json)" in markdown
    for check in checks:
        row = next(
            line for line in markdown.splitlines() if line.startswith(f"| {check.network} ({SIZE} px)")
        )
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1:5] == [
            "lab/p1 cpu fp32",
            "1500",
            str(check.accuracy.count),
            f"{check.accuracy.rmspe_pct:.1f}%",
        ]
        assert cells[6] == f"{100 * check.accuracy.within_10pct:.0f}%"
        assert cells[-1] == f"{check.accuracy.total_error_pct:+.1f}%"
    assert "Kernel predictor vs measured per network" in render_html(shown)

    figures = [f for f in layer_figures(shown) if "kernel predictor vs measured" in f.title]
    assert [f.title.split(" at ")[0] for f in figures] == list(NETS)
    assert all('id="farm-band-10pct' in f.svg for f in figures)
    assert len({f.name for f in layer_figures(shown)}) == len(layer_figures(shown))  # one file each
    assert not [f for f in layer_figures(data) if "kernel predictor vs measured" in f.title]


def test_a_file_without_kernel_predictors_is_refused_in_one_line(tmp_path: Path) -> None:
    gemm = tmp_path / "resource_model.json"
    gemm.write_text(json.dumps({"format": "farm-resource-model/1", "models": []}))
    done = subprocess.run(
        [sys.executable, "-m", "farm", "report", "nets", "--model", str(gemm), "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert f"{gemm}: no kernel predictor file" in done.stderr
    assert "Traceback" not in done.stderr
