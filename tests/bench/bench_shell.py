"""Benchmark: one command's round trip through adbutils to a virtual phone (issue #10.5).

adbutils `shell("true")`, `getprop ro.serialno`, `dumpsys battery`, `cmd battery get level`,
`settings get global adb_enabled` and an `adb shell true` of Debian's adb: median and p90 of
ROUNDS calls each (after WARMUP calls), on one idle phone of the default profile. The goals of
issue #10 are a median <= 10 ms for shell("true") and <= 15 ms for the tools.
Prints a table and writes results/bench/bench_shell.json.
Run: .venv/bin/python tests/bench/bench_shell.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from farm.virtual import control  # noqa: E402
from tests.fixtures.phones import free_tcp_port, kill_adb_server, start_adb_server  # noqa: E402

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


def timed_ms(call: object, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()  # type: ignore[operator]
        samples.append((time.perf_counter() - start) * 1000.0)
    return samples


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": statistics.median(ordered), "p90_ms": ordered[int(0.9 * (len(ordered) - 1))]}


def main() -> None:
    server = start_adb_server(free_tcp_port())
    results: dict[str, dict[str, float]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench_shell_") as tmp:
            state = control.start_daemon(Path(tmp), [PROFILE], adb_port=server.port)
            try:
                control.connect_phones(state.phones, server.port)
                serial = state.phones[0].adb_serial
                device = server.client().device(serial=serial)
                for name, command, _goal in COMMANDS:
                    timed_ms(lambda c=command: device.shell(c), WARMUP)
                    results[name] = summary(timed_ms(lambda c=command: device.shell(c), ROUNDS))
                argv = ["adb", "-P", str(server.port), "-s", serial, "shell", "true"]
                results["adb shell true (Debian adb)"] = summary(
                    timed_ms(lambda: subprocess.run(argv, check=True, capture_output=True), DEBIAN_ADB_ROUNDS)
                )
            finally:
                control.disconnect_phones(state.phones, server.port)
                control.stop_daemon(state)
    finally:
        kill_adb_server(server)
    goals = {name: goal for name, _c, goal in COMMANDS}
    width = max(len(name) for name in results)
    print(f"{'adbutils call':<{width}}  median    p90   goal")
    for name, value in results.items():
        goal = f"<= {goals[name]:.0f} ms" if name in goals else "-"
        print(f"{name:<{width}}  {value['median_ms']:5.1f} ms {value['p90_ms']:5.1f} ms  {goal}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    payload = {"bench": "shell", "cpu_count": os.cpu_count(), "load_1min": os.getloadavg()[0], **results}
    OUT.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
