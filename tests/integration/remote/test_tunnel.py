"""The SSH tunnel against a real sshd: adbutils through it sees the lab host's phones, shell and
push work, and the tunnel comes back by itself after sshd was stopped and started again."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import adbutils
import pytest
from vphone.testing.phones import free_tcp_port

from farm.errors import HostError
from farm.fleet.farm_yaml import parse_config
from farm.fleet.hostkeys import HostKeyChanged
from farm.fleet.ssh import load_ssh_config, resolve_target
from farm.fleet.ssh_endpoint import SshAdbEndpoint
from farm.fleet.tunnel import AdbServerRefused, SshTunnel, TunnelState
from tests.fixtures.sshd import descendants
from tests.integration.remote.labs import policy_in, write_config

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lab(lab_hosts):
    return lab_hosts("lab1", address="127.0.0.2", phones=1)


def _tunnel(folder: Path, lab) -> SshTunnel:
    config = parse_config((folder / "farm.yaml").read_text(), "farm.yaml")
    target = resolve_target(config.host(lab.name), load_ssh_config(folder / "none"))
    return SshTunnel(target, policy_in(folder), adb_port=lab.adb.port, keepalive_s=1.0)


def test_adb_through_the_tunnel_lists_and_runs_on_the_lab_phone(lab, tmp_path: Path) -> None:
    write_config(tmp_path, [lab])
    with _tunnel(tmp_path, lab) as tunnel:
        assert tunnel.wait_up(15), tunnel.last_error
        endpoint = SshAdbEndpoint(tunnel)
        listed = endpoint.list()
        assert [item.adb_serial for item in listed] == [lab.phones[0].adb_serial]
        device = endpoint.device(lab.phones[0].adb_serial)
        assert device.getprop("ro.serialno") == lab.phones[0].serial
        payload = tmp_path / "blob.bin"
        payload.write_bytes(bytes(range(256)) * 4096)
        device.sync.push(str(payload), "/data/local/tmp/blob.bin")
        assert device.shell(["wc", "-c", "/data/local/tmp/blob.bin"]).split()[0] == str(256 * 4096)
        version, rtt_s = tunnel.adb_round_trip_s()
        assert version > 30 and rtt_s > 0


def test_tunnel_goes_down_with_sshd_and_comes_back_on_the_same_port(lab, tmp_path: Path) -> None:
    write_config(tmp_path, [lab])
    with _tunnel(tmp_path, lab) as tunnel:
        assert tunnel.wait_up(15), tunnel.last_error
        port = tunnel.local_port
        lab.sshd.stop()
        try:
            deadline = time.monotonic() + 10
            while tunnel.is_up and time.monotonic() < deadline:
                time.sleep(0.1)
            assert tunnel.state is TunnelState.DOWN
            with pytest.raises(HostError, match="not connected"):
                SshAdbEndpoint(tunnel).list()
            client = adbutils.AdbClient("127.0.0.1", port, socket_timeout=5)
            with pytest.raises((adbutils.AdbError, OSError, EOFError)):
                client.device_list()
        finally:
            lab.sshd.start()
        assert tunnel.wait_up(20), tunnel.last_error
        assert tunnel.local_port == port and tunnel.reconnects >= 1
        assert [i.adb_serial for i in SshAdbEndpoint(tunnel).list()] == [lab.phones[0].adb_serial]


def test_stopped_adb_server_keeps_ssh_up_and_says_what_to_start(lab, tmp_path: Path) -> None:
    write_config(tmp_path, [lab])
    with _tunnel(tmp_path, lab) as tunnel:
        tunnel.adb_port = free_tcp_port()  # nothing listens there on the host
        assert tunnel.wait_up(15), tunnel.last_error
        time.sleep(2.5)  # two keepalive probes: both answered "refused" by the host's sshd
        assert tunnel.state is TunnelState.UP
        with pytest.raises(AdbServerRefused, match="start-server"):
            tunnel.open_channel()


def test_a_connection_that_stops_answering_is_dropped_and_replaced(lab, tmp_path: Path) -> None:
    """A frozen peer (as behind a dead network link) closes nothing: only the probe notices."""
    write_config(tmp_path, [lab])
    with _tunnel(tmp_path, lab) as tunnel:
        assert tunnel.wait_up(15), tunnel.last_error
        assert lab.sshd.process is not None
        frozen = descendants(lab.sshd.process.pid)  # the per-connection sshd processes
        assert frozen
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):  # one may be a connection that just ended
                os.kill(pid, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 15
            while tunnel.reconnects == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert tunnel.reconnects >= 1 and tunnel.wait_up(10), tunnel.last_error
            assert [i.adb_serial for i in SshAdbEndpoint(tunnel).list()] == [lab.phones[0].adb_serial]
        finally:
            for pid in frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)


def test_a_host_back_with_another_key_is_never_reconnected(lab_hosts, tmp_path: Path) -> None:
    other = lab_hosts("lab3", address="127.0.0.9", phones=0)
    write_config(tmp_path, [other])
    with _tunnel(tmp_path, other) as tunnel:
        assert tunnel.wait_up(15), tunnel.last_error
        reconnects = tunnel.reconnects
        other.sshd.stop()
        other.sshd.new_host_key()
        other.sshd.start()
        # Wait for the event itself: an attempt on the host with its new key, refused.
        deadline = time.monotonic() + 60
        while not isinstance(tunnel.last_error, HostKeyChanged):
            assert time.monotonic() < deadline, f"no refused reconnect: {tunnel.last_error!r}"
            time.sleep(0.1)
        assert not tunnel.is_up and tunnel.reconnects == reconnects
        with pytest.raises(HostError, match="HOST KEY CHANGED"):
            SshAdbEndpoint(tunnel).list()
