"""The schedules: section of farm.yaml: values, defaults, and one FILE:LINE error per mistake."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from farm.errors import ConfigError
from farm.fleet.farm_yaml import parse_config
from farm.schedule.config import find_schedule, parse_schedules
from farm.schedule.model import CatchUp

GOOD = textwrap.dedent(
    """\
    hosts:
      - name: local
    schedules:
      - name: lstm-nightly
        experiment: experiments/lstm.yaml
        variant: quick
        cron: "0 2 * * *"
        timezone: Europe/Zurich
        devices: ["local/*", "lab1/A,lab1/B"]
        catch_up: run_once
        max_runtime_s: 7200
      - name: smoke
        experiment: /abs/smoke.yaml
        cron: "*/30 * * * *"
    """
)


def test_parses_values_and_defaults_relative_to_the_config_file() -> None:
    first, second = parse_schedules(GOOD, "/lab/farm.yaml")
    assert first.name == "lstm-nightly"
    assert first.experiment == Path("/lab/experiments/lstm.yaml")
    assert (first.variant, first.cron, first.timezone) == ("quick", "0 2 * * *", "Europe/Zurich")
    assert first.devices == ("local/*", "lab1/A", "lab1/B")
    assert first.catch_up is CatchUp.RUN_ONCE and first.max_runtime_s == 7200.0
    assert first.location == "/lab/farm.yaml:4"
    assert second.experiment == Path("/abs/smoke.yaml")
    assert (second.catch_up, second.max_runtime_s, second.devices, second.timezone) == (
        CatchUp.SKIP,
        None,
        (),
        "UTC",
    )
    assert find_schedule((first, second), "smoke") is second


def test_the_hosts_parser_accepts_a_config_with_schedules() -> None:
    assert [h.name for h in parse_config(GOOD, "farm.yaml").hosts] == ["local"]


def test_no_section_means_no_schedules() -> None:
    assert parse_schedules("hosts: []\n", "farm.yaml") == ()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ('cron: "0 2 * * *"', "farm.yaml:4: schedules.n.cron: '0 2 * *' is not a cron expression"),
        ("catch_up: skip", "farm.yaml:4: schedules.n.catch_up: expected skip or run_once, got 'sometimes'"),
        ("max_runtime_s: 60", "farm.yaml:4: schedules.n.max_runtime_s: expected a positive number"),
        ("timezone: UTC", "farm.yaml:4: schedules.n.timezone: unknown time zone 'Mars/Base'"),
        ("colour: red", "farm.yaml:4: schedules[0].colour: unknown key"),
    ],
)
def test_each_mistake_names_its_line(change: str, expected: str) -> None:
    bad = {
        'cron: "0 2 * * *"': 'cron: "0 2 * *"',
        "catch_up: skip": "catch_up: sometimes",
        "max_runtime_s: 60": "max_runtime_s: -5",
        "timezone: UTC": "timezone: Mars/Base",
        "colour: red": "colour: red",
    }[change]
    text = "schedules:\n  - name: n\n    experiment: e.yaml\n" + ("    " + bad + "\n")
    if "cron" not in bad:
        text += '    cron: "0 2 * * *"\n'
    with pytest.raises(ConfigError) as caught:
        parse_schedules(text, "farm.yaml")
    assert str(caught.value).startswith(expected)


def test_missing_required_key_duplicate_name_and_wrong_shape() -> None:
    with pytest.raises(ConfigError, match=r"farm.yaml:2: schedules\[0\]: cron is missing"):
        parse_schedules("schedules:\n  - name: n\n    experiment: e.yaml\n", "farm.yaml")
    twice = "schedules:\n" + "  - {name: n, experiment: e.yaml, cron: '0 2 * * *'}\n" * 2
    with pytest.raises(ConfigError, match=r"farm.yaml:3: .*'n' used twice \(first at farm.yaml:2\)"):
        parse_schedules(twice, "farm.yaml")
    with pytest.raises(ConfigError, match=r"farm\.yaml:1: schedules: expected a list"):
        parse_schedules("schedules: {name: n}\n", "farm.yaml")
    with pytest.raises(ConfigError, match="no schedule named 'x'"):
        find_schedule(parse_schedules(twice.replace("n,", "m,", 1), "farm.yaml"), "x")
