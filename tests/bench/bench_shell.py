"""Benchmark: one command's round trip to a virtual phone (issue #10.5), in four layers.

For `true`, `getprop ro.serialno`, `dumpsys battery`, `cmd battery get level` and
`settings get global adb_enabled`, median and p90 of ROUNDS calls (after WARMUP) on one idle
phone of the default profile, through:
  adbutils      AdbDevice.shell(cmd), as farm calls it. adbutils >= 2.9 sleeps 10 ms in every
                AdbConnection.close() and shell() opens two connections (server_version, then
                the shell), so ~20 ms of each call are the client's own, whatever the phone.
  adbutils, no close sleep
                the same AdbDevice.shell(cmd) with that one sleep made a no-op for the layer's
                calls (adbutils._adb's `time` seen through a proxy): what the issue's goal
                measures once the client's fixed 2 x 10 ms are set aside.
  adb server    the same requests adbutils sends (host:version, host:transport, shell:) over
                a plain socket, without the client's sleeps: the phone plus the adb server.
  phone         the device protocol straight to the phone's port (no adb server): the phone's
                own share (spawn into the sandbox, the command, exit, CLSE).
plus `adb shell true` of Debian's adb. The goals of issue #10 (shell true <= 10 ms, tools <= 15
ms) are printed beside the adbutils layer without its close sleep and the adb-server layer, the
ones a phone can be held to.
Prints a table and writes results/bench/bench_shell.json. Timings on a loaded machine are noisy:
the load average is printed and saved with them.
Run: .venv/bin/python tests/bench/bench_shell.py
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from vphone.adb import packets as p  # noqa: E402
from vphone.testing.adb_wire import WireHost  # noqa: E402
from vphone.testing.phones import free_tcp_port, kill_adb_server, start_adb_server  # noqa: E402

from vphone import control  # noqa: E402

OUT = ROOT / "results" / "bench" / "bench_shell.json"
PROFILE = "adreno-sd8gen2"
WARMUP = 5
ROUNDS = 40
DEBIAN_ADB_ROUNDS = 15
COMMANDS = (
    ("shell true", "true", 10.0),
    ("getprop ro.serialno", "getprop ro.serialno", 15.0),
    ("dumpsys battery", "dumpsys battery", 15.0),
    ("cmd battery get level", "cmd battery get level", 15.0),
    ("settings get global", "settings get global adb_enabled", 15.0),
)
LAYERS = ("adbutils", "adbutils, no close sleep", "adb server", "phone")


@contextmanager
def adbutils_without_close_sleep() -> Iterator[None]:
    """adbutils' AdbConnection.close() calls time.sleep(0.01) after shutdown(SHUT_WR); within
    this block its module sees a `time` whose sleep does nothing (nothing else in the module
    uses time)."""
    from adbutils import _adb

    real = _adb.time
    proxy = types.ModuleType("time")
    proxy.__dict__.update(real.__dict__)
    setattr(proxy, "sleep", lambda _seconds: None)  # noqa: B010 (a module type has no sleep to type)
    _adb.time = proxy
    try:
        yield
    finally:
        _adb.time = real


def timed_ms(call: Callable[[], object], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000.0)
    return samples


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": statistics.median(ordered), "p90_ms": ordered[int(0.9 * (len(ordered) - 1))]}


def adb_server_shell(port: int, serial: str, command: str) -> bytes:
    """What adbutils' shell() sends, on plain sockets: host:version, then transport + shell."""

    def request(sock: socket.socket, text: str) -> None:
        data = text.encode()
        sock.sendall(b"%04x" % len(data) + data)
        if sock.recv(4) != b"OKAY":
            raise RuntimeError(f"adb server refused {text!r}")

    with socket.create_connection(("127.0.0.1", port)) as sock:
        request(sock, "host:version")
        sock.recv(64)
    output = b""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        request(sock, f"host:transport:{serial}")
        request(sock, f"shell:{command}")
        while chunk := sock.recv(65536):
            output += chunk
    return output


class DirectPhone:
    """The device protocol on one connection to the phone's own port."""

    def __init__(self, port: int) -> None:
        self.host = WireHost.connect(port)
        self.next_id = 1

    def shell(self, command: str) -> bytes:
        self.next_id += 1
        remote = self.next_id
        local = self.host.open(remote, f"shell:{command}")
        output = b""
        while (packet := self.host.recv()) is not None:
            if packet.command == p.A_WRTE:
                output += packet.payload
                self.host.send(p.A_OKAY, remote, packet.arg0)
            elif packet.command == p.A_CLSE:
                break
        self.host.send(p.A_CLSE, remote, local or 0)
        return output


def measure(server_port: int, serial: str, phone_port: int) -> dict[str, dict[str, dict[str, float]]]:
    import adbutils

    device = adbutils.AdbClient(host="127.0.0.1", port=server_port).device(serial=serial)
    direct = DirectPhone(phone_port)
    calls: dict[str, Callable[[str], object]] = {
        "adbutils": device.shell,
        "adbutils, no close sleep": device.shell,
        "adb server": lambda c: adb_server_shell(server_port, serial, c),
        "phone": direct.shell,
    }
    results: dict[str, dict[str, dict[str, float]]] = {}
    try:
        for name, command, _goal in COMMANDS:
            results[name] = {}
            for layer, call in calls.items():
                unpatched = contextlib.nullcontext()
                with adbutils_without_close_sleep() if "no close sleep" in layer else unpatched:
                    timed_ms(lambda c=command, f=call: f(c), WARMUP)  # type: ignore[misc]
                    results[name][layer] = summary(timed_ms(lambda c=command, f=call: f(c), ROUNDS))  # type: ignore[misc]
    finally:
        direct.host.close()
    return results


def main() -> None:
    server = start_adb_server(free_tcp_port())
    try:
        with tempfile.TemporaryDirectory(prefix="bench_shell_") as tmp:
            state = control.start_daemon(Path(tmp), [PROFILE], adb_port=server.port)
            try:
                control.connect_phones(state.phones, server.port)
                phone = state.phones[0]
                load_before = os.getloadavg()[0]
                results = measure(server.port, phone.adb_serial, phone.port)
                argv = ["adb", "-P", str(server.port), "-s", phone.adb_serial, "shell", "true"]
                debian = summary(
                    timed_ms(lambda: subprocess.run(argv, check=True, capture_output=True), DEBIAN_ADB_ROUNDS)
                )
            finally:
                control.disconnect_phones(state.phones, server.port)
                control.stop_daemon(state)
    finally:
        kill_adb_server(server)
    goals = {name: goal for name, _c, goal in COMMANDS}
    load = os.getloadavg()[0]
    print(f"median (p90) ms per call; {os.cpu_count()} CPUs, load {load_before:.1f} -> {load:.1f}; "
          f"adbutils {version('adbutils')}")  # fmt: skip
    short = {"adbutils, no close sleep": "adbutils -sleep"}
    header = f"{'command':<22}" + "".join(f"{short.get(layer, layer):>18}" for layer in LAYERS) + "   goal"
    print(header)
    for name, layers in results.items():
        cells = "".join(f"{v['median_ms']:>9.1f} ({v['p90_ms']:>5.1f})" for v in layers.values())
        phone_side = max(layers["adbutils, no close sleep"]["median_ms"], layers["adb server"]["median_ms"])
        met = "met" if phone_side <= goals[name] else "MISSED"
        print(f"{name:<22}{cells}   <= {goals[name]:.0f} ms {met}")
    print(f"{'adb shell true (Debian adb)':<22}{debian['median_ms']:>9.1f} ({debian['p90_ms']:>5.1f})")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "bench": "shell",
        "cpu_count": os.cpu_count(),
        "load_1min": [load_before, load],
        "adbutils_version": version("adbutils"),
        "goals_ms": goals,
        "commands": results,
        "debian_adb_shell_true": debian,
    }
    OUT.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
