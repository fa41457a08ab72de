"""Benchmark: farm's own cost per run (issue 12), with `program: idle` runs on virtual phones.

For each phone count (1, 8, 32, 64; FARM_BENCH_OVERHEAD_PHONES overrides) and run length (2 s and
10 s of idle measuring window) one sweep runs in this process through farm.engine.runner, through
the real adb server, and gives:
- overhead per run (s): on each phone, the time from the end of one run's measuring window to the
  start of the next (the idle program's own CLOCK_MONOTONIC stamps), minus the cooldown wait it
  recorded; median over all gaps;
- adb round trips per run: DeviceSession.round_trips over each attempt (AdbDriver.execute is
  wrapped to read it before and after), median;
- coordinator CPU per run (ms): this process's CPU time over the sweep / runs (the phones, the adb
  server and the phones' programs are other processes);
- phone utilisation: sum of measuring windows / (phones x span from the first window's start to the
  last one's end), and the same over the sweep's whole wall time (with prepare and deploy).

The goals from the issue are printed beside. On a shared 2-core machine the phones' processes,
the adb server and farm share the CPUs: the load average is printed and saved with the table.
Run: .venv/bin/python tests/bench/bench_overhead.py   (writes results/bench/bench_overhead.json)
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from vphone.testing.phones import free_tcp_port, kill_adb_server, start_adb_server  # noqa: E402

from farm.engine.driver import AdbDriver  # noqa: E402
from farm.engine.runner import RunOptions, run_experiment  # noqa: E402
from farm.store import Store  # noqa: E402
from tests.bench.bench_orchestrator import bench_windows  # noqa: E402
from tests.bench.table import report  # noqa: E402
from tests.e2e.farm_cli import write_experiment  # noqa: E402
from vphone import control  # noqa: E402

OUT = ROOT / "results" / "bench" / "bench_overhead.json"
PHONE_COUNTS = [int(n) for n in os.environ.get("FARM_BENCH_OVERHEAD_PHONES", "1 8 32 64").split()]
RUN_SECONDS = [float(s) for s in os.environ.get("FARM_BENCH_OVERHEAD_SECONDS", "2 10").split()]
RUNS_PER_PHONE = {2.0: 8, 10.0: 4}
GOALS = {"overhead_s": 0.25, "round_trips": 4, "cpu_ms": 20.0, "utilisation_32x10": 0.90}
PROFILES = ["adreno-nexus6p", "adreno-sd8gen2"]


def _spec(folder: Path, name: str, seconds: float, runs: int) -> Path:
    body = (
        "benchmark:\n"
        "  program: idle\n"
        f"  params: {{seconds: {seconds:g}}}\n"
        f"measurement: {{warmup: 0, iterations: 2, min_seconds: 0, max_seconds: {seconds + 10:g}, "
        f"repetitions: {runs}}}\n"
        "telemetry: {idle_baseline_s: 0}\n"
        "conditions:\n"
        "  cooldown: {max_temp_c: 90, timeout_s: 5}\n"
        "  min_battery_pct: 1\n"
        f"timeouts: {{run_timeout_s: {seconds + 60:g}}}\n"
    )
    return write_experiment(folder, name, body)


class Instruments:
    """Wraps AdbDriver.execute, .prepare and .metrics (restored on exit) to read each attempt's
    session round trips and the CPU time of the thread doing each (time.thread_time)."""

    def __init__(self) -> None:
        self.round_trips: list[int] = []
        self.cpu_s: dict[str, float] = {"execute": 0.0, "prepare": 0.0, "metrics": 0.0}
        self._lock = threading.Lock()
        self._saved = {name: getattr(AdbDriver, name) for name in self.cpu_s}

    def _timed(self, name: str) -> Callable[..., Any]:
        original = self._saved[name]

        def wrapper(driver: AdbDriver, *args: Any, **kwargs: Any) -> Any:
            prepared = args[0] if name == "execute" else None
            before_trips = prepared.session.round_trips if prepared is not None else 0
            before_cpu = time.thread_time()
            try:
                return original(driver, *args, **kwargs)
            finally:
                with self._lock:
                    self.cpu_s[name] += time.thread_time() - before_cpu
                    if prepared is not None:
                        self.round_trips.append(prepared.session.round_trips - before_trips)

        return wrapper

    def __enter__(self) -> Instruments:
        for name in self._saved:
            setattr(AdbDriver, name, self._timed(name))
        return self

    def __exit__(self, *_exc: object) -> None:
        for name, original in self._saved.items():
            setattr(AdbDriver, name, original)


def bench_sweep(adb_port: int, work: Path, phones: int, seconds: float) -> dict[str, Any]:
    name = f"idle{phones}x{seconds:g}"
    runs = RUNS_PER_PHONE.get(seconds, 3)
    state = control.start_daemon(work / f"vp-{name}", (PROFILES * phones)[:phones], adb_port=adb_port)
    try:
        control.connect_phones(state.phones, adb_port)
        spec = _spec(work, name, seconds, runs)  # every phone runs every run of the plan
        options = RunOptions(file=spec, results=work / name, adb_port=adb_port)
        with Instruments() as trips:
            cpu_before, started = time.process_time(), time.monotonic()
            summary = run_experiment(options)
            wall, cpu = time.monotonic() - started, time.process_time() - cpu_before
    finally:
        control.disconnect_phones(state.phones, adb_port)
        control.stop_daemon(state)
    windows = bench_windows(work / name, name, only_event="iter")
    done = sum(len(ws) for ws in windows.values())
    with Store.in_results(work / name) as store:
        rows = store.query("SELECT outcome, error FROM attempts WHERE outcome != 'done'")
    not_done = sorted({f"{row['outcome']}: {str(row['error'])[:160]}" for row in rows})
    gaps = [
        (later[0] - earlier[1]) / 1e9 - later[2]
        for ws in windows.values()
        for earlier, later in itertools.pairwise(ws)
    ]
    busy = sum((w[1] - w[0]) / 1e9 for ws in windows.values() for w in ws)
    span = (
        max(w[1] for ws in windows.values() for w in ws) - min(w[0] for ws in windows.values() for w in ws)
    ) / 1e9
    return {
        "phones": phones,
        "run_s": seconds,
        "runs": done,
        "exit_code": summary.exit_code,
        "wall_s": round(wall, 2),
        "overhead_median_s": round(statistics.median(gaps), 3) if gaps else None,
        "overhead_mean_s": round(statistics.fmean(gaps), 3) if gaps else None,
        "round_trips_median": statistics.median(trips.round_trips) if trips.round_trips else None,
        "round_trips_max": max(trips.round_trips, default=None),
        "cpu_ms_per_run": round(1000 * cpu / max(1, done), 1),
        # the same without each phone's once-per-sweep preparation (probe, deploy)
        "cpu_ms_per_run_steady": round(1000 * (cpu - trips.cpu_s["prepare"]) / max(1, done), 1),
        "cpu_ms_per_run_in_attempt": round(1000 * trips.cpu_s["execute"] / max(1, done), 1),
        "cpu_ms_per_run_in_metrics": round(1000 * trips.cpu_s["metrics"] / max(1, done), 1),
        "cpu_ms_per_phone_prepare": round(1000 * trips.cpu_s["prepare"] / phones, 1),
        "utilisation": round(busy / (len(windows) * span), 3) if span > 0 else None,
        "utilisation_wall": round(busy / (phones * wall), 3),
        "load_average": os.getloadavg(),
        "attempts_not_done": len(rows),
        "not_done_reasons": not_done[:10],
    }


def main() -> None:
    server = start_adb_server(free_tcp_port())
    sweeps = []
    try:
        with tempfile.TemporaryDirectory(prefix="farm-bench-overhead-") as tmp:
            for phones in PHONE_COUNTS:
                for seconds in RUN_SECONDS:
                    sweeps.append(bench_sweep(server.port, Path(tmp), phones, seconds))
                    print(json.dumps(sweeps[-1]), flush=True)
    finally:
        kill_adb_server(server)
    rows = []
    for s in sweeps:
        label = f"{s['phones']} phones x {s['run_s']:g} s idle ({s['runs']} runs)"
        rows += [
            (
                f"{label}: overhead per run, median (goal <= {GOALS['overhead_s']} s)",
                f"{s['overhead_median_s']} s",
            ),
            (
                f"{label}: adb round trips per run (goal <= {GOALS['round_trips']})",
                f"{s['round_trips_median']}",
            ),
            (
                f"{label}: coordinator CPU per run (goal <= {GOALS['cpu_ms']:g} ms)",
                f"{s['cpu_ms_per_run']} ms",
            ),
            (f"{label}: utilisation (goal >= 90% at 32 x 10 s)", f"{s['utilisation']:.1%}"),
            (f"{label}: utilisation over the whole wall time", f"{s['utilisation_wall']:.1%}"),
            (f"{label}: load average 1/5/15 min", " ".join(f"{x:.1f}" for x in s["load_average"])),
        ]
    report(OUT, "overhead", rows, {"goals": GOALS, "sweeps": sweeps}, ROOT)


if __name__ == "__main__":
    main()
