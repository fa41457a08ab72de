"""conditions.clocks and conditions.on_throttle: shorthands, levels, and one-line FILE:LINE errors."""

from __future__ import annotations

import pytest

from farm.errors import ConfigError
from farm.spec import load_text
from farm.spec.clocks import Affinity, ClockMode, LevelKind, OnThrottle

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
