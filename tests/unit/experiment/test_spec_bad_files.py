"""Every malformed experiment in bad/ fails with its first problem on the first line,
`FILE:LINE: key.path: what`, and any further one on a line of its own.

Each file's first line is `# expect: LINE: piece of the message`; the test checks the location
prefix exactly and that the piece is in the message.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from farm.errors import ConfigError
from farm.experiment import load

BAD_DIR = Path(__file__).parent / "bad"
BAD_FILES = sorted(BAD_DIR.glob("*.yaml"))
EXPECT = re.compile(r"^# expect: (\d+): (.+)$")


def _expectation(path: Path) -> tuple[int, str]:
    first_line = path.read_text(encoding="utf-8").splitlines()[0]
    match = EXPECT.match(first_line)
    assert match, f"{path.name}: first line must be '# expect: LINE: message piece'"
    return int(match.group(1)), match.group(2)


def test_there_are_enough_bad_files() -> None:
    assert len(BAD_FILES) >= 30


@pytest.mark.parametrize("path", BAD_FILES, ids=[p.stem for p in BAD_FILES])
def test_bad_file_names_line_and_key(path: Path) -> None:
    line, piece = _expectation(path)
    with pytest.raises(ConfigError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: "), message
    first, *more = message.splitlines()
    assert piece in first
    # further problems, one line each in the same form
    assert all(re.match(rf"{re.escape(str(path))}:\d+: ", line) for line in more), message
    assert caught.value.location == f"{path}:{line}"
    assert caught.value.exit_code == 2


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such experiment file"):
        load(tmp_path / "nope.yaml")


def test_several_problems_report_the_first_by_line_and_count_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(
        "name: x\nbenchmark: {program: lstm}\nmeasurement:\n  warmup: -1\n  iterations: 0\n  repetitions: 0\n"
    )
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value) == (
        f"{path}:4: measurement.warmup: must be at least 0, got -1 (and 2 more problems:)\n"
        f"{path}:5: measurement.iterations: must be at least 1, got 0\n"
        f"{path}:6: measurement.repetitions: must be at least 1, got 0"
    )


def test_many_problems_list_the_first_ten_and_say_how_to_see_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    typos = "".join(f"  hiden{i}: [1]\n" for i in range(12))
    path.write_text(f"name: x\nbenchmark: {{program: lstm}}\nsweep:\n  backend: [cpu]\n{typos}")
    with pytest.raises(ConfigError) as caught:
        load(path)
    lines = str(caught.value).splitlines()
    assert lines[0].startswith(f"{path}:5: ") and lines[0].endswith("(and 11 more problems:)")
    assert [line.split(":")[1] for line in lines[1:10]] == [str(n) for n in range(6, 15)]
    assert lines[10] == "... and 2 more: fix these and load the file again to see them"
