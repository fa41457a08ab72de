"""Daemon and control helpers that need no phone: port choice, profile cycling, fault parsing."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from vphone.errors import ConfigError, EnvironmentProblem

from vphone import control, daemon, faults


def test_bind_ports_skips_ports_in_use_and_the_emulator_range() -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        with pytest.raises(EnvironmentProblem, match=f"port {taken} is already in use"):
            daemon.bind_ports(1, taken)
    # without an explicit port, ports in use (here: our own first pick) are skipped
    first = daemon.bind_ports(1, None)
    try:
        second = daemon.bind_ports(1, None)
        assert second[0].getsockname()[1] > first[0].getsockname()[1] >= daemon.FIRST_PORT
        second[0].close()
    finally:
        first[0].close()


def test_bind_ports_jumps_over_5555_to_5585() -> None:
    try:
        sockets = daemon.bind_ports(2, 5553)
    except EnvironmentProblem:
        pytest.skip("port 5553 is busy on this machine")
    try:
        ports = [sock.getsockname()[1] for sock in sockets]
        assert ports[0] == 5553
        assert all(port not in daemon.EMULATOR_PORTS for port in ports)
        assert ports[1] >= 5586
    finally:
        for sock in sockets:
            sock.close()


def test_control_socket_path_stays_short(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    path = daemon.control_socket_path(deep)
    assert len(str(path).encode()) <= daemon.MAX_UNIX_PATH_BYTES
    assert daemon.control_socket_path(Path("/tmp/x")) == Path("/tmp/x/control.sock")


def test_profiles_are_cycled_over_the_count() -> None:
    assert control.cycle_profiles(5, ["a", "b"]) == ["a", "b", "a", "b", "a"]
    with pytest.raises(ConfigError):
        control.cycle_profiles(0, ["a"])


@pytest.mark.parametrize(
    ("kind", "seconds", "error"),
    [
        ("melt", None, "unknown fault"),
        ("offline", None, "needs a duration"),
        ("disconnect", 3.0, "takes no duration"),
        ("hang", -1.0, "must be positive"),
    ],
)
def test_bad_faults_are_config_errors(kind: str, seconds: float | None, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        faults.parse_fault(kind, seconds)


def test_good_faults_parse() -> None:
    assert faults.parse_fault("hang", None) == faults.Fault(faults.FaultKind.HANG, None)
    assert faults.parse_fault("offline", 2.5) == faults.Fault(faults.FaultKind.OFFLINE, 2.5)


def test_root_capabilities_agree_between_bwrap_and_vphone_exec() -> None:
    # init gets them from bwrap --cap-add, every later root process from vphone-exec: one list.
    import re

    from vphone.sandbox import ROOT_CAPS

    source = (Path(daemon.__file__).parent / "native" / "vphone-exec.c").read_text()
    block = source[
        source.index("static const int ROOT_CAPS[] = {") : source.index("};", source.index("ROOT_CAPS[]"))
    ]
    assert tuple(re.findall(r"CAP_[A-Z_]+", block)) == ROOT_CAPS
