"""Benchmark: one phone's shell round trip while another phone of the same daemon is attacked
(issue #27, items 1-2).

A fresh daemon per attack, with the attacked phone A (rooted adreno-sd865, for the attacks that
need root) and phone B (adreno-sd8gen2). B's `shell:true` over the device protocol (straight to
its port: the daemon's own share, no adb server) is timed ROUNDS times idle, then for WINDOW_S
after the attack started; a call that gets no answer within TIMEOUT_S counts as frozen (the
daemon serves every phone on one event loop: an attack that blocks it stops them all).
Attacks (from the issue's text): a FIFO at /dev/.farm/shared/power.json; a FIFO named like a taskset
request; A's charging node replaced by a link to a host FIFO; a telemetry node replaced by a FIFO;
two raw sync RECVs of a FIFO; a sync LIS2 of a 100k-entry directory; 300 bogus OPENs of 200 KB;
a flood of tiny OPENs for the whole window (the daemon's CPU it costs is charged to A: the CPU
seconds the daemon charged each phone meanwhile are recorded, `vphone list --json`).
Prints a table and writes results/bench/bench_hostile.json with the load average.
Run: .venv/bin/python tests/bench/bench_hostile.py [NAME-PART...]  (only the attacks named so)
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from vphone.adb import packets as p  # noqa: E402
from vphone.testing.adb_wire import WireHost  # noqa: E402
from vphone.testing.phones import kill_adb_server, start_adb_server  # noqa: E402

from vphone import control  # noqa: E402

OUT = ROOT / "results" / "bench" / "bench_hostile.json"
PROFILES = ["adreno-sd865", "adreno-sd8gen2"]
ROUNDS = 20
WINDOW_S = 8.0
TIMEOUT_S = 15.0
MANY = 100_000
NODE = "/sys/class/power_supply/battery"


def shell_true_ms(port: int) -> float | None:
    """`shell:true` straight to the phone: OPEN until the phone's CLSE; None past TIMEOUT_S."""
    start = time.perf_counter()
    try:
        with WireHost.connect(port) as host:
            host.send(p.A_OPEN, 1, 0, b"shell:true\0")
            while (packet := host.recv(TIMEOUT_S)) is not None:
                if packet.command == p.A_CLSE:
                    return (time.perf_counter() - start) * 1000
                if packet.command == p.A_WRTE:
                    host.send(p.A_OKAY, 1, packet.arg0)
    except (TimeoutError, OSError):
        return None
    return None


def adb_shell(adb_port: int, serial: str, command: str, timeout_s: float = TIMEOUT_S) -> str:
    """The attack's command; one that froze the daemon before it answered gives up after
    timeout_s (the freeze is what B's round trips then show)."""
    try:
        result = subprocess.run(
            ["adb", "-P", str(adb_port), "-s", serial, "shell", command],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return ""
    return result.stdout + result.stderr


def sync_request(host: WireHost, remote_id: int, request: bytes, path: str) -> None:
    local = host.open(remote_id, "sync:")
    if local is None:
        raise RuntimeError("sync refused")
    raw = path.encode()
    host.send(p.A_WRTE, remote_id, local, request + len(raw).to_bytes(4, "little") + raw)


Attack = Callable[[int, str, int, Path, contextlib.ExitStack], None]


def fifo_power_json(adb_port: int, serial: str, _port: int, _tmp: Path, _stack: contextlib.ExitStack) -> None:
    adb_shell(adb_port, serial, "rm -f /dev/.farm/shared/power.json; mkfifo /dev/.farm/shared/power.json")


def fifo_taskset_request(
    adb_port: int, serial: str, _port: int, _tmp: Path, _stack: contextlib.ExitStack
) -> None:
    adb_shell(
        adb_port,
        serial,
        "mkfifo /dev/.farm/shared/f && mv /dev/.farm/shared/f /dev/.farm/shared/taskset.request.1",
    )


def charging_link_host_fifo(
    adb_port: int, serial: str, _port: int, tmp: Path, _stack: contextlib.ExitStack
) -> None:
    fifo = tmp / "host-fifo"
    os.mkfifo(fifo)
    adb_shell(adb_port, serial, f"su -c 'rm -f {NODE}/input_suspend; ln -s {fifo} {NODE}/input_suspend'")


def telemetry_fifo(adb_port: int, serial: str, _port: int, _tmp: Path, _stack: contextlib.ExitStack) -> None:
    adb_shell(adb_port, serial, f"su -c 'rm -f {NODE}/current_now; mkfifo {NODE}/current_now'")


def sync_recv_fifo(adb_port: int, serial: str, port: int, _tmp: Path, stack: contextlib.ExitStack) -> None:
    adb_shell(adb_port, serial, "mkfifo /data/local/tmp/fifo")
    host = stack.enter_context(WireHost.connect(port))
    sync_request(host, 1, b"RECV", "/data/local/tmp/fifo")
    sync_request(host, 2, b"RECV", "/data/local/tmp/fifo")


def large_listing(adb_port: int, serial: str, port: int, _tmp: Path, stack: contextlib.ExitStack) -> None:
    adb_shell(
        adb_port, serial, f"mkdir /data/local/tmp/many; cd /data/local/tmp/many && seq 1 {MANY} | xargs touch"
    )
    host = stack.enter_context(WireHost.connect(port))
    sync_request(host, 1, b"LIS2", "/data/local/tmp/many")


def bogus_opens(_adb_port: int, _serial: str, port: int, _tmp: Path, stack: contextlib.ExitStack) -> None:
    host = stack.enter_context(WireHost.connect(port))
    for i in range(300):
        host.send(p.A_OPEN, 1 + i, 0, b"x" * 200_000 + b"\0")


def open_flood(_adb_port: int, _serial: str, port: int, _tmp: Path, stack: contextlib.ExitStack) -> None:
    """Tiny OPENs (of no service) sent back to back until the window ends; the answers drained."""
    host = stack.enter_context(WireHost.connect(port))
    host.sock.settimeout(None)
    batch = b"".join(p.encode(p.A_OPEN, 1 + i, 0, b"x\0") for i in range(1000))
    stop = threading.Event()

    def send() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                host.sock.sendall(batch)

    def drain() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                if select.select([host.sock], [], [], 0.2)[0] and not host.sock.recv(1 << 16):
                    return

    threads = [threading.Thread(target=send, daemon=True), threading.Thread(target=drain, daemon=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        stack.callback(thread.join, 10)
    stack.callback(lambda: host.sock.shutdown(socket.SHUT_RDWR))
    stack.callback(stop.set)


ATTACKS: dict[str, Attack] = {
    "FIFO at power.json (shell)": fifo_power_json,
    "FIFO as taskset request (shell)": fifo_taskset_request,
    "charging node -> host FIFO (root)": charging_link_host_fifo,
    "telemetry node as FIFO (root)": telemetry_fifo,
    "2 sync RECVs of a FIFO": sync_recv_fifo,
    f"sync LIS2 of {MANY // 1000}k names": large_listing,
    "300 bogus OPENs of 200 KB": bogus_opens,
    "flood of tiny OPENs": open_flood,
}


def summary(samples: list[float | None]) -> dict[str, float | int | None]:
    answered = sorted(s for s in samples if s is not None)
    return {
        "calls": len(samples),
        "frozen": len(samples) - len(answered),
        "median_ms": statistics.median(answered) if answered else None,
        "max_ms": answered[-1] if answered else None,
    }


@contextlib.contextmanager
def daemon(adb_port: int) -> Iterator[tuple[control.DaemonState, Path]]:
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        state = control.start_daemon(Path(tmp), PROFILES, adb_port=adb_port)
        try:
            control.connect_phones(state.phones, adb_port)
            yield state, Path(tmp)
        finally:
            control.disconnect_phones(state.phones, adb_port)
            control.stop_daemon(state)


def measure(adb_port: int, name: str, attack: Attack) -> dict[str, object]:
    with daemon(adb_port) as (state, state_dir), tempfile.TemporaryDirectory() as tmp:
        a, b = state.phones
        idle = [shell_true_ms(b.port) for _ in range(ROUNDS)]
        cpu_before = daemon_cpu_s(state_dir)
        with contextlib.ExitStack() as stack:
            attack(adb_port, a.adb_serial, a.port, Path(tmp), stack)
            attacked: list[float | None] = []
            end = time.monotonic() + WINDOW_S
            while time.monotonic() < end:
                attacked.append(shell_true_ms(b.port))
                if attacked[-1] is None:
                    break  # frozen: the next calls would only wait as long
        cpu_after = daemon_cpu_s(state_dir)
        charged = {
            role: None
            if cpu_after.get(phone.serial) is None
            else cpu_after[phone.serial] - cpu_before[phone.serial]
            for role, phone in (("A", a), ("B", b))
        }
        log_bytes = os.path.getsize(state_dir / "daemon.log")
        return {
            "idle": summary(idle),
            "attacked": summary(attacked),
            "daemon_log_bytes": log_bytes,
            "daemon_cpu_charged_s": charged,
        }


def daemon_cpu_s(state_dir: Path) -> dict[str, float | None]:
    """The daemon's CPU seconds charged to each phone so far (None: a daemon that does not count)."""
    state = control.running_state(state_dir)
    phones = () if state is None else state.phones
    return {phone.serial: getattr(phone, "daemon_cpu_s", None) for phone in phones}


def cell(s: dict[str, float | int | None]) -> str:
    if s["median_ms"] is None:
        return f"{'frozen':>22}"
    frozen = f", {s['frozen']} frozen" if s["frozen"] else ""
    return f"{s['median_ms']:>8.1f} (max {s['max_ms']:>7.1f}{frozen})"


def main() -> None:
    server = start_adb_server()
    load_before = os.getloadavg()[0]
    results = {}
    try:
        wanted = sys.argv[1:]
        for name, attack in ATTACKS.items():
            if wanted and not any(part in name for part in wanted):
                continue
            results[name] = measure(server.port, name, attack)
            r = results[name]
            charged = r["daemon_cpu_charged_s"]
            print(
                f"{name:<36}{cell(r['idle'])}{cell(r['attacked'])}  daemon CPU charged {charged}", flush=True
            )  # type: ignore[arg-type]
    finally:
        kill_adb_server(server)
    load = os.getloadavg()[0]
    print(f"B's shell:true ms, median (max): idle | while A is attacked; {os.cpu_count()} CPUs, "
          f"load {load_before:.1f} -> {load:.1f}; frozen = no answer within {TIMEOUT_S:.0f} s")  # fmt: skip
    OUT.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "bench": "hostile",
        "cpu_count": os.cpu_count(),
        "load_1min": [load_before, load],
        "attacks": results,
    }
    OUT.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
