"""A phone that does not trust this adb server's key (ro.adb.secure=1, the prompt never allowed):
`farm devices` lists it `unauthorized` and `farm doctor` fails, each with one line that says what
to do, where before doctor skipped it in silence ("no online phone matches").

The independent truth: Debian's adb server, whose own `adb devices` says `unauthorized`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from vphone.testing.phones import AdbServer, PhoneFactory, kill_adb_server, start_adb_server

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]
SETTLE_TIMEOUT_S = 30.0


@pytest.fixture
def stranger(tmp_path: Path) -> Iterator[AdbServer]:
    """An adb server with a key of its own (a fresh HOME): the phones were not told to trust it."""
    server = start_adb_server(home=tmp_path / "home")
    try:
        yield server
    finally:
        kill_adb_server(server)


def _farm(adb_port: int, *args: str, results: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "farm", *args, "--adb-port", str(adb_port), "--results", str(results)],
        env=dict(os.environ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _wait_unauthorized(server: AdbServer, adb_serial: str) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    state = "absent"
    while time.monotonic() < deadline:
        rows = [line.split("\t") for line in server.adb("devices").stdout.splitlines()[1:]]
        state = next((row[1] for row in rows if row[0] == adb_serial and len(row) > 1), "absent")
        if state not in ("connecting", "authorizing", "offline", "absent"):
            break
        time.sleep(0.1)
    assert state == "unauthorized"


def test_devices_and_doctor_say_unauthorized_and_what_to_do(
    virtual_phones: PhoneFactory, stranger: AdbServer, tmp_path: Path
) -> None:
    phone = virtual_phones(count=1, profiles=["adreno-sd8gen2"])[0]  # a user build
    stranger.adb("connect", phone.adb_serial)
    _wait_unauthorized(stranger, phone.adb_serial)

    listed = _farm(stranger.port, "devices", "--json", "--no-probe", results=tmp_path / "r")
    assert listed.returncode == 0, listed.stderr
    (row,) = [r for r in json.loads(listed.stdout) if r["id"].endswith(phone.adb_serial)]
    assert row["state"] == "unauthorized"
    assert "allow USB debugging" in row["error"] and "adbkey" in row["error"]

    doctor = _farm(stranger.port, "doctor", "--no-discharge", results=tmp_path / "r")
    assert doctor.returncode == 1
    line = next(x for x in doctor.stderr.splitlines() if phone.adb_serial in x)
    assert "unauthorized" in line and "allow USB debugging" in line
    assert "Traceback" not in doctor.stderr
