"""`farm virtual fault SERIAL disconnect|offline N|reboot` through the real command, each checked
by what adb itself sees of the phone afterwards (a stream cut, a state, a process gone)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import adbutils
import pytest
from vphone.testing.phones import PhoneSet, VirtualPhone

from tests.e2e.farm_cli import REPO, farm_argv

pytestmark = pytest.mark.integration


def _fault(phones: PhoneSet, phone: VirtualPhone, *args: str) -> str:
    done = subprocess.run(
        farm_argv("virtual", "fault", phone.serial, *args, "--state-dir", str(phones.state_dir)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _adb_state(phones: PhoneSet, phone: VirtualPhone) -> str:
    listed = subprocess.run(
        ["adb", "-P", str(phones.adb_port), "devices"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout
    for line in listed.splitlines()[1:]:
        serial, _, state = line.partition("\t")
        if serial == phone.adb_serial:
            return state.strip()
    return "missing"


def _until(check: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _shell(phones: PhoneSet, phone: VirtualPhone, command: str) -> str:
    return phone.device(phones.client()).shell(["sh", "-c", command], timeout=30)


def test_disconnect_offline_and_reboot_through_the_cli(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=1)
    (phone,) = phones
    # disconnect: a stream open on the phone is cut at once; the adb server reconnects by itself
    stream = subprocess.Popen(
        ["adb", "-P", str(phones.adb_port), "-s", phone.adb_serial, "shell", "sleep 120; echo finished"],
        stdout=subprocess.PIPE,
        text=True,
    )
    _until(lambda: "sleep 120" in _shell(phones, phone, "ps -A -o args 2>/dev/null || ps"), "no stream")
    assert "disconnect" in _fault(phones, phone, "disconnect")
    out, _ = stream.communicate(timeout=60)  # far less than the 120 s it would have slept
    assert "finished" not in out
    _until(lambda: _adb_state(phones, phone) == "device", "not reconnected after disconnect")

    # offline N: adb sees it go away, then come back by itself after N seconds
    _fault(phones, phone, "offline", "8")
    _until(lambda: _adb_state(phones, phone) != "device", "still a device while offline")
    _until(lambda: _adb_state(phones, phone) == "device", "not back after offline 8")

    # reboot: the phone comes back with none of its processes
    pid = _shell(phones, phone, "sleep 600 >/dev/null 2>&1 & echo $!").strip()
    assert _shell(phones, phone, f"kill -0 {pid} && echo alive").strip() == "alive"
    _fault(phones, phone, "reboot")

    def rebooted() -> bool:  # the event itself: back, and the process is gone (not a transient state)
        try:
            return (
                _shell(phones, phone, f"kill -0 {pid} 2>/dev/null && echo alive || echo gone").strip()
                == "gone"
            )
        except adbutils.AdbError:
            return False  # still rebooting

    _until(rebooted, "not back without its processes after reboot", timeout_s=120)
    assert _adb_state(phones, phone) == "device"
