"""`farm virtual ...` runs the simulator's own CLI (the vphone distribution) as a program."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from farm.cli.virtual import virtual
from farm.errors import EnvironmentProblem


def _farm(*args: str, state_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FARM_VIRTUAL_DIR": str(state_dir)}
    return subprocess.run(
        [sys.executable, "-m", "farm", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_every_argument_and_help_reach_the_simulator(tmp_path: Path) -> None:
    listed = _farm("virtual", "list", "--json", state_dir=tmp_path)
    assert (listed.returncode, listed.stdout.strip()) == (0, "[]")
    helped = _farm("virtual", "up", "--help", state_dir=tmp_path)
    assert helped.returncode == 0 and helped.stdout.startswith("Usage: farm virtual up ")


def test_the_simulators_exit_code_and_line_come_through(tmp_path: Path) -> None:
    bad = _farm("virtual", "fault", "VP1", "reboot", state_dir=tmp_path)
    assert bad.returncode != 0
    assert bad.stderr.startswith("farm virtual: ") and "Traceback" not in bad.stderr


def test_without_the_simulator_one_line_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vphone", None)  # find_spec then finds nothing
    result = CliRunner().invoke(virtual, ["list"])
    assert isinstance(result.exception, EnvironmentProblem) and result.exception.exit_code == 2
    assert "pip install ./vphone" in str(result.exception)
