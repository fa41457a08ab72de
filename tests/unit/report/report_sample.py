"""A ReportData for an LSTM-under-GPU-load study, built by hand (no database)."""

from __future__ import annotations

import numpy as np

from farm.experiment import load_text
from farm.report.model import FigureSpec, PhoneInfo, ReportData
from farm.report.notes import NoteKind, QualityNote
from farm.store.results import StoredResult
from farm.store.runs import RunState

EVIL = "<script>alert(1)</script>"
UNITS = {
    "latency_median_ms": "ms",
    "latency_median_ci_low_ms": "ms",
    "latency_median_ci_high_ms": "ms",
    "latency_p90_ms": "ms",
    "energy_per_inference_mj": "mJ",
    "power_mean_mw": "mW",
    "gpu_load_mean": "fraction",
    "gpu_load_reached": "bool",
    "throttled": "bool",
}


DECLARED = (FigureSpec(x="hidden", y="latency_ms", color="backend", facet="gpu_load", title="declared"),)


def build_report_data(*, declared: tuple[FigureSpec, ...] = ()) -> ReportData:
    rng = np.random.default_rng(5)
    runs = []
    phones = ("lab1/nexus6p-01", EVIL)
    for device in phones:
        for backend in ("cpu", "gpu"):
            for hidden in (32, 128):
                for load in (0.0, 0.5, 0.9):
                    for rep in range(3):
                        base = (
                            (4.0 if backend == "gpu" else 12.0)
                            * hidden
                            / 32
                            * (1 + 2 * load * (backend == "gpu"))
                        )
                        latency = base * (1 + 0.05 * rng.standard_normal())
                        metrics = {
                            "latency_median_ms": latency,
                            "latency_median_ci_low_ms": latency * 0.97,
                            "latency_median_ci_high_ms": latency * 1.03,
                            "latency_p90_ms": latency * 1.2,
                            "energy_per_inference_mj": latency * 1.5,
                            "power_mean_mw": 1500.0 + 1000 * load,
                            "gpu_load_mean": load,
                            "gpu_load_reached": 0.0 if (load == 0.9 and rep == 0) else 1.0,
                            "throttled": 1.0 if (device == EVIL and load == 0.9 and rep == 2) else 0.0,
                        }
                        cell = f"backend={backend},hidden={hidden},gpu_load={load}"
                        runs.append(
                            StoredResult(
                                run_id=f"r{len(runs):03d}",
                                cell_id=cell,
                                factors={"backend": backend, "hidden": hidden, "gpu_load": load},
                                repetition=rep,
                                device_id=device,
                                state=RunState.DONE,
                                metrics=metrics,
                                units=UNITS,
                            )
                        )
    runs.append(
        StoredResult(
            "r999",
            "backend=gpu,hidden=32,gpu_load=0.0",
            {"backend": "gpu", "hidden": 32, "gpu_load": 0.0},
            3,
            EVIL,
            RunState.FAILED,
            reason=f"benchmark exited 3: no OpenCL on {EVIL}",
        )
    )
    return ReportData(
        experiment="lstm_gpu_load",
        benchmark="lstm",
        spec=load_text(
            "name: lstm_gpu_load\nbenchmark: {program: lstm}\n"
            "sweep: {backend: [cpu, gpu], hidden: [32, 128]}\n"
        ),
        factor_names=("backend", "hidden", "gpu_load"),
        phones=(
            PhoneInfo(
                "lab1/nexus6p-01", "Nexus 6P", virtual=True, abi="x86_64", properties=(("soc", "msm8994"),)
            ),
            PhoneInfo(EVIL, EVIL, virtual=False, abi="arm64-v8a"),
        ),
        runs=tuple(runs),
        figures=declared,
        notes=(QualityNote(NoteKind.REPORT, f"Charging could not be disabled on {EVIL}."),),
        generated_at="2026-11-29 19:00 UTC",
    )
