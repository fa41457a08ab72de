"""A bug in farm is one line on stderr naming the log that holds its stack; `--debug` prints it too."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from farm import crashlog
from farm.cli import main as cli_main


@click.command()
def boom() -> None:
    """A command with a bug in it."""
    raise KeyError("x")


@pytest.fixture
def buggy_farm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setitem(cli_main.COMMANDS, "boom", cli_main.Entry(__name__, "boom", "Fail."))
    log = tmp_path / "logs" / "farm.log"
    monkeypatch.setenv(crashlog.LOG_ENV, str(log))
    monkeypatch.setattr(crashlog, "_chosen", None)  # a results folder another in-process test chose
    monkeypatch.setattr(crashlog, "_echo", type(crashlog._echo)())  # --debug of another test unset
    return log


def test_a_bug_is_one_line_and_its_stack_goes_to_the_log(
    buggy_farm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli_main.main(["boom"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"farm: internal error: KeyError: 'x' (stack in {buggy_farm}; --debug prints it)"
    ]
    logged = buggy_farm.read_text()
    assert "farm boom" in logged and "Traceback (most recent call last)" in logged
    assert 'raise KeyError("x")' in logged


def test_debug_prints_the_stack_as_well(buggy_farm: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli_main.main(["--debug", "boom"])
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and 'raise KeyError("x")' in err
    assert err.rstrip().splitlines()[-1].startswith("farm: internal error: KeyError: 'x'")


def test_an_unwritable_log_falls_back_to_the_temporary_folder(
    buggy_farm: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(crashlog.LOG_ENV, str(blocker / "farm.log"))  # a file is no folder
    path = crashlog.record(ValueError("y"), "context")
    assert path != blocker / "farm.log" and "ValueError: y" in path.read_text()


def test_a_full_disk_is_no_second_error_on_the_screen(
    buggy_farm: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(crashlog.LOG_ENV, "/dev/full")  # every write fails with ENOSPC
    path = crashlog.record(ValueError("z"), "context")
    assert path != Path("/dev/full") and "ValueError: z" in path.read_text()
    assert "Logging error" not in capsys.readouterr().err
