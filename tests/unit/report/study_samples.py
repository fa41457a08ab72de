"""ReportData for each seed study, built by hand from its experiment's cells with known effects
(no database): a GPU speedup that falls through 1 at load 0.6, fp16 twice as fast, ..."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from farm.report.model import PhoneInfo, ReportData
from farm.report.query import figure_specs, table_specs
from farm.spec import load_text
from farm.store.results import StoredResult
from farm.store.runs import RunState

PHONES = ("local/vp-1", "local/vp-2")
Metrics = Callable[[Mapping[str, object], int], dict[str, float]]

MOBIRNN = """\
name: lstm_gpu_load
benchmark: {program: lstm}
sweep: {backend: [cpu, cpu-mt, gpu], hidden: [128], gpu_load: [0, 0.3, 0.5, 0.7, 0.9]}
report: {study: mobirnn}
"""
SQUEEZENET = """\
name: squeezenet_precision
benchmark: {program: cnn, params: {model: squeezenet1.0}}
sweep: {backend: [cpu, cpu-mt, gpu], precision: [fp32, fp16], g: [1, 2, 4]}
exclude: [{backend: [cpu, cpu-mt], g: [2, 4]}]
report: {study: squeezenet}
"""
TRAINING = """\
name: gpu_training
benchmark: {program: train, params: {batch: 32}}
sweep: {layers: ["784,256,128,16", "16,16"], backend: [cpu, gpu], buffers: [copy, resident]}
exclude: [{backend: cpu, buffers: resident}]
report: {study: training}
"""
GEMM = """\
name: gemm
benchmark: {program: gemm}
sweep: {m: [64, 256], n: [3025, 169], k: [144, 512], backend: [cpu-mt, gpu], precision: [fp32]}
zip: [[m, n, k]]
report: {study: gemm}
"""


def _mobirnn(factors: Mapping[str, object], device: int) -> dict[str, float]:
    load = float(factors["gpu_load"])  # type: ignore[arg-type]
    cpu = 40.0 * (1 + device)
    speedup = {"cpu": 1.0, "cpu-mt": 1.5, "gpu": 3.0 - 2.0 * load / 0.6}[str(factors["backend"])]
    return {"latency_median_ms": cpu / max(speedup, 0.3)}


def _squeezenet(factors: Mapping[str, object], device: int) -> dict[str, float]:
    g = int(factors["g"])  # type: ignore[call-overload]
    best = 2 if device == 0 else 4
    base = {"cpu": 3000.0, "cpu-mt": 1000.0, "gpu": 100.0}[str(factors["backend"])]
    base *= 0.5 if factors["precision"] == "fp16" else 1.0
    latency = base * (1 + 0.2 * abs(g - best))
    # odd layers like the phone's best g, even ones g 1
    layers = {
        f"layer_0{i}_fire{i}_ms": base / 4 * (1 + 0.3 * abs(g - (best if i % 2 else 1))) for i in range(4)
    }
    return {"latency_median_ms": latency, "energy_per_inference_mj": latency * 2.0, **layers}


def _training(factors: Mapping[str, object], device: int) -> dict[str, float]:
    if factors["backend"] == "cpu":
        return {"latency_median_ms": 10.0}
    moved = 0.91 if factors["buffers"] == "copy" else 0.4
    total = 20.0
    return {
        "latency_median_ms": total,
        "opencl_h2d_total_ms": total * moved / 2,
        "opencl_d2h_total_ms": total * moved / 2,
        "opencl_kernel_total_ms": total * (1 - moved),
        "data_movement_share": moved,
    }


def _gemm(factors: Mapping[str, object], device: int) -> dict[str, float]:
    flop = 2.0 * float(factors["m"]) * float(factors["n"]) * float(factors["k"])  # type: ignore[arg-type]
    gflops = 40.0 if factors["backend"] == "gpu" else 10.0
    return {"latency_median_ms": flop / (gflops * 1e6), "gflops": gflops}


STUDIES: dict[str, tuple[str, Metrics]] = {
    "mobirnn": (MOBIRNN, _mobirnn),
    "squeezenet": (SQUEEZENET, _squeezenet),
    "training": (TRAINING, _training),
    "gemm": (GEMM, _gemm),
}


def study_data(study: str, repetitions: int = 5, seed: int = 11) -> ReportData:
    text, metrics_of = STUDIES[study]
    spec = load_text(text, f"{study}.yaml")
    rng = np.random.default_rng(seed)
    runs = []
    for device_index, device in enumerate(PHONES):
        for cell in spec.cells():
            factors = cell.as_dict()
            for rep in range(repetitions):
                exact = metrics_of(factors, device_index)
                noisy = {k: v * (1 + 0.03 * rng.standard_normal()) for k, v in exact.items()}
                runs.append(
                    StoredResult(
                        run_id=f"r{len(runs):04d}",
                        cell_id=cell.cell_id,
                        factors=factors,
                        repetition=rep,
                        device_id=device,
                        state=RunState.DONE,
                        metrics=noisy,
                        units={k: "ms" if k.endswith("_ms") else "" for k in noisy},
                    )
                )
    return ReportData(
        experiment=spec.name,
        benchmark=spec.benchmark.program.value,
        spec=spec,
        factor_names=spec.factor_names,
        phones=tuple(PhoneInfo(device, f"VP{i}", virtual=True) for i, device in enumerate(PHONES)),
        runs=tuple(runs),
        figures=figure_specs(spec),
        tables=table_specs(spec),
    )
