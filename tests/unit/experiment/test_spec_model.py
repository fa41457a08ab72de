"""Experiment model: defaults, shorthands, program arguments, variants, digests."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from farm.errors import ConfigError
from farm.experiment import Experiment, SpecProblem, load_text
from farm.experiment.sections import Order, RetryOn

MINIMAL = "name: tiny\nbenchmark: {program: lstm}\n"

STUDY = """\
name: study
benchmark:
  program: lstm
  params: {seq_len: 16, input_dim: 9}
sweep:
  backend: [cpu, gpu]
  hidden: [32, 64]
  gpu_load: [0, 0.5]
measurement: {warmup: 2, iterations: 7, min_seconds: 0.5, repetitions: 2}
retries:
  on: [timeout, error]
variants:
  quick:
    sweep: {hidden: [32]}
    measurement: {repetitions: 1}
"""

# The same experiment written in another order (keys, sections, flow vs block style).
STUDY_REORDERED = """\
retries: {on: [timeout, error]}
measurement:
  repetitions: 2
  min_seconds: 0.5
  iterations: 7
  warmup: 2
sweep:
  gpu_load: [0.0, 0.5]
  hidden: [32, 64]
  backend: [cpu, gpu]
benchmark:
  params: {input_dim: 9, seq_len: 16}
  program: lstm
name: study
"""


def test_everything_but_name_and_benchmark_has_a_default() -> None:
    experiment = load_text(MINIMAL)
    assert experiment.measurement.order is Order.INTERLEAVED
    assert experiment.measurement.repetitions >= 1
    assert experiment.devices.spread is False and experiment.devices.serials == ()
    assert experiment.telemetry.restore == "always"
    assert [cell.factors for cell in experiment.cells()] == [()]


def test_models_are_frozen() -> None:
    experiment = load_text(MINIMAL)
    with pytest.raises(ValidationError):
        experiment.measurement.iterations = 3  # type: ignore[misc]


def test_retries_on_key_is_not_a_yaml_boolean() -> None:
    assert load_text(STUDY).retries.on == (RetryOn.TIMEOUT, RetryOn.ERROR)


@pytest.mark.parametrize(
    ("devices", "serials", "spread"),
    [("all", (), False), ("[a, lab1/b]", ("a", "lab1/b"), False), ("{spread: true}", (), True)],
)
def test_devices_shorthands(devices: str, serials: tuple[str, ...], spread: bool) -> None:
    experiment = load_text(MINIMAL + f"devices: {devices}\n")
    assert experiment.devices.serials == serials
    assert experiment.devices.spread is spread


def test_device_selector_matches_every_given_criterion() -> None:
    devices = load_text(MINIMAL + "devices: {serials: [ZY22], gpu_family: adreno, tags: [lab]}\n").devices
    assert devices.matches("host1/ZY22", "Pixel 4", "adreno", frozenset({"lab", "x"}))
    assert not devices.matches("host1/ZY23", "Pixel 4", "adreno", frozenset({"lab"}))
    assert not devices.matches("ZY22", "Pixel 4", "mali", frozenset({"lab"}))
    assert not devices.matches("ZY22", "Pixel 4", "adreno", frozenset())


def test_program_args_combine_params_factors_and_measurement() -> None:
    experiment = load_text(STUDY)
    cell = next(
        c for c in experiment.cells() if c.as_dict() == {"backend": "gpu", "hidden": 64, "gpu_load": 0.5}
    )
    args = experiment.program_args(cell)
    assert args == (
        "--backend=gpu",
        "--hidden=64",
        "--input-dim=9",
        "--seq-len=16",
        "--warmup=2",
        "--iters=7",
        "--min-seconds=0.5",
        "--max-seconds=60",
        "--seed=0",
    )
    assert experiment.gpu_load_of(cell) == 0.5
    assert not any(arg.startswith("--gpu-load") for arg in args)


def test_gpu_load_levels_are_floats_so_0_and_0_0_are_one_cell() -> None:
    ids = {c.cell_id for c in load_text(STUDY).cells()}
    assert ids == {c.cell_id for c in load_text(STUDY_REORDERED).cells()}
    assert all(isinstance(c.get("gpu_load"), float) for c in load_text(STUDY).cells())


def test_settings_digest_ignores_layout_but_not_settings() -> None:
    base = load_text(STUDY)
    assert base.settings_digest == load_text(STUDY_REORDERED).settings_digest
    assert base.settings_digest == load_text(STUDY.replace("study", "renamed")).settings_digest
    assert base.settings_digest != load_text(STUDY.replace("iterations: 7", "iterations: 8")).settings_digest
    # How a lost phone is recovered measures nothing: nights stored before these keys still compare.
    recovery = STUDY.replace("retries:\n", "timeouts: {lost_phone_wait_s: 9}\nretries:\n  reboot: true\n")
    assert load_text(recovery).retries.reboot and base.settings_digest == load_text(recovery).settings_digest


def test_variant_overrides_merge_over_the_base() -> None:
    quick = load_text(STUDY, variant="quick")
    assert quick.qualified_name == "study.quick"
    assert quick.measurement.repetitions == 1
    assert quick.measurement.iterations == 7  # not overridden: kept from the base
    assert {c.get("hidden") for c in quick.cells()} == {32}
    assert load_text(STUDY).qualified_name == "study"


def test_unknown_variant_lists_the_defined_ones() -> None:
    with pytest.raises(ConfigError, match=r"<experiment>:\d+: variant 'slow' is not defined.*defined: quick"):
        load_text(STUDY, variant="slow")


def test_a_broken_variant_fails_even_when_not_selected() -> None:
    text = STUDY + "  broken:\n    measurement: {iterations: 0}\n"
    with pytest.raises(
        ConfigError, match=r":17: measurement.iterations: must be at least 1.*\[in variant broken\]"
    ):
        load_text(text)


def test_python_construction_runs_the_same_cross_checks() -> None:
    with pytest.raises(
        SpecProblem, match=r"sweep.hiden: program lstm has no argument hiden; did you mean hidden"
    ):
        Experiment.model_validate({"name": "x", "benchmark": {"program": "lstm"}, "sweep": {"hiden": [1]}})
