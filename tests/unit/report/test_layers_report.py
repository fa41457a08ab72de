"""The report's per-layer part on a hand-built cnn experiment: the table holds the median per
layer, the best g is the one the data makes fastest, the stacked bar and the predicted-vs-measured
figure are drawn, and a model fitted on v1.0 predicts v1.1 within the band when the truth has the
model's form (an EVIL phone name stays escaped)."""

from __future__ import annotations

from farm.analysis.cnn_descriptor import network
from farm.analysis.kernel_model import features, kernel_type
from farm.report.layers import layer_section
from farm.report.model import ReportData
from farm.report.render import all_figures, render_html, render_markdown
from farm.store.layers import LayerResult
from farm.store.results import StoredResult
from farm.store.runs import RunState

EVIL = "<script>alert(1)</script>"
# conv1 is 2x slower at g=1 and fire2/squeeze1x1 1.5x slower at g=4; repetition 1 is 10 % slower.
# The fastest time of every layer is the truth, which the per-kernel-type model's form holds.
G_EFFECT = {(1, "conv1"): 2.0, (4, "fire2/squeeze1x1"): 1.5}
COST = {"conv1x1": 10.0, "convkxk": 8.0, "maxpool": 300.0, "avgpool": 300.0}  # ms per GFLOP


def true_ms(layer) -> float:  # type: ignore[no-untyped-def]
    return 0.01 + COST[str(kernel_type(layer))] * features(layer)["ms_per_gflop"]


def build() -> ReportData:
    runs, layers = [], {}
    for device in ("lab/p1", EVIL):
        for model in ("squeezenet1.0", "squeezenet1.1"):
            for g in (1, 4):
                for rep in range(2):
                    run_id = f"r{len(runs)}"
                    factors = {"model": model, "g": g}
                    runs.append(
                        StoredResult(
                            run_id,
                            f"{model},{g}",
                            factors,
                            rep,
                            device,
                            RunState.DONE,
                            None,
                            {"latency_median_ms": 1.0},
                            {"latency_median_ms": "ms"},
                        )
                    )
                    layers[run_id] = tuple(
                        LayerResult(
                            index,
                            layer.name,
                            str(layer.kind),
                            true_ms(layer) * (1.1 if rep else 1.0) * G_EFFECT.get((g, layer.name), 1.0),
                            g=g if layer.gemm_mnk else None,
                        )
                        for index, layer in enumerate(network(model).layers)
                    )
    return ReportData(
        experiment="cnn_layers",
        benchmark="cnn",
        spec=None,
        factor_names=("model", "g"),
        phones=(),
        runs=tuple(runs),
        layers=layers,
    )


def test_table_best_g_and_transfer() -> None:
    data = build()
    section = layer_section(data)
    assert section is not None
    conv1 = [
        r
        for r in section.rows
        if r.device_id == "lab/p1"
        and r.name == "conv1"
        and r.cell == (("model", "squeezenet1.0"), ("g", "1"))
    ]
    (row,) = conv1
    v10_conv1 = true_ms(network("squeezenet1.0").layers[0])
    assert row.time_ms == v10_conv1 * 2.0 * 1.05 and row.runs == 2  # median of 1.0x and 1.1x
    best = {(b.device_id, b.setting, b.name): b for b in section.best}
    first = best[("lab/p1", (("model", "squeezenet1.0"),), "conv1")]
    assert first.best_g == 4 and first.speedup_vs_g1 == 2.0
    assert best[("lab/p1", (("model", "squeezenet1.0"),), "fire2/squeeze1x1")].best_g == 1
    assert len(section.transfers) == 2  # one per phone (backend and precision default)
    for transfer in section.transfers:
        errors = transfer.prediction.layer_errors()
        assert errors is not None and errors[1] == 1.0 and errors[0] < 1e-6, transfer
        total = transfer.prediction.total_ms / (transfer.prediction.measured_total_ms or 1)
        assert abs(total - 1) < 1e-8
    figures = all_figures(data)
    html = render_html(data, figures)
    assert "Per-layer results" in html and "Best g per layer and phone" in html
    assert EVIL not in html and "&lt;script&gt;" in html
    assert "Predicted vs measured per layer" in html
    names = [figure.name for figure in figures]
    assert "layer_time_ms_vs_cell_per_device" in names and "predicted_ms_vs_measured_ms_per_device" in names
    assert "| lab/p1 |" in render_markdown(data, figures)
