"""Hostile input files through the real `farm` command: one line on stderr, exit 2, no traceback.

The unit suites check the messages (tests/unit/experiment/test_spec_bad_files.py,
tests/unit/test_safe_yaml.py); this checks what a user sees: that no RecursionError, hang or
traceback gets past the CLI.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.farm_cli import REPO, farm_argv, farm_env

BAD_DIR = REPO / "tests" / "unit" / "experiment" / "bad"
HOSTILE_EXPERIMENTS = (
    "recursive_alias_sweep",
    "billion_laughs",
    "deep_nesting",
    "python_tag",
    "plan_too_large",
)
# Generous: each case is refused in about a second; a hang (billion laughs) used to spin for minutes.
CLI_TIMEOUT_S = 60
UNUSED_ADB_PORT = 1  # nothing here may reach an adb server


def _farm(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = farm_env(UNUSED_ADB_PORT, cwd / "results")
    env.pop("FARM_CONFIG", None)
    env["FARM_CONFIG_DIR"] = str(cwd / "config")  # no user farm.yaml leaks in
    return subprocess.run(
        farm_argv(*args), cwd=cwd, env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False
    )


def _assert_one_line(
    result: subprocess.CompletedProcess[str], starts: str, piece: str, *, command: str = "farm"
) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{command}: {starts}"), lines[0]
    assert piece in lines[0]


@pytest.mark.parametrize("name", HOSTILE_EXPERIMENTS)
def test_farm_run_of_a_hostile_experiment_is_one_line_exit_2(tmp_path: Path, name: str) -> None:
    path = BAD_DIR / f"{name}.yaml"
    line, piece = path.read_text().splitlines()[0].removeprefix("# expect: ").split(": ", 1)
    _assert_one_line(_farm(tmp_path, "run", str(path)), f"{path}:{line}: ", piece)


def test_farm_run_of_a_10_mb_sweep_is_refused_by_size(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    levels = ",".join(str(level) for level in range(1, 2_000_001))
    path.write_text(f"name: huge\nbenchmark: {{program: lstm}}\nsweep:\n  hidden: [{levels}]\n")
    _assert_one_line(_farm(tmp_path, "run", str(path)), f"{path}: ", "too large for an experiment file")


def test_farm_hosts_with_a_recursive_farm_yaml_is_one_line_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "farm.yaml"
    config.write_text("hosts: &h [*h]\n")
    _assert_one_line(_farm(tmp_path, "hosts"), f"{config}:1: ", "recursive alias *h")
    _assert_one_line(_farm(tmp_path, "schedule", "list"), f"{config}:1: ", "recursive alias *h")


def test_farm_virtual_up_with_a_hostile_profile_is_one_line_exit_2(tmp_path: Path) -> None:
    profile = tmp_path / "laughs.yaml"
    profile.write_text((BAD_DIR / "billion_laughs.yaml").read_text().replace("sweep:", "props:"))
    state = tmp_path / "virtual"
    try:
        result = _farm(tmp_path, "virtual", "up", "--profile", str(profile), "--state-dir", str(state))
        # the simulator's profile reader refuses the first anchor (a profile has no use for one)
        _assert_one_line(result, f"{profile}:7: ", "no anchors or aliases", command="farm virtual")
    finally:  # had the profile been accepted, phones would be running: stop them
        _farm(tmp_path, "virtual", "down", "--state-dir", str(state))


def test_farm_run_of_an_external_program_whose_binary_is_missing_is_one_line_exit_2(tmp_path: Path) -> None:
    path = BAD_DIR / "external_missing_binary.yaml"
    line, piece = path.read_text().splitlines()[0].removeprefix("# expect: ").split(": ", 1)
    _assert_one_line(_farm(tmp_path, "run", str(path)), f"{path}:{line}: ", piece)
