"""The experiments shipped in experiments/ load, with every variant, and have the intended size."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from farm.engine.planner import plan
from farm.experiment import load, load_text

EXPERIMENTS = sorted((Path(__file__).parents[3] / "experiments").glob("*.yaml"))
FOUR_PHONES = ["virtual-1", "virtual-2", "virtual-3", "virtual-4"]


def test_the_seed_studies_are_shipped() -> None:
    names = {path.stem for path in EXPERIMENTS}
    assert {"smoke", "lstm_gpu_load", "squeezenet_precision", "gpu_training", "gemm"} <= names


@pytest.mark.parametrize("path", EXPERIMENTS, ids=[p.stem for p in EXPERIMENTS])
def test_experiment_and_its_variants_load(path: Path) -> None:
    experiment = load(path)
    assert experiment.name == path.stem  # results are stored under the name: keep it the file's
    assert experiment.cells()
    for variant in experiment.variants:
        assert load(path, variant).qualified_name == f"{path.stem}.{variant}"


def test_lstm_gpu_load_is_the_mobirnn_matrix() -> None:
    experiment = load(EXPERIMENTS[0].parent / "lstm_gpu_load.yaml")
    sweep = experiment.sweep
    assert sweep["backend"] == ("cpu", "cpu-mt", "gpu")
    assert sweep["hidden"] == (32, 64, 128, 256)
    assert sweep["gpu_load"] == (0.0, 0.3, 0.5, 0.7, 0.9)
    assert len(experiment.cells()) == 3 * 4 * 2 * 5
    assert experiment.benchmark.params["seq_len"] == 128


@pytest.mark.parametrize("study", ["lstm_gpu_load", "squeezenet_precision", "gpu_training", "gemm"])
def test_quick_variants_are_blocked_by_phone_and_fit_the_demo_budget(study: str) -> None:
    quick = load(EXPERIMENTS[0].parent / f"{study}.yaml", "quick")
    assert quick.report.study is not None
    planned = plan(quick, FOUR_PHONES)
    # blocked by phone: every phone runs every cell, so a study's comparisons never cross phones
    cells = {run.cell.cell_id for run in planned.runs}
    for phone in FOUR_PHONES:
        assert {run.cell.cell_id for run in planned.runs if run.device == phone} == cells
    # the runs its claims need (4 repetitions where two backends are compared, 7 GEMM shapes), at
    # most 28 a phone: measured 2026-12-07 on 4 virtual phones, 2 loaded host cores: gemm 28 runs a
    # phone 65 s, training 24 in 75 s, squeezenet 16 in 103 s
    assert len(planned.runs) <= 4 * 28
    assert planned.estimated_s < 180  # planner's estimate; the 5-minute budget leaves room for PoCL


def test_smoke_is_seconds_per_phone() -> None:
    smoke = load(EXPERIMENTS[0].parent / "smoke.yaml")
    assert len(smoke.cells()) == 4
    assert plan(smoke, ["one"]).estimated_s < 60


def test_readme_key_block_is_valid_and_shows_the_real_defaults() -> None:
    readme = (EXPERIMENTS[0].parent / "README.md").read_text(encoding="utf-8")
    match = re.search(r"```yaml\n(.*?)```", readme, re.S)
    assert match, "experiments/README.md lost its ```yaml block"
    documented = load_text(match.group(1), "experiments/README.md")
    same_with_defaults = load_text(
        "name: my_study\nbenchmark: {program: lstm, params: {seq_len: 128}}\n"
        "sweep: {backend: [cpu, cpu-mt, gpu], gpu_load: [0, 0.5, 0.9], hidden: [32, 64]}\n"
    )
    assert documented == same_with_defaults


def test_the_readme_external_program_is_the_shipped_example() -> None:
    folder = EXPERIMENTS[0].parent
    readme = (folder / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "program: external" in b)
    documented = load_text(block, "experiments/README.md", source_dir=folder)
    shipped = load(folder / "external_example.yaml")
    assert documented.benchmark == shipped.benchmark and documented.sweep == shipped.sweep
    assert documented.measurement == shipped.measurement


def test_the_energy_variant_can_decide_motamedis_energy_claim() -> None:
    """The energy claim (below 0.6 J per image on the GPU, fp32, at the best g) has a verdict only
    with power measured and enough runs a cell for the exact sign test to get below alpha."""
    from farm.analysis.verdict import DEFAULT_ALPHA, sign_test_min_p
    from farm.experiment.sections import PowerSource

    energy = load(EXPERIMENTS[0].parent / "squeezenet_precision.yaml", "energy")
    assert energy.telemetry.power is PowerSource.BATTERY and energy.telemetry.disable_charging
    assert "input_size" not in energy.benchmark.params  # the paper's 227 px
    planned = plan(energy, FOUR_PHONES)
    for phone in FOUR_PHONES:
        runs = planned.queues[phone]
        per_g: dict[object, int] = {}
        for run in runs:
            assert run.cell.get("backend") == "gpu" and run.cell.get("precision") == "fp32"
            per_g[run.cell.get("g")] = per_g.get(run.cell.get("g"), 0) + 1
        assert set(per_g) == {1, 4} and sign_test_min_p(min(per_g.values())) < DEFAULT_ALPHA
