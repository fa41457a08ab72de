"""farm-sampler overhead and timing (CPU share of one core, tick jitter at 100 Hz and 1 kHz), and
farm-probe's run time on a fake Adreno phone tree (target: under 1 s).

Samples 10 telemetry files (plain files in a tmp dir, which is the sampler's most expensive case:
it also checks each for replacement every tick) for a few seconds, then reads the sampler's own
CPU time from /proc/PID/stat (utime + stime, clock ticks) and /proc/PID/schedstat (ns, finer).
Jitter is how late each tick started against its absolute deadline (start + k * period), and how
far each interval strayed from the period. Targets: < 1 % of a core at 100 Hz, < 5 % at 1 kHz.

    .venv/bin/python tests/bench/bench_sampler.py [--seconds=5]

Prints tables and writes results/bench/sampler.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from farm.telemetry.sampler import Source, SourceFormat, sampler_argv
from farm.telemetry.trace import parse_trace

REPO = Path(__file__).resolve().parents[2]

ABI = "x86_64"
SAMPLER = REPO / "device_agents" / "build" / ABI / "farm-sampler"
PROBE = REPO / "device_agents" / "build" / ABI / "farm-probe"
TREES = REPO / "tests" / "integration" / "telemetry" / "telemetry_trees.py"
RESULTS = REPO / "results" / "bench" / "sampler.json"
PROBE_TARGET_MS = 1000
TARGET_CPU_PCT = {100: 1.0, 1000: 5.0}
N_SOURCES = 10


def _cpu_s(pid: int) -> tuple[float, float]:
    """(stat utime+stime in s, schedstat run time in s) of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of the line
    stat_s = ticks / os.sysconf("SC_CLK_TCK")
    try:
        sched_s = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        sched_s = float("nan")
    return stat_s, sched_s


def _sources(root: Path) -> list[Source]:
    formats = [SourceFormat.INT, SourceFormat.KGSL, SourceFormat.PCT, SourceFormat.FLOAT]
    texts = {SourceFormat.INT: "-412000", SourceFormat.KGSL: " 250000 1000000", SourceFormat.PCT: "25 %"}
    out = []
    for i in range(N_SOURCES):
        fmt = formats[i % len(formats)]
        path = root / f"node{i}"
        path.write_text(texts.get(fmt, "41.5") + "\n")
        out.append(Source(f"s{i}", str(path), fmt))
    return out


def run(rate_hz: int, seconds: float, root: Path) -> dict[str, float]:
    out = root / f"trace-{rate_hz}.bin"
    proc = subprocess.Popen(sampler_argv(str(SAMPLER), _sources(root), rate_hz, str(out)))
    try:
        time.sleep(0.3)  # skip start-up (exec, page faults) in the CPU measurement
        stat0, sched0 = _cpu_s(proc.pid)
        wall0 = time.monotonic()
        time.sleep(seconds)
        stat1, sched1 = _cpu_s(proc.pid)
        wall_s = time.monotonic() - wall0
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    trace = parse_trace(out.read_bytes())
    t = trace.sample_t_ns
    period_ns = 1e9 / rate_hz
    k = np.round((t - trace.header.start_ns) / period_ns)
    late_us = (t - (trace.header.start_ns + k * period_ns)) / 1e3
    interval_dev_us = np.abs(np.diff(t) - period_ns) / 1e3
    assert trace.end is not None
    return {
        "rate_hz": rate_hz,
        "sources": N_SOURCES,
        "seconds": round(wall_s, 3),
        "cpu_pct_stat": round(100 * (stat1 - stat0) / wall_s, 3),
        "cpu_pct_schedstat": round(100 * (sched1 - sched0) / wall_s, 3),
        "target_cpu_pct": TARGET_CPU_PCT[rate_hz],
        "late_p50_us": round(float(np.percentile(late_us, 50)), 1),
        "late_p99_us": round(float(np.percentile(late_us, 99)), 1),
        "interval_dev_p50_us": round(float(np.percentile(interval_dev_us, 50)), 1),
        "interval_dev_p99_us": round(float(np.percentile(interval_dev_us, 99)), 1),
        "read_p50_us": round(float(np.percentile(trace.read_ns, 50)) / 1e3, 1),
        "ticks": int(trace.end.ticks),
        "missed_ticks": int(trace.end.missed_ticks),
    }


def probe_times(runs: int, root: Path) -> dict[str, float]:
    """farm-probe on the same fake Adreno tree the tests use (5 current samples, 40 ms apart)."""
    spec = importlib.util.spec_from_file_location("telemetry_trees", TREES)
    assert spec is not None and spec.loader is not None
    trees = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = trees  # dataclasses look their module up while the class is made
    spec.loader.exec_module(trees)
    trees.adreno_tree(root)
    walls_ms, reported_ms = [], []
    for _ in range(runs):
        started = time.monotonic()
        done = subprocess.run(
            [str(PROBE), f"--sysfs-root={root}"], capture_output=True, text=True, check=True
        )
        walls_ms.append((time.monotonic() - started) * 1000)
        reported_ms.append(json.loads(done.stdout)["elapsed_ms"])
    return {
        "runs": runs,
        "wall_p50_ms": round(float(np.percentile(walls_ms, 50)), 1),
        "wall_max_ms": round(max(walls_ms), 1),
        "reported_p50_ms": float(np.percentile(reported_ms, 50)),
        "target_ms": PROBE_TARGET_MS,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    if not SAMPLER.exists() or not PROBE.exists():
        subprocess.run(["make", "-s", "-C", str(REPO / "device_agents"), f"ABI={ABI}"], check=True)
    with tempfile.TemporaryDirectory(prefix="bench-sampler-") as tmp:
        rows = [run(rate, args.seconds, Path(tmp)) for rate in (100, 1000)]
        probe = probe_times(10, Path(tmp) / "phone")
    cols = [
        ("rate_hz", "rate Hz"),
        ("cpu_pct_stat", "CPU % (stat)"),
        ("cpu_pct_schedstat", "CPU % (schedstat)"),
        ("target_cpu_pct", "target %"),
        ("late_p50_us", "late p50 us"),
        ("late_p99_us", "late p99 us"),
        ("interval_dev_p50_us", "|dt-T| p50 us"),
        ("interval_dev_p99_us", "|dt-T| p99 us"),
        ("read_p50_us", "read 10 p50 us"),
        ("missed_ticks", "skipped"),
    ]
    print("  ".join(f"{title:>14}" for _, title in cols))
    for row in rows:
        print("  ".join(f"{row[key]!s:>14}" for key, _ in cols))
    print()
    print("farm-probe: " + "  ".join(f"{k}={v}" for k, v in probe.items()))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "sampler", "host_cpus": os.cpu_count(), "rows": rows, "probe": probe}
    RESULTS.write_text(json.dumps(doc, indent=2))
    print(f"wrote {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
