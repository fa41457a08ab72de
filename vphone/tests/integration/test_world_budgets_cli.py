"""`farm virtual up` says, in one line, when the phones' CPU budgets do not fit the host; a
profile file with an unknown Android release is one line naming file:line."""

from __future__ import annotations

from pathlib import Path

import pytest
from vphone.cgroup import host_cores
from vphone.profiles import PROFILES_DIR
from vphone.socspeed import SOC_SPEEDS_ENV
from vphone.testing.cli import vphone_cli as farm  # `farm virtual ...` as a user runs it
from vphone.testing.phones import AdbServer

pytestmark = pytest.mark.integration


def _profile(tmp_path: Path, name: str, budget: str) -> Path:
    text = (PROFILES_DIR / "adreno-sd8gen2.yaml").read_text()
    assert "  budget_cores: 2.0\n" in text
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace("  budget_cores: 2.0\n", f"  budget_cores: {budget}\n"))
    return path


def test_up_says_when_budgets_do_not_fit(adb_server: AdbServer, tmp_path: Path) -> None:
    port = str(adb_server.port)
    big = _profile(tmp_path, "big", str(host_cores()))  # two of them: more than the host
    state_dir = tmp_path / "state"
    up = farm("up", "--count", "2", "--profile", str(big), "--adb-port", port, state_dir=state_dir)
    try:
        assert up.returncode == 0, up.stderr  # a warning, not an error: the phone still works
        lines = [ln for ln in up.stderr.splitlines() if "CPU budgets do not fit" in ln]
        assert len(lines) == 1, up.stderr
        assert lines[0].startswith("farm virtual up: ") and f"> {host_cores()} host cores" in lines[0]
    finally:
        farm("down", "--adb-port", port, state_dir=state_dir)


def test_up_names_the_profile_line_of_an_unknown_release(tmp_path: Path) -> None:
    text = (PROFILES_DIR / "adreno-sd8gen2.yaml").read_text().replace('release: "14"', 'release: "17"')
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if 'release: "17"' in ln)
    up = farm("up", "--profile", str(bad), state_dir=tmp_path / "s")
    assert up.returncode == 2 and up.stderr.count("\n") == 1, up.stderr
    assert f"{bad}:{line}: props.ro.build.version.release: unknown Android release '17'" in up.stderr


def test_up_and_the_daemon_log_name_a_ratio_this_host_cannot_hold(
    adb_server: AdbServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SOC_SPEEDS_ENV, "1")  # the SoC's proportions are opt-in (vphone.socspeed)
    # A GPU a million times faster than the prime core: no host holds that at a 1/20 core.
    text = (PROFILES_DIR / "adreno-sd8gen2.yaml").read_text()
    assert "      value: 3700.0\n" in text
    huge = tmp_path / "huge-gpu.yaml"
    huge.write_text(text.replace("      value: 3700.0\n", "      value: 100000000.0\n"))
    port = str(adb_server.port)
    state_dir = tmp_path / "state"
    up = farm("up", "--profile", str(huge), "--adb-port", port, state_dir=state_dir)
    try:
        assert up.returncode == 0, up.stderr
        said = [ln for ln in up.stderr.splitlines() if "this host cannot hold GPU / 1 big core" in ln]
        assert len(said) == 1 and said[0].startswith("farm virtual up: adreno-sd8gen2: "), up.stderr
        assert f"this host has {host_cores()}" in said[0]
        log = (state_dir / "daemon.log").read_text()
        assert "this host cannot hold GPU / 1 big core" in log and "slower than the real SoC" in log
    finally:
        farm("down", "--adb-port", port, state_dir=state_dir)
