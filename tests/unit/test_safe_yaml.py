"""Hostile YAML in each of farm's input files: one ConfigError line naming FILE:LINE, exit code 2.

The same cases go through every reader that uses farm.safe_yaml: experiment files, farm.yaml
(hosts and schedules); the simulator's profiles have their own reader and test
(vphone/tests/unit/test_profile_yaml.py). Each case would have crashed (RecursionError),
spun (billion laughs) or named `<unicode string>` before the bounds existed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from farm import safe_yaml
from farm.errors import ConfigError
from farm.experiment import load
from farm.experiment.loader import line_of
from farm.fleet.farm_yaml import load_config
from farm.schedule.config import load_schedules


@dataclass(frozen=True)
class Reader:
    """One kind of input file: text before the hostile key, the key, and how farm loads it."""

    prefix: str
    key: str
    load: Callable[[Path], object]


READERS = {
    "experiment": Reader("name: bad\nbenchmark:\n  program: lstm\n", "sweep", load),
    "farm.yaml hosts": Reader("", "hosts", lambda path: load_config(path)),
    "farm.yaml schedules": Reader("local: true\n", "schedules", lambda path: load_schedules(path)),
}


def _laughs(key: str) -> str:
    lines = [f"{key}:", "  a: &a [x, x, x, x, x, x, x, x, x]"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"  {name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return "\n".join(lines) + "\n"


# name -> (body for a top-level key, 1-based line of the body the error must name, message piece)
CASES: dict[str, tuple[Callable[[str], str], int, str]] = {
    "recursive list alias": (lambda key: f"{key}: &a [32, *a]\n", 1, "recursive alias *a"),
    "recursive mapping alias": (
        lambda key: f"{key}:\n  outer: &m\n    inner: *m\n",
        3,
        "recursive alias *m: it is inside the value &m names",
    ),
    "billion laughs": (_laughs, 7, "alias *e stands for 66,430 values and takes the file past 100,000"),
    "5,000 nested brackets": (lambda key: f"{key}: {'[' * 5000}\n", 1, "nested more than 64 levels deep"),
    "python tag": (
        lambda key: f"{key}:\n  - !!python/object/apply:os.system [echo hi]\n",
        2,
        "the tag !!python/object/apply:os.system is not allowed",
    ),
    "5,000-digit integer": (
        lambda key: f"{key}:\n  n: [1, {'9' * 5000}]\n",
        2,
        "an integer of 5,000 characters: farm reads at most 100",
    ),
    "too many values": (
        lambda key: f"{key}: [{'0,' * 150_000}0]\n",
        1,
        "more than 100,000 values in one file",
    ),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("reader", READERS)
def test_hostile_yaml_is_one_line_naming_file_and_line(tmp_path: Path, reader: str, case: str) -> None:
    spec, (body, body_line, piece) = READERS[reader], CASES[case]
    path = tmp_path / "farm.yaml"
    path.write_text(spec.prefix + body(spec.key))
    with pytest.raises(ConfigError) as caught:
        spec.load(path)
    line = spec.prefix.count("\n") + body_line
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: invalid YAML: "), message
    assert piece in message
    assert "\n" not in message and "<unicode string>" not in message
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("reader", READERS)
def test_a_file_past_the_size_bound_is_refused_before_it_is_parsed(tmp_path: Path, reader: str) -> None:
    spec = READERS[reader]
    path = tmp_path / "big.yaml"
    # about 9.7 MB: two million levels of a sweep
    path.write_text(spec.prefix + f"{spec.key}: [" + ",".join(["1234"] * 2_000_000) + "]\n")
    assert path.stat().st_size > 9_000_000
    with pytest.raises(ConfigError) as caught:
        spec.load(path)
    assert str(caught.value).startswith(f"{path}: 9.54 MiB is too large for a"), str(caught.value)
    assert "farm reads at most 1 MiB" in str(caught.value)


def test_text_past_the_size_bound_is_refused_by_compose_too() -> None:
    with pytest.raises(ConfigError, match=r"^x.yaml: more than 1 MiB of text"):
        safe_yaml.compose("a: 1\n" + "#" * safe_yaml.MAX_FILE_BYTES, "x.yaml")


def test_recursion_in_any_section_of_an_experiment_is_refused(tmp_path: Path) -> None:
    sections = ("description", "benchmark", "sweep", "zip", "exclude", "devices", "measurement")
    sections += ("gpu_load", "telemetry", "conditions", "timeouts", "retries", "report", "variants")
    for index, section in enumerate(sections):
        path = tmp_path / f"{section}.yaml"
        lines = ["name: bad", "benchmark: {program: lstm}", f"{section}: &s {{inner: [1, *s]}}"]
        if section == "benchmark":
            lines = ["name: bad", "benchmark: &s {program: lstm, params: {x: *s}}"]
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(ConfigError) as caught:
            load(path)
        assert str(caught.value).startswith(f"{path}:{len(lines)}: invalid YAML: recursive alias *s"), index


def test_aliases_and_merge_keys_still_work_and_errors_inside_them_keep_their_line(tmp_path: Path) -> None:
    path = tmp_path / "shared.yaml"
    path.write_text(
        "name: shared\n"
        "benchmark: {program: lstm}\n"
        "x-short: &short\n"
        "  repetitions: 1\n"
        "  warmup: 0\n"
        "sweep: {hidden: [32, 64]}\n"
        "variants:\n"
        "  quick:\n"
        "    measurement: {<<: *short, iterations: 2}\n"
    )
    with pytest.raises(ConfigError, match=r"x-short: unknown key"):
        load(path)  # an anchor needs a home that is a real key; the error names it, not a crash
    path.write_text(
        "name: shared\n"
        "benchmark: {program: lstm}\n"
        "measurement: &m\n"
        "  repetitions: 1\n"
        "  warmup: 0\n"
        "sweep: {hidden: [32, 64]}\n"
        "variants:\n"
        "  quick:\n"
        "    measurement: {<<: *m, iterations: 2}\n"
    )
    experiment = load(path, variant="quick")
    assert (experiment.measurement.repetitions, experiment.measurement.iterations) == (1, 2)
    path.write_text(path.read_text().replace("warmup: 0", "warmup: -1"))
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:5: measurement.warmup: must be at least 0"), str(
        caught.value
    )


def test_an_alias_used_many_times_within_the_bound_is_fine() -> None:
    text = "a: &a [1, 2, 3]\nb: [" + ", ".join(["*a"] * 1000) + "]\n"
    root = safe_yaml.compose(text, "x.yaml")
    assert root is not None
    value = safe_yaml.construct(root)
    assert len(value["b"]) == 1000 and value["b"][-1] == [1, 2, 3]
    assert line_of(root, ("b",)) == 2  # type: ignore[arg-type]


def test_plain_data_tags_are_allowed_and_others_refused_where_they_are_written() -> None:
    root = safe_yaml.compose("a: !!str 0123\nb: !!float 1\n", "x.yaml")
    assert root is not None and safe_yaml.construct(root) == {"a": "0123", "b": 1.0}
    with pytest.raises(ConfigError, match=r"^x.yaml:3: invalid YAML: the tag !custom is not allowed"):
        safe_yaml.compose("a: 1\nb:\n  - !custom {x: 1}\n", "x.yaml")


def test_missing_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope.yaml: no such profile"):
        safe_yaml.read_text(tmp_path / "nope.yaml", "profile")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(ConfigError, match=r"binary.yaml: not UTF-8 text \(byte 6\)"):
        safe_yaml.read_text(binary, "experiment file")
