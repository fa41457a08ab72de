"""Fault injection through the daemon's control socket, observed through the real adb server."""

from __future__ import annotations

import subprocess

import pytest
from vphone.testing.phones import AdbServer
from vphone.testing.waiting import eventually

pytestmark = pytest.mark.integration


def adb_state(adb_server: AdbServer, adb_serial: str) -> str:
    rows = [line.split() for line in adb_server.adb("devices").stdout.splitlines()[1:] if line.strip()]
    return next((row[1] for row in rows if row[0] == adb_serial), "missing")


def wait_for(adb_server: AdbServer, adb_serial: str, wanted: str, timeout_s: float) -> bool:
    return eventually(lambda: adb_state(adb_server, adb_serial) == wanted, timeout_s)


def answers(adb_server: AdbServer, adb_serial: str) -> bool:
    """One `echo back` through the adb server: whether the phone answered it."""
    try:
        return adb_server.adb("-s", adb_serial, "shell", "echo back", timeout_s=5).stdout == "back\n"
    except subprocess.TimeoutExpired:
        return False


def test_offline_then_back_and_hang_then_recover(adb_server: AdbServer, virtual_phones) -> None:
    phones = virtual_phones(count=2)
    phone, other = phones

    phones.fault(phone, "offline", 2)
    assert wait_for(adb_server, phone.adb_serial, "offline", 3)
    assert adb_state(adb_server, other.adb_serial) == "device"
    assert wait_for(adb_server, phone.adb_serial, "device", 20)

    phones.fault(phone, "hang")
    with pytest.raises(subprocess.TimeoutExpired):
        adb_server.adb("-s", phone.adb_serial, "shell", "echo hi", timeout_s=2)
    assert adb_server.adb("-s", other.adb_serial, "shell", "echo hi").stdout == "hi\n"
    phones.fault(phone, "recover")
    phones.fault(phone, "disconnect")  # the hung connection's state is unknown: start afresh
    # The adb server may not have seen the drop yet: `devices` can still say "device" for the old
    # connection, and a command sent on it ends with "closed" (CI once read '' that way). The
    # event is the phone answering again, on the connection the server makes anew.
    assert eventually(lambda: answers(adb_server, phone.adb_serial), 20)
