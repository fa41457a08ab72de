"""Root in a rooted virtual phone stays inside it (issue #18.1): a static C program run through
`su` tries the escapes that worked before the phone had its own user and network namespaces.
Each must be refused, and the same program's write inside the phone (the control) must work, so
the test cannot pass because the program never ran."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from vphone.testing.phones import PhoneFactory, PhoneSet, free_tcp_port

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="root is only confined (and only exists) as host root"),
]
ESCAPE_SRC = Path(__file__).resolve().parents[2] / "fixtures" / "escape.c"


@pytest.fixture(scope="module")
def escape_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("escape") / "escape"
    subprocess.run(
        ["gcc", "-static", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out), str(ESCAPE_SRC)],
        check=True,
        timeout=120,
    )
    return out


@pytest.fixture(scope="module")
def rooted(module_virtual_phones: PhoneFactory) -> PhoneSet:
    return module_virtual_phones(count=1, profiles=["adreno-sd865"])


@pytest.fixture
def host_listener() -> Iterator[int]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        yield server.getsockname()[1]


def test_root_in_a_rooted_phone_cannot_reach_the_host(
    rooted: PhoneSet, escape_binary: Path, tmp_path: Path, host_listener: int
) -> None:
    device = rooted[0].device(rooted.client())
    device.sync.push(str(escape_binary), "/data/local/tmp/escape", mode=0o755)
    probe = tmp_path / "created-by-the-phone"
    # A host process of our own to attach to (not the runner's parent: that may be pid 1, which
    # inside the phone is the phone's own init). Its pid must not also name a phone process.
    with subprocess.Popen(["sleep", "120"]) as outside:
        try:
            assert device.shell(f"test -d /proc/{outside.pid} && echo seen || echo unseen") == "unseen"
            out = device.shell(f"su -c '/data/local/tmp/escape {probe} {outside.pid} {host_listener}'")
        finally:
            outside.kill()
    results = dict(line.split(" ", 1) for line in out.strip().splitlines())
    assert set(results) == {
        "handle",
        "hostfile",
        "listen",
        "hostnet",
        "ptrace",
        "mount",
        "module",
        "userns",
        "control",
    }, out
    assert results["control"] == "ok", out  # the program ran as root and writes inside the phone
    for attempt in ("handle", "hostfile", "hostnet", "ptrace", "mount", "module", "userns"):
        assert results[attempt].startswith("refused"), f"{attempt}: {results[attempt]}"
    assert results["listen"] == "bound"  # in its own network namespace, which has only loopback
    assert not probe.exists()
    assert device.shell("cat /data/local/tmp/escape.ok").strip() == "ok"
    # The phone's root is an unprivileged host uid: files it makes belong to its range.
    host_file = rooted[0].state_dir / "data" / "local" / "tmp" / "escape.ok"
    assert host_file.stat().st_uid >= 2**27


def test_phone_root_has_only_its_namespace_and_bounded_capabilities(rooted: PhoneSet) -> None:
    device = rooted[0].device(rooted.client())
    uid_map = device.shell("su -c 'cat /proc/self/uid_map'").split()
    assert uid_map[0] == "0" and int(uid_map[1]) >= 2**27 and uid_map[2] == "65536"
    su_caps = device.shell("su -c 'grep CapBnd /proc/self/status'").split()[1]
    shell_caps = device.shell("grep CapEff /proc/self/status").split()[1]
    assert int(shell_caps, 16) == 0
    cap_sys_admin = 21
    assert not int(su_caps, 16) >> cap_sys_admin & 1
    assert device.shell("su -c 'grep NoNewPrivs /proc/self/status'").split()[1] == "1"
    assert device.shell("su -c 'grep Seccomp: /proc/self/status'").split()[1] == "2"


def test_tools_socket_refuses_host_processes(rooted: PhoneSet) -> None:
    """The su/tool socket seen from the host (its path in the state dir) serves nothing."""
    path = rooted[0].state_dir / "ctl" / "tools.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        # The server may close before the request is all sent (EPIPE): also no answer.
        try:
            sock.sendall(b"FARM1\n" + (1).to_bytes(4, "little") + bytes(4) + b"su\0/\0")
            answer = sock.recv(16)
        except (BrokenPipeError, ConnectionResetError):
            answer = b""
        assert answer == b""  # closed without an answer


# Imports first (the venv may be root's), then drop to an ordinary user and start the daemon.
_AS_NOBODY = """
import os, sys
import vphone.daemon as daemon
import vphone.world
os.setgroups([]); os.setegid(65534); os.seteuid(65534)
sys.exit(daemon.main(["--state-dir", sys.argv[1], "--profile", "adreno-sd8gen2", "--port", sys.argv[2]]))
"""


def test_a_daemon_without_root_refuses_with_one_line() -> None:
    state_dir = Path(tempfile.mkdtemp(prefix="farm-nobody-"))  # pytest's tmp dirs are root's (0700)
    try:
        os.chown(state_dir, 65534, 65534)
        result = subprocess.run(
            [sys.executable, "-c", _AS_NOBODY, str(state_dir), str(free_tcp_port())],
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = result.stdout.splitlines()
        assert result.returncode == 2 and len(lines) == 1, (result.stdout, result.stderr)
        reply = json.loads(lines[0])
        assert reply["ok"] is False and "virtual phones need root" in reply["error"]
        assert not list(state_dir.glob("phones/*/data"))  # refused before laying anything out
    finally:
        shutil.rmtree(state_dir)
