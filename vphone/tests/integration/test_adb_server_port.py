"""The tests' adb server starts on another free port when the one chosen was taken before adb
could bind it (the free ports are the ephemeral range that the suite's own connections use: CI
once lost a module's phones to `adb start-server` exiting 255 on such a port)."""

from __future__ import annotations

import shutil
import socket
import subprocess

import pytest
from vphone.testing import phones
from vphone.testing.phones import kill_adb_server, start_adb_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb"),
]


def test_a_port_taken_meanwhile_is_replaced_by_another(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))  # bound, not listening: as a connection's local port
        busy = taken.getsockname()[1]
        choices = iter([busy])
        real = phones.free_tcp_port
        monkeypatch.setattr(phones, "free_tcp_port", lambda: next(choices, None) or real())
        server = start_adb_server()
        try:
            assert server.port != busy
            assert server.adb("devices").returncode == 0
        finally:
            kill_adb_server(server)


def test_a_port_named_and_taken_fails_with_adbs_own_words() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))  # bound, not listening: as a connection's local port
        with pytest.raises(subprocess.CalledProcessError) as raised:
            start_adb_server(taken.getsockname()[1])
    assert isinstance(raised.value, subprocess.CalledProcessError), raised.value
    assert "bind" in raised.value.stderr or "in use" in raised.value.stderr, raised.value.stderr
