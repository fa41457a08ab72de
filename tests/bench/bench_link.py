"""Benchmark: the cable model (farm virtual up --link, issue #10.5). For no model, usb2 and usb3:
`shell true` through the adb server (median of ROUNDS, the requests adbutils sends without its
own sleeps) and a PULL_MB pull through adbutils (MB/s). A phone on loopback is as fast as the host
allows; the models put a USB cable's per-packet turnaround and bandwidth back on purpose.
Prints a table and writes results/bench/bench_link.json. Noisy on a loaded machine.
Run: .venv/bin/python tests/bench/bench_link.py
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import adbutils  # noqa: E402
from vphone.adb.link import LinkKind  # noqa: E402
from vphone.testing.phones import free_tcp_port, kill_adb_server, start_adb_server  # noqa: E402

from tests.bench.bench_shell import adb_server_shell, timed_ms  # noqa: E402
from tests.bench.table import report  # noqa: E402
from vphone import control  # noqa: E402

OUT = ROOT / "results" / "bench" / "bench_link.json"
PROFILE = "adreno-sd8gen2"
ROUNDS = 30
PULL_MB = 20


def measure(link: LinkKind | None, server_port: int, tmp: Path) -> dict[str, float]:
    state = control.start_daemon(tmp / f"state-{link}", [PROFILE], adb_port=server_port, link=link)
    try:
        control.connect_phones(state.phones, server_port)
        phone = state.phones[0]
        timed_ms(lambda: adb_server_shell(server_port, phone.adb_serial, "true"), 5)
        shell_ms = statistics.median(
            timed_ms(lambda: adb_server_shell(server_port, phone.adb_serial, "true"), ROUNDS)
        )
        device = adbutils.AdbClient(host="127.0.0.1", port=server_port).device(serial=phone.adb_serial)
        blob = tmp / "blob.bin"
        blob.write_bytes(os.urandom(PULL_MB * 1_000_000))
        device.sync.push(str(blob), "/data/local/tmp/blob.bin")
        started = time.perf_counter()
        device.sync.pull("/data/local/tmp/blob.bin", str(tmp / "back.bin"))
        pull_s = time.perf_counter() - started
    finally:
        control.disconnect_phones(state.phones, server_port)
        control.stop_daemon(state)
    return {"shell_true_median_ms": shell_ms, "pull_mb_per_s": PULL_MB / pull_s}


def main() -> None:
    server = start_adb_server(free_tcp_port())
    results: dict[str, dict[str, float]] = {}
    load_before = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory(prefix="bench_link_") as tmp:
            for link in (None, LinkKind.USB2, LinkKind.USB3):
                results[link.value if link else "none"] = measure(link, server.port, Path(tmp))
    finally:
        kill_adb_server(server)
    rows = [
        (f"{name}: shell true / pull", f"{r['shell_true_median_ms']:.1f} ms / {r['pull_mb_per_s']:.0f} MB/s")
        for name, r in results.items()
    ]
    rows.append(("load (1 min) before -> after", f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}"))
    report(OUT, "link", rows, {"links": results}, ROOT)


if __name__ == "__main__":
    main()
