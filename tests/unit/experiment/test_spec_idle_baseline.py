"""telemetry.idle_baseline_s: the idle power window before a phone's first run (0 disables it)."""

from __future__ import annotations

import pytest

from farm.errors import ConfigError
from farm.experiment import load_text
from farm.experiment.schema import json_schema

HEAD = "name: x\nbenchmark: {program: lstm}\n"


def test_default_and_explicit_values() -> None:
    assert load_text(HEAD).telemetry.idle_baseline_s == 5.0
    assert load_text(HEAD + "telemetry: {idle_baseline_s: 0}\n").telemetry.idle_baseline_s == 0.0
    assert load_text(HEAD + "telemetry:\n  idle_baseline_s: 30\n").telemetry.idle_baseline_s == 30.0


@pytest.mark.parametrize("value", ["-1", "601", '"5 s"'])
def test_bad_values_name_the_line_and_key(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_text(HEAD + f"telemetry:\n  idle_baseline_s: {value}\n", "x.yaml")
    assert str(caught.value).startswith("x.yaml:4: telemetry.idle_baseline_s: "), str(caught.value)


def test_the_schema_offers_it() -> None:
    schema = json_schema()
    telemetry = schema["$defs"]["Telemetry"]["properties"]
    assert telemetry["idle_baseline_s"]["minimum"] == 0
    assert telemetry["idle_baseline_s"]["default"] == 5.0
