"""Benchmark: how fast gpuload stops on SIGTERM (its contract: exit within 0.1 s), on this host.

A speed goal, so it is measured here and not asserted in a test (the integration test checks that
a signal ends the run with its result). For each target load the program runs until its first
period is reported, gets SIGTERM, and the time to its exit is taken; ROUNDS rounds, the table
shows the median and the worst. The host is shared: read the numbers with that in mind.
Run: .venv/bin/python tests/bench/bench_gpuload_stop.py
"""

from __future__ import annotations

import json
import platform
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GPULOAD = ROOT / "kernels" / "build" / platform.machine() / "gpuload"
OUT = ROOT / "results" / "bench" / "bench_gpuload_stop.json"
TARGETS = ("1.0", "0.5", "0.0")
ROUNDS = 5
CONTRACT_S = 0.1


def stop_latency_s(target: str, cache: str) -> float:
    proc = subprocess.Popen(
        [str(GPULOAD), f"--target={target}", "--period-ms=100", f"--cl-cache={cache}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # until the first period is reported: it is running
        if json.loads(line)["event"] == "load":
            break
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    latency = time.monotonic() - sent
    proc.stdout.close()
    return latency


def main() -> None:
    rows = {}
    with tempfile.TemporaryDirectory() as cache:
        for target in TARGETS:
            rows[target] = [stop_latency_s(target, cache) for _ in range(ROUNDS)]
    print(f"{'target':>6} {'median s':>9} {'worst s':>8}  contract {CONTRACT_S:g} s")
    for target, latencies in rows.items():
        print(f"{target:>6} {statistics.median(latencies):>9.3f} {max(latencies):>8.3f}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"contract_s": CONTRACT_S, "latencies_s": rows}, indent=2))


if __name__ == "__main__":
    main()
