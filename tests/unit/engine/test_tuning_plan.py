"""benchmark.tune: which workloads farm tunes once per phone, and what it keeps of a tuning run's
output (farm.engine.tuning, pure parts)."""

from __future__ import annotations

import json

from farm.engine.tuning import chosen_fields, workloads
from farm.experiment import load_text

GEMM = """\
name: t
benchmark: {program: gemm, params: {k: 64}, tune: true, tune_budget_s: 2}
sweep: {m: [64, 128], backend: [cpu, gpu], gpu_load: [0, 0.5]}
"""


def test_each_distinct_gpu_workload_is_tuned_once_without_measurement_arguments() -> None:
    experiment = load_text(GEMM)
    assert workloads(experiment) == (
        ("--backend=gpu", "--k=64", "--m=64"),
        ("--backend=gpu", "--k=64", "--m=128"),
    )  # cpu cells and the load level do not make workloads; --iters and --seed are not in them
    assert workloads(load_text(GEMM.replace("tune: true, tune_budget_s: 2", "tune: false"))) == ()


def test_a_program_without_a_backend_factor_is_tuned_on_its_default_gpu_backend() -> None:
    experiment = load_text("name: t\nbenchmark: {program: lstm, params: {hidden: 32}, tune: true}\n")
    assert workloads(experiment) == (("--hidden=32",),)


def test_the_tune_fields_of_the_last_info_event_are_kept() -> None:
    lines = [
        {"event": "tune", "candidate": 0, "params": "tile_m=4"},
        {"event": "info", "program": "gemm", "tune_source": "tuned", "tune_params": "tile_m=14", "m": 64},
        {"event": "result", "iterations": 1},
    ]
    stdout = "\n".join(json.dumps(line) for line in lines) + "\nnot json\n"
    assert chosen_fields(stdout) == {"tune_source": "tuned", "tune_params": "tile_m=14"}
    assert chosen_fields("") == {}
