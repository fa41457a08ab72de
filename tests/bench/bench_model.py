"""Benchmark: does a resource model fitted on one network predict another, per layer, on a phone?

On one virtual phone (PoCL for the gpu backend, the C paths for cpu), through `farm run`:
1. cnn: SqueezeNet 1.0 and 1.1 on cpu and gpu, REPEATS repetitions (interleaved order);
2. gemm: the gemm experiment's shapes (SqueezeNet 1.0's convolutions after im2col, plus squares)
   on the same backends, one repetition.
Then, per repetition of 1.1 and backend:
- the per-kernel-type layer model (farm.analysis.kernel_model) fitted on 1.0's layers (every
  repetition, the fastest of each shape, as `farm model fit` does; and, stricter, on the same
  repetition's 1.0 run alone) predicts 1.1's measured layers (a network it never saw): share of
  layers within +-10 % and the total's error;
- the Augur baseline, the GEMM-only model (farm.analysis.resource_model) fitted on the gemm sweep,
  predicts the same 1.1 layers (convolutions as their im2col GEMMs, pools by the GEMM's traffic
  term).
A last row per backend compares with each 1.1 layer's fastest repetition, as `farm model predict
--compare` does; "noise floor" rows hold each 1.1 repetition against the first (the runs' own
spread, which no model of the shapes can beat).
Noise floor rows are given for both statistics of a layer's iterations (median and fastest); the
models use FARM_BENCH_STATISTIC (median, as `farm model` does; see resource_data.LayerStatistic).
Goal (issue 17 item 6): >= 80 % of layers within +-10 % and the total within 10 %. The host is
shared: layer times move with its load, which is printed. Prints a table and writes
results/bench/bench_model.json. Run: .venv/bin/python tests/bench/bench_model.py
(FARM_BENCH_REPEATS=N repetitions, 3; FARM_BENCH_ITERATIONS=N measured inferences per run, 10;
FARM_BENCH_KEEP=DIR keeps the measurement in DIR, and a DIR that holds one is evaluated again
without measuring, to compare models or statistics on the same runs.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from vphone.testing.phones import free_tcp_port, kill_adb_server, start_adb_server  # noqa: E402

from farm.analysis import resource_data  # noqa: E402
from farm.analysis.cnn_descriptor import network  # noqa: E402
from farm.analysis.kernel_model import fit_layer_model  # noqa: E402
from farm.analysis.network_model import (  # noqa: E402
    NetworkPrediction,
    predict_network,
    predict_network_by_kernel,
)
from farm.analysis.resource_model import select_model  # noqa: E402
from farm.report.model import ReportData  # noqa: E402
from farm.report.query import load_report_data  # noqa: E402
from farm.store import Store  # noqa: E402
from tests.bench.table import report  # noqa: E402
from tests.e2e.farm_cli import write_experiment  # noqa: E402
from vphone import control  # noqa: E402

OUT = ROOT / "results" / "bench" / "bench_model.json"
REPEATS = int(os.environ.get("FARM_BENCH_REPEATS", "3"))
ITERATIONS = int(os.environ.get("FARM_BENCH_ITERATIONS", "10"))
# FARM_BENCH_STATISTIC=median|min: which of a layer's statistics the models fit and predict
STATISTIC = resource_data.LayerStatistic(os.environ.get("FARM_BENCH_STATISTIC", "median"))
# FARM_BENCH_KEEP=DIR: measure into DIR and keep it; a DIR that holds a measurement is evaluated again
KEEP = Path(os.environ["FARM_BENCH_KEEP"]) if os.environ.get("FARM_BENCH_KEEP") else None
PROFILE = "adreno-sd865"
BACKENDS = ("cpu", "gpu")
QUIET = (
    "conditions: {cooldown: {max_temp_c: 90, timeout_s: 5}, min_battery_pct: 1}\n"
    "telemetry: {idle_baseline_s: 0, power: none, disable_charging: false}\n"
    "timeouts: {run_timeout_s: 900}\n"
)
CNN = (
    "benchmark: {program: cnn}\n"
    f"sweep: {{model: [squeezenet1.0, squeezenet1.1], backend: [{', '.join(BACKENDS)}]}}\n"
    f"measurement: {{warmup: 2, iterations: {ITERATIONS}, min_seconds: 0, max_seconds: 60, "
    f"repetitions: {REPEATS}}}\n" + QUIET
)
GEMM = (
    "benchmark: {program: gemm, params: {transfers: each}}\n"
    "sweep:\n"
    "  m: [96, 16, 64, 64, 32, 128, 128, 48, 192, 64, 256, 1000, 128, 256, 512]\n"
    "  n: [12321, 3025, 3025, 3025, 729, 729, 729, 169, 169, 169, 169, 169, 128, 256, 512]\n"
    "  k: [147, 96, 16, 144, 256, 32, 288, 384, 48, 512, 576, 512, 128, 256, 512]\n"
    f"  backend: [{', '.join(BACKENDS)}]\n"
    "zip: [[m, n, k]]\n"
    "measurement: {warmup: 1, iterations: 3, min_seconds: 0, max_seconds: 20, repetitions: 1}\n" + QUIET
)


def _where(adb_port: int, results: Path) -> list[str]:
    return ["--adb-port", str(adb_port), "--results", str(results)]


def _farm_run(adb_port: int, results: Path, spec: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "farm", "run", str(spec), "--no-live", *_where(adb_port, results)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"farm run failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}")


def _score(prediction: NetworkPrediction) -> dict[str, Any]:
    errors = prediction.layer_errors()
    measured = prediction.measured_total_ms or float("nan")
    return {
        "layers_within_10pct": errors[1] if errors else None,
        "layer_mape_pct": errors[0] if errors else None,
        "total_error_pct": (prediction.total_ms / measured - 1) * 100,
        "predicted_total_ms": prediction.total_ms,
        "measured_total_ms": measured,
        "layers": [
            {"name": x.name, "predicted_ms": x.predicted_ms, "measured_ms": x.measured_ms}
            for x in prediction.layers
        ],
    }


def _noise_floor(cnn: ReportData, statistic: resource_data.LayerStatistic) -> list[dict[str, Any]]:
    def layers_of(repetition: int) -> dict[resource_data.ModelKey, dict[str, float]]:
        runs = [r for r in cnn.runs if r.repetition == repetition]
        return resource_data.measured_layers(runs, {}, "squeezenet1.1", cnn.layers, statistic)

    first, rows = layers_of(0), []
    for repetition in range(1, REPEATS):
        again = layers_of(repetition)
        for key in sorted(set(first) & set(again)):
            close = [abs(again[key][n] / first[key][n] - 1) <= 0.10 for n in first[key] if n in again[key]]
            total = sum(again[key].values()) / sum(first[key].values()) - 1
            rows.append(
                {
                    "repetition": f"{repetition} vs 0",
                    "backend": key.backend,
                    "device": key.device_id,
                    "statistic": str(statistic),
                    "repeatability": {
                        "layers_within_10pct": sum(close) / len(close),
                        "total_error_pct": total * 100,
                    },
                }
            )
    return rows


def evaluate(results: Path) -> list[dict[str, Any]]:
    with Store.in_results(results, read_only=True) as store:
        cnn = load_report_data(store, "cnn_model")
        gemm = load_report_data(store, "gemm_model")
    gemm_models = {
        key: select_model(samples) for key, samples in resource_data.gemm_samples(gemm.runs, {}).items()
    }
    v11 = network("squeezenet1.1")
    # As `farm model fit` does: every 1.0 repetition, the fastest of each layer shape.
    every = resource_data.layer_samples(cnn.runs, {}, ("squeezenet1.0",), cnn.layers, STATISTIC)
    fitted_on_all = {key: fit_layer_model(samples) for key, samples in every.items()}
    rows = []
    for repetition in range(REPEATS):
        runs = [run for run in cnn.runs if run.repetition == repetition]
        train = resource_data.layer_samples(runs, {}, ("squeezenet1.0",), cnn.layers, STATISTIC)
        measured = resource_data.measured_layers(runs, {}, "squeezenet1.1", cnn.layers, STATISTIC)
        for key in sorted(set(train) & set(measured)):
            row: dict[str, Any] = {"repetition": repetition, "backend": key.backend, "device": key.device_id}
            row["kernels"] = _score(
                predict_network_by_kernel(fitted_on_all[key], v11, key.precision, measured[key])
            )
            # Stricter: fitted on this repetition's 1.0 run alone (as disturbed as the 1.1 run).
            alone = fit_layer_model(train[key])
            row["kernels_one_run"] = _score(
                predict_network_by_kernel(alone, v11, key.precision, measured[key])
            )
            if key in gemm_models:
                baseline = predict_network(gemm_models[key].model, v11, key.precision, measured[key])
                row["gemm"] = _score(baseline)
            rows.append(row)
    # The noise floor: how often a repetition of 1.1 is within +-10 % of the first one, layer by
    # layer (no model of the shapes can be closer to a run than the runs are to each other), by
    # each statistic of a layer's iterations (the model uses the fastest).
    for statistic in resource_data.LayerStatistic:
        rows.extend(_noise_floor(cnn, statistic))
    # As `farm model predict --compare` does: each 1.1 layer's fastest repetition.
    fastest = resource_data.measured_layers(cnn.runs, {}, "squeezenet1.1", cnn.layers, STATISTIC)
    for key in sorted(set(fitted_on_all) & set(fastest)):
        row = {"repetition": "fastest", "backend": key.backend, "device": key.device_id}
        row["kernels"] = _score(
            predict_network_by_kernel(fitted_on_all[key], v11, key.precision, fastest[key])
        )
        if key in gemm_models:
            row["gemm"] = _score(predict_network(gemm_models[key].model, v11, key.precision, fastest[key]))
        rows.append(row)
    return rows


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def measure(work: Path) -> Path:
    """Both experiments on one fresh virtual phone; the results folder."""
    server = start_adb_server(free_tcp_port())
    try:
        state = control.start_daemon(work / "vp", [PROFILE], adb_port=server.port)
        try:
            control.connect_phones(state.phones, server.port)
            results = work / "results"
            _farm_run(server.port, results, write_experiment(work, "cnn_model", CNN))
            _farm_run(server.port, results, write_experiment(work, "gemm_model", GEMM))
            return results
        finally:
            control.disconnect_phones(state.phones, server.port)
            control.stop_daemon(state)
    finally:
        kill_adb_server(server)


def main() -> None:
    load_before = os.getloadavg()
    if KEEP is not None and (KEEP / "results").is_dir():  # evaluate a kept measurement again
        rows = evaluate(KEEP / "results")
    elif KEEP is not None:
        KEEP.mkdir(parents=True, exist_ok=True)
        rows = evaluate(measure(KEEP))
    else:
        with tempfile.TemporaryDirectory(prefix="farm-bench-model-") as tmp:
            rows = evaluate(measure(Path(tmp)))
    load_after = os.getloadavg()
    table = []
    for row in rows:
        label = f"squeezenet1.1 {row['backend']} rep {row['repetition']}"
        if "repeatability" in row:
            x = row["repeatability"]
            share, total = _pct(x["layers_within_10pct"]), x["total_error_pct"]
            text = f"noise floor ({row['statistic']}): {share} of layers within 10%, total {total:+.1f}%"
            table.append((label, text))
            continue
        parts = [("kernels", row["kernels"])]
        if "kernels_one_run" in row:
            parts.append(("same-rep fit", row["kernels_one_run"]))
        if "gemm" in row:
            parts.append(("gemm-only", row["gemm"]))
        text = " | ".join(
            f"{name}: {_pct(x['layers_within_10pct'])} within 10%, total {x['total_error_pct']:+.1f}%"
            for name, x in parts
        )
        table.append((label, text))
    for backend in BACKENDS:
        mine = [r["kernels"] for r in rows if r["backend"] == backend and isinstance(r["repetition"], int)]
        if mine:
            met = sum(1 for k in mine if k["layers_within_10pct"] >= 0.8 and abs(k["total_error_pct"]) <= 10)
            table.append((f"{backend}: repetitions meeting the goal", f"{met} of {len(mine)}"))
    table.append(("host load average before / after", f"{load_before[0]:.1f} / {load_after[0]:.1f}"))
    report(
        OUT,
        "bench_model",
        table,
        {
            "repeats": REPEATS,
            "iterations": ITERATIONS,
            "statistic": str(STATISTIC),
            "profile": PROFILE,
            "load_before": load_before,
            "load_after": load_after,
            "rows": rows,
        },
        ROOT,
    )


if __name__ == "__main__":
    main()
