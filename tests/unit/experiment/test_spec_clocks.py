"""conditions.clocks and conditions.on_throttle: shorthands, levels, and one-line FILE:LINE errors."""

from __future__ import annotations

import pytest

from farm.errors import ConfigError
from farm.experiment import load_text
from farm.experiment.clocks import Affinity, ClockMode, LevelKind, OnThrottle

HEAD = "name: x\nbenchmark: {program: lstm}\n"


def test_defaults_record_only_and_keep_old_digests() -> None:
    experiment = load_text(HEAD)
    assert experiment.conditions.clocks.mode is ClockMode.NONE
    assert experiment.conditions.on_throttle is OnThrottle.FLAG
    # Setting the defaults explicitly measures the same thing: same digest as leaving them out.
    explicit = load_text(HEAD + "conditions:\n  clocks: none\n  on_throttle: flag\n")
    assert explicit.settings_digest == experiment.settings_digest
    assert load_text(HEAD + "conditions: {clocks: pin}\n").settings_digest != experiment.settings_digest


def test_mode_shorthand_and_full_mapping() -> None:
    assert load_text(HEAD + "conditions: {clocks: auto}\n").conditions.clocks.mode is ClockMode.AUTO
    clocks = load_text(
        HEAD + "conditions:\n  clocks: {mode: pin, cpu: 1.8GHz, gpu: 0.5, required: true, affinity: big}\n"
    ).conditions.clocks
    assert clocks.cpu.kind is LevelKind.FREQUENCY and clocks.cpu.khz == 1_800_000
    assert clocks.gpu.kind is LevelKind.FRACTION and clocks.gpu.fraction == 0.5
    assert clocks.required and clocks.affinity is Affinity.BIG


@pytest.mark.parametrize(
    ("text", "line", "piece"),
    [
        ("  clocks: {mode: pin, cpu: fast}\n", 4, "conditions.clocks.cpu: expected max, nominal, min"),
        ("  clocks:\n    mode: pinned\n", 5, "did you mean pin?"),
        ("  clocks: {mode: auto, required: true}\n", 4, "required: true needs a mode a phone can lack"),
        ("  clocks: 3\n", 4, "expected a mode (none, fixed_performance, pin, auto) or a mapping"),
        ("  clocks: {cpu: 20GHz}\n", 4, "outside 1 kHz .. 10 GHz"),
        ("  clocks: {gpu: 1.5}\n", 4, "must be in (0, 1]"),
        ("  clocks: {affinity: middle}\n", 4, "conditions.clocks.affinity"),
        ("  on_throttle: ignore\n", 4, "conditions.on_throttle"),
    ],
)
def test_bad_clocks_name_the_line_and_key(text: str, line: int, piece: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_text(HEAD + "conditions:\n" + text, "x.yaml")
    message = str(caught.value)
    assert message.startswith(f"x.yaml:{line}: "), message
    assert piece in message and "\n" not in message


def test_relative_cooldown_gate() -> None:
    from farm.engine.conditions import cooldown_limit_c
    from farm.engine.scheduler import gates_of

    relative = load_text(HEAD + "conditions:\n  cooldown: {max_temp_c: 45, within_c_of_idle: 2}\n")
    assert relative.conditions.cooldown.within_c_of_idle == 2.0
    assert (
        relative.settings_digest
        != load_text(HEAD + "conditions: {cooldown: {max_temp_c: 45}}\n").settings_digest
    )
    gates = gates_of(relative)
    assert cooldown_limit_c(gates, 31.5) == 33.5  # idle + 2
    assert cooldown_limit_c(gates, 44.0) == 45.0  # never above max_temp_c
    assert cooldown_limit_c(gates, None) == 45.0  # no idle reading: the absolute gate
    assert cooldown_limit_c(gates_of(load_text(HEAD)), 20.0) == 40.0  # not set: absolute only
    with pytest.raises(ConfigError) as caught:
        load_text(HEAD + "conditions:\n  cooldown:\n    within_c_of_idle: 0\n", "x.yaml")
    assert str(caught.value).startswith("x.yaml:5: conditions.cooldown.within_c_of_idle: ")
