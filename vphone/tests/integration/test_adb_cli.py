"""`vphone up/list/fault/down` (`farm virtual ...`) as a user runs them, including the bad-input paths."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from vphone.testing.cli import vphone_cli as farm  # named as a farm user types it
from vphone.testing.phones import AdbServer, free_tcp_port

from vphone import control

pytestmark = pytest.mark.integration


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes
    return "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]


def test_up_list_fault_down(adb_server: AdbServer, tmp_path: Path) -> None:
    state_dir = tmp_path / "vstate"
    port = str(adb_server.port)
    try:
        up = farm("up", "--count", "2", "--adb-port", port, state_dir=state_dir)
        assert up.returncode == 0, up.stderr
        listed = json.loads(farm("list", "--json", state_dir=state_dir).stdout)
        assert [p["state"] for p in listed] == ["online", "online"]
        devices = adb_server.adb("devices").stdout
        assert all(f"{p['adb_serial']}\tdevice" in devices for p in listed)

        again = farm("up", "--adb-port", port, state_dir=state_dir)
        assert again.returncode == 2
        assert again.stderr.count("\n") == 1 and "already running" in again.stderr

        taken = farm("up", "--port", str(listed[0]["port"]), "--adb-port", port, state_dir=tmp_path / "other")
        assert taken.returncode == 2 and "already in use" in taken.stderr and "Traceback" not in taken.stderr
        assert control.read_state(tmp_path / "other") is None

        unknown = farm("up", "--profile", "no-such-phone", "--adb-port", port, state_dir=tmp_path / "other")
        assert unknown.returncode == 2 and "no-such-phone" in unknown.stderr

        fault = farm("fault", listed[1]["serial"], "hang", state_dir=state_dir)
        assert fault.returncode == 0, fault.stderr
        # the line says the phone's state before and after, as `list` shows them
        assert fault.stdout.strip() == f"{listed[1]['serial']}: hang: {listed[1]['state']} -> hung"
        assert json.loads(farm("list", "--json", state_dir=state_dir).stdout)[1]["state"] == "hung"
        bad = farm("fault", "VP1", "reboot", state_dir=state_dir)
        assert bad.returncode == 2 and "no virtual phone 'VP1'" in bad.stderr

        state = control.read_state(state_dir)
        assert state is not None
    finally:
        down = farm("down", "--adb-port", port, state_dir=state_dir)
    assert down.returncode == 0, down.stderr
    assert not alive(state.pid)
    assert listed[0]["adb_serial"] not in adb_server.adb("devices").stdout
    assert farm("list", state_dir=state_dir).stdout.startswith("no virtual phones")


def test_missing_adb_is_one_clear_line(tmp_path: Path) -> None:
    env_path = os.environ["PATH"]
    try:
        os.environ["PATH"] = str(tmp_path)  # no adb here
        result = farm("up", "--count", "1", state_dir=tmp_path / "s")
    finally:
        os.environ["PATH"] = env_path
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "farm virtual: adb not found on PATH (install it: apt-get install adb)"
    ]
    assert control.read_state(tmp_path / "s") is None


def test_data_is_kept_for_the_same_phone_only_unless_keep_data(adb_server: AdbServer, tmp_path: Path) -> None:
    """A phone is its serial (port) and profile: `up` again keeps its /data and /sdcard; another
    profile on that serial starts clean; --keep-data keeps them anyway, usable by shell."""
    state_dir = tmp_path / "vstate"
    port = str(free_tcp_port())
    adb = ["--adb-port", str(adb_server.port)]

    def up_then(profile: str, script: str, *, keep_data_cli: bool = False) -> str:
        if keep_data_cli:  # the option as a user gives it
            up = farm("up", "--port", port, "--profile", profile, *adb, "--keep-data", state_dir=state_dir)
            assert up.returncode == 0, up.stderr
        else:  # in-process: faster, the same control.up
            control.up(state_dir, 1, [profile], adb_port=adb_server.port, first_port=int(port))
        try:
            return adb_server.adb("-s", f"127.0.0.1:{port}", "shell", script).stdout
        finally:
            assert control.down(state_dir) is not None

    mark = "echo kept > /data/local/tmp/mark; echo kept > /sdcard/mark"
    look = "cat /data/local/tmp/mark /sdcard/mark 2>/dev/null; echo end"
    assert (
        up_then("adreno-sd865", f"{mark}; su -c 'touch /data/local/tmp/rootfile'; {look}")
        == "kept\nkept\nend\n"
    )
    assert up_then("adreno-sd865", look) == "kept\nkept\nend\n"  # same serial and profile
    assert up_then("adreno-sd8gen2", look) == "end\n"  # another profile: a new phone
    up_then("adreno-sd865", f"{mark}; su -c 'touch /data/local/tmp/rootfile'")
    owned = "chmod 600 /data/local/tmp/rootfile && stat -c %U /data/local/tmp/rootfile"
    kept = up_then("adreno-sd8gen2", f"{look}; {owned}", keep_data_cli=True)
    assert kept == "kept\nkept\nend\nshell\n"  # root's leftovers in shell's places go to shell


def test_up_help_teaches_keep_data(tmp_path: Path) -> None:
    result = farm("up", "--help", state_dir=tmp_path)
    assert result.returncode == 0
    assert "--keep-data" in result.stdout and "another profile" in result.stdout
