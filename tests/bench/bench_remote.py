"""Benchmark: what the SSH tunnel to a lab host's adb server costs.

Starts a fake lab host like the tests do (a real sshd on 127.0.0.5 with its own host key, a
private adb server, one virtual phone), then measures the same adb calls once straight to that adb
server ("local") and once through farm's SshTunnel ("tunnel"): the round trip of `host:version`,
a trivial `adb shell true`, and push throughput of a 16 MiB file. Prints a table and writes
results/bench/bench_remote.json. Everything it starts is stopped at the end.
Run: .venv/bin/python tests/bench/bench_remote.py
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "results" / "bench" / "bench_remote.json"
CALLS = 40
PUSH_BYTES = 16 * 1024 * 1024
PUSHES = 3


def timed_ms(action: Callable[[], Any], count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000.0)
    return times


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_ms": round(statistics.median(ordered), 3),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
        "min_ms": round(ordered[0], 3),
    }


@contextlib.contextmanager
def lab_host(folder: Path) -> Iterator[tuple[Any, Any, Any, Path]]:
    """(sshd, adb server, phone info, client key) of a fake lab host; all stopped on exit."""
    from vphone.testing.phones import free_tcp_port, kill_adb_server, start_adb_server, world_factory

    from tests.fixtures.sshd import Sshd, _keygen
    from vphone import control

    key = folder / "id_ed25519"
    _keygen(key, "farm-bench")
    sshd = Sshd(folder / "sshd", "127.0.0.5", free_tcp_port(), key.with_suffix(".pub").read_text())
    (folder / "sshd").mkdir()
    server = start_adb_server(free_tcp_port())
    state = None
    try:
        sshd.start()
        factory = world_factory()
        state = control.start_daemon(
            folder / "phones", control.resolve_profiles(1, []), world_factory=factory, adb_port=server.port
        )
        control.connect_phones(state.phones, server.port)
        yield sshd, server, state.phones[0], key
    finally:
        sshd.stop()
        if state is not None:
            control.disconnect_phones(state.phones, server.port)
            control.stop_daemon(state)
        kill_adb_server(server)


def raw_host_version(port: int) -> int:
    """One `host:version` on a fresh connection, as every adb client call starts with one."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"000chost:version")
        reply = b""
        while len(reply) < 12:
            chunk = sock.recv(12 - len(reply))
            if not chunk:
                raise OSError("adb server closed the connection")
            reply += chunk
    if not reply.startswith(b"OKAY"):
        raise OSError(f"adb server answered {reply!r}")
    return int(reply[8:12], 16)


def measure(client: Any, port: int, adb_serial: str, payload: Path) -> dict[str, Any]:
    device = client.device(adb_serial)
    device.shell("true")  # warm: transport and shell service
    shell = timed_ms(lambda: device.shell("true"), CALLS)
    versions = timed_ms(lambda: raw_host_version(port), CALLS)
    pushes = timed_ms(lambda: device.sync.push(str(payload), "/data/local/tmp/bench.bin"), PUSHES)
    best_s = min(pushes) / 1000.0
    return {
        "host_version": summary(versions),
        "shell_true": summary(shell),
        "push_mb_s": round(PUSH_BYTES / best_s / 1e6, 1),
    }


def main() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import adbutils

    from farm.fleet.hostkeys import HostKeyPolicy
    from farm.fleet.ssh import SshTarget
    from farm.fleet.tunnel import SshTunnel

    os.environ.pop("SSH_AUTH_SOCK", None)
    with tempfile.TemporaryDirectory(prefix="farm-bench-remote-") as tmp, lab_host(Path(tmp)) as lab:
        sshd, server, phone, key = lab
        folder = Path(tmp)
        payload = folder / "payload.bin"
        payload.write_bytes(os.urandom(PUSH_BYTES))
        known = folder / "known_hosts"
        known.write_text(sshd.known_hosts_line())
        target = SshTarget("bench", sshd.address, sshd.port, "root", (str(key),), True, "bench")
        with SshTunnel(target, HostKeyPolicy(known, system_files=[]), adb_port=server.port) as tunnel:
            if not tunnel.wait_up(20):
                raise SystemExit(f"tunnel did not come up: {tunnel.last_error}")
            local = adbutils.AdbClient("127.0.0.1", server.port)
            through = adbutils.AdbClient("127.0.0.1", tunnel.local_port)
            rows = {
                "local": measure(local, server.port, phone.adb_serial, payload),
                "tunnel": measure(through, tunnel.local_port, phone.adb_serial, payload),
            }
    print(f"adb through an SSH tunnel vs straight to the adb server ({CALLS} calls, best of {PUSHES} pushes)")
    print(f"{'path':<8} {'host:version ms':>16} {'shell true ms':>14} {'p90 ms':>8} {'push MB/s':>10}")
    for name, row in rows.items():
        print(
            f"{name:<8} {row['host_version']['median_ms']:>16.2f} {row['shell_true']['median_ms']:>14.2f} "
            f"{row['shell_true']['p90_ms']:>8.2f} {row['push_mb_s']:>10.1f}"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"calls": CALLS, "push_bytes": PUSH_BYTES, **rows}, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
