"""Benchmark: what farm's orchestration costs, on virtual phones through the real adb server.

1. overhead per run on one phone: time between the end of one benchmark process and the start of
   the next (from the benchmark's own CLOCK_MONOTONIC events), minus the configured waits
   (cooldown wait recorded in env.json; no background load, so no settle time);
2. phone utilisation with 16 and 32 phones running short runs: benchmark-process time / (phones x
   sweep wall time), measured from the first to the last benchmark event of the sweep;
3. push of a 20 MB program, cold (not on the phone) and cached (same sha256 already there).

On this shared 2-core machine the phones' processes, the adb server and farm share the CPUs, so the
numbers are an upper bound of farm's cost, not a phone's. FARM_BENCH_PHONES="4 8" overrides the
phone counts. Prints a table and writes results/bench/bench_orchestrator.json.
Run: .venv/bin/python tests/bench/bench_orchestrator.py
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from vphone.testing.phones import free_tcp_port, kill_adb_server, start_adb_server  # noqa: E402

from farm.device.session import DeviceSession  # noqa: E402
from farm.store import Store  # noqa: E402
from tests.e2e.farm_cli import fast_lstm, write_experiment  # noqa: E402
from vphone import control  # noqa: E402

OUT = ROOT / "results" / "bench" / "bench_orchestrator.json"
OVERHEAD_RUNS = 10
PHONE_COUNTS = [int(n) for n in os.environ.get("FARM_BENCH_PHONES", "16 32").split()]
RUNS_PER_PHONE = 4
# Short runs of about a second each (a few hundred LSTM iterations), as a quick sweep has.
SHORT_RUN = "{warmup: 1, iterations: 5, min_seconds: 1, max_seconds: 10, repetitions: 1}"
SHORT_PARAMS = "layers: 1, seq_len: 64, input_dim: 9, classes: 6, batch: 1, backend: cpu"
PUSH_MB = 20


def _run_farm(adb_port: int, results: Path, spec: Path) -> tuple[float, float]:
    """Runs `farm run`; returns (wall seconds, CPU seconds of the farm process itself)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "farm",
            "run",
            str(spec),
            "--no-live",
            "--json",
            "--adb-port",
            str(adb_port),
            "--results",
            str(results),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"farm run failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}")
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench_windows(
    results: Path, experiment: str, *, only_event: str | None = None
) -> dict[str, list[tuple[int, int, float]]]:
    """Per phone, in order: (first stamp ns, last stamp ns, cooldown wait s) of every DONE run,
    from all its stamped events or only those named `only_event` (e.g. "iter": the measured ones)."""
    per_phone: dict[str, list[tuple[int, int, float]]] = {}
    with Store.in_results(results) as store:
        rows = store.query(
            "SELECT ran_on, artifacts_dir FROM runs WHERE experiment = ? AND state = 'DONE'", (experiment,)
        )
    for row in rows:
        folder = results / row["artifacts_dir"]
        stamps = []
        for line in (folder / "stdout.jsonl").read_text().splitlines():
            event = json.loads(line)
            if only_event is not None and event.get("event") != only_event:
                continue
            stamps += [event[k] for k in ("t_ns", "t_start_ns", "t_end_ns") if isinstance(event.get(k), int)]
        env = json.loads((folder / "env.json").read_text())
        if stamps:
            per_phone.setdefault(row["ran_on"], []).append(
                (min(stamps), max(stamps), float(env.get("cooldown_waited_s") or 0.0))
            )
    return {phone: sorted(windows) for phone, windows in per_phone.items()}


def bench_overhead(adb_port: int, work: Path) -> dict[str, Any]:
    state = control.start_daemon(work / "vp1", ["adreno-nexus6p"], adb_port=adb_port)
    try:
        control.connect_phones(state.phones, adb_port)
        levels = ", ".join(str(8 + i) for i in range(OVERHEAD_RUNS))
        spec = write_experiment(work, "overhead", fast_lstm(f"{{hidden: [{levels}]}}"))
        _run_farm(adb_port, work / "r1", spec)
        windows = next(iter(bench_windows(work / "r1", "overhead").values()))
        gaps = [(b[0] - a[1]) / 1e9 - b[2] for a, b in itertools.pairwise(windows)]
        return {
            "runs": len(windows),
            "overhead_median_s": statistics.median(gaps),
            "overhead_max_s": max(gaps),
            "bench_median_s": statistics.median((w[1] - w[0]) / 1e9 for w in windows),
        }
    finally:
        control.disconnect_phones(state.phones, adb_port)
        control.stop_daemon(state)


def bench_utilisation(adb_port: int, work: Path, phones: int) -> dict[str, Any]:
    state = control.start_daemon(
        work / f"vp{phones}", (["adreno-nexus6p", "adreno-sd8gen2"] * phones)[:phones], adb_port=adb_port
    )
    try:
        control.connect_phones(state.phones, adb_port)
        name = f"util{phones}"
        levels = ", ".join(str(8 + i) for i in range(RUNS_PER_PHONE))
        body = fast_lstm(f"{{hidden: [{levels}]}}", SHORT_RUN, params=SHORT_PARAMS)
        spec = write_experiment(work, name, body)
        wall, cpu = _run_farm(adb_port, work / name, spec)
        windows = bench_windows(work / name, name)
        start = min(w[0] for ws in windows.values() for w in ws)
        end = max(w[1] for ws in windows.values() for w in ws)
        busy = sum((w[1] - w[0]) / 1e9 for ws in windows.values() for w in ws)
        return {
            "phones": len(windows),
            "runs": sum(len(ws) for ws in windows.values()),
            "wall_s": wall,
            "sweep_s": (end - start) / 1e9,
            "utilisation": busy / (len(windows) * (end - start) / 1e9),
            "farm_cpu_s": cpu,
            "farm_cpu_per_run_s": cpu / max(1, sum(len(ws) for ws in windows.values())),
        }
    finally:
        control.disconnect_phones(state.phones, adb_port)
        control.stop_daemon(state)


def bench_push(adb_port: int, work: Path) -> dict[str, Any]:
    state = control.start_daemon(work / "vpush", ["adreno-nexus6p"], adb_port=adb_port)
    try:
        control.connect_phones(state.phones, adb_port)
        import adbutils

        device = adbutils.AdbClient(host="127.0.0.1", port=adb_port).device(state.phones[0].adb_serial)
        session = DeviceSession(device, "local/bench", default_timeout_s=120)
        program = work / "program20mb"
        program.write_bytes(os.urandom(PUSH_MB * 1024 * 1024))
        started = time.monotonic()
        _, pushed = session.push_cached(program)
        cold = time.monotonic() - started
        started = time.monotonic()
        _, pushed_again = session.push_cached(program)
        cached = time.monotonic() - started
        assert pushed and not pushed_again
        return {"size_mb": PUSH_MB, "cold_s": cold, "cached_s": cached, "cold_mb_per_s": PUSH_MB / cold}
    finally:
        control.disconnect_phones(state.phones, adb_port)
        control.stop_daemon(state)


def main() -> None:
    server = start_adb_server(free_tcp_port())
    results: dict[str, Any] = {"phone_counts": PHONE_COUNTS}
    try:
        with tempfile.TemporaryDirectory(prefix="farm-bench-orch-") as tmp:
            work = Path(tmp)
            results["push"] = bench_push(server.port, work)
            results["overhead"] = bench_overhead(server.port, work)
            results["utilisation"] = [bench_utilisation(server.port, work, n) for n in PHONE_COUNTS]
    finally:
        kill_adb_server(server)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2))
    push, over = results["push"], results["overhead"]
    print(f"{'measure':<44} {'value':>12}")
    print(f"{'push 20 MB program, cold (s)':<44} {push['cold_s']:>12.2f}")
    print(f"{'push 20 MB program, cached (s)':<44} {push['cached_s']:>12.3f}")
    print(f"{'overhead between runs, median (s)':<44} {over['overhead_median_s']:>12.2f}")
    print(f"{'overhead between runs, max (s)':<44} {over['overhead_max_s']:>12.2f}")
    print(f"{'benchmark process, median (s)':<44} {over['bench_median_s']:>12.3f}")
    for util in results["utilisation"]:
        label = f"utilisation, {util['phones']} phones x {RUNS_PER_PHONE} runs"
        print(f"{label:<44} {util['utilisation']:>11.1%}")
        print(f"{'  sweep wall time (s)':<44} {util['sweep_s']:>12.1f}")
        print(f"{'  farm process CPU per run (s)':<44} {util['farm_cpu_per_run_s']:>12.3f}")
    print(f"written {OUT}")


if __name__ == "__main__":
    main()
