"""Benchmark: virtual phones through the real Debian adb.

1. push and pull of a 100 MB random file to one phone (MB/s, median of 3; sha256 checked);
2. idle CPU of 32 phones over 10 s (daemon + every phone process, % of one core);
3. wall time of `farm virtual up --count 16` (until all 16 show `device`), and of `down`;
4. the phones' own CPU per benchmark run: 8 phones through a `farm run` sweep of short LSTM runs,
   CPU of the daemon process (physics, ADB servers) over the sweep / its runs (the phones'
   processes, benchmarks included, exit into their init, whose children's time /proc omits).
5. clock nodes of rooted phones over FUSE against plain files: `up` of 4 sd865 phones, and a
   `cat` of scaling_governor (FUSE-served) and scaling_cur_freq (always a plain file) in the phone.
Uses a private adb server and temporary state dirs; stops everything it starts.
Prints a table and writes results/bench/bench_virtual.json.
Run: .venv/bin/python tests/bench/bench_virtual.py
"""

from __future__ import annotations

import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from vphone.physics import CLOCK_FUSE_ENV  # noqa: E402
from vphone.testing.phones import free_tcp_port, kill_adb_server, start_adb_server  # noqa: E402

from farm.store import Store  # noqa: E402
from tests.bench.bench_orchestrator import RUNS_PER_PHONE, SHORT_PARAMS, SHORT_RUN, _run_farm  # noqa: E402
from tests.bench.table import report  # noqa: E402
from tests.e2e.farm_cli import fast_lstm, write_experiment  # noqa: E402
from vphone import control  # noqa: E402

OUT = ROOT / "results" / "bench" / "bench_virtual.json"
FILE_MB = 100
REPEATS = 3
IDLE_PHONES = 32
IDLE_WINDOW_S = 10.0
UP_COUNT = 16
RUN_PHONES = 8
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_ticks_of(pid: int) -> int:
    """utime+stime of one process (all its threads)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def cpu_ticks_of_tree(root_pid: int) -> int:
    """utime+stime of root_pid and all its descendants (children found through /proc ppid)."""
    stats: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        stats[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    tree, frontier = {root_pid}, [root_pid]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _) in stats.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    return sum(stats[pid][1] for pid in tree if pid in stats)


def adb(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["adb", "-P", str(port), *args], capture_output=True, text=True, timeout=600, check=True
    )


def bench_transfer(adb_port: int, work: Path) -> dict[str, float]:
    state = control.start_daemon(work / "transfer", ["adreno-sd8gen2"], adb_port=adb_port)
    try:
        control.connect_phones(state.phones, adb_port)
        serial = state.phones[0].adb_serial
        source = work / "blob.bin"
        source.write_bytes(os.urandom(FILE_MB * 1024 * 1024))
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        push, pull = [], []
        for _ in range(REPEATS):
            start = time.perf_counter()
            adb(adb_port, "-s", serial, "push", str(source), "/data/local/tmp/blob.bin")
            push.append(FILE_MB / (time.perf_counter() - start))
            back = work / "back.bin"
            start = time.perf_counter()
            adb(adb_port, "-s", serial, "pull", "/data/local/tmp/blob.bin", str(back))
            pull.append(FILE_MB / (time.perf_counter() - start))
            assert hashlib.sha256(back.read_bytes()).hexdigest() == digest, "pulled bytes differ"
            back.unlink()
        return {"push_mb_s": statistics.median(push), "pull_mb_s": statistics.median(pull)}
    finally:
        control.disconnect_phones(state.phones, adb_port)
        control.stop_daemon(state)


def bench_idle(adb_port: int, work: Path) -> dict[str, float]:
    state = control.start_daemon(
        work / "idle", ["adreno-sd8gen2", "mali-tensor"] * (IDLE_PHONES // 2), adb_port=adb_port
    )
    try:
        control.connect_phones(state.phones, adb_port, timeout_s=120)
        time.sleep(2.0)  # let start-up work settle
        before, start = cpu_ticks_of_tree(state.pid), time.monotonic()
        time.sleep(IDLE_WINDOW_S)
        ticks, elapsed = cpu_ticks_of_tree(state.pid) - before, time.monotonic() - start
        percent = 100.0 * ticks / CLK_TCK / elapsed
        return {"idle_cpu_percent_of_core": percent, "idle_cpu_percent_per_phone": percent / IDLE_PHONES}
    finally:
        control.disconnect_phones(state.phones, adb_port)
        control.stop_daemon(state)


def bench_run_cpu(adb_port: int, work: Path) -> dict[str, float]:
    state = control.start_daemon(
        work / "runs", ["adreno-sd8gen2", "mali-tensor"] * (RUN_PHONES // 2), adb_port=adb_port
    )
    try:
        control.connect_phones(state.phones, adb_port, timeout_s=120)
        levels = ", ".join(str(8 + i) for i in range(RUNS_PER_PHONE))
        spec = write_experiment(
            work, "runcpu", fast_lstm(f"{{hidden: [{levels}]}}", SHORT_RUN, params=SHORT_PARAMS)
        )
        before = cpu_ticks_of(state.pid)
        wall_s, _ = _run_farm(adb_port, work / "runcpu", spec)
        cpu_s = (cpu_ticks_of(state.pid) - before) / CLK_TCK
        with Store.in_results(work / "runcpu") as store:
            runs = store.query("SELECT count(*) AS n FROM runs WHERE state = 'DONE'")[0]["n"]
        return {
            "run_count": runs,
            "run_sweep_wall_s": wall_s,
            "run_daemon_cpu_per_run_ms": 1000 * cpu_s / max(1, runs),
        }
    finally:
        control.disconnect_phones(state.phones, adb_port)
        control.stop_daemon(state)


def bench_up(adb_port: int, work: Path) -> dict[str, float]:
    env = {**os.environ, "FARM_VIRTUAL_DIR": str(work / "up"), "PYTHONPATH": str(ROOT)}
    farm = [sys.executable, "-m", "farm", "virtual"]
    start = time.perf_counter()
    subprocess.run(
        [*farm, "up", "--count", str(UP_COUNT), "--adb-port", str(adb_port)],
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    up_s = time.perf_counter() - start
    start = time.perf_counter()
    subprocess.run(
        [*farm, "down", "--adb-port", str(adb_port)], env=env, check=True, capture_output=True, timeout=600
    )
    return {"up_16_s": up_s, "down_16_s": time.perf_counter() - start}


CLOCK_PHONES = 4  # rooted (adreno-sd865): 26 clock nodes each, over FUSE unless switched off
CLOCK_READS = 300
_READS = "i=0; while [ $i -lt {n} ]; do cat {node} >/dev/null; i=$((i+1)); done"
POLICY = "/sys/devices/system/cpu/cpufreq/policy0"


def _in_phone_s(adb_port: int, serial: str, script: str) -> float:
    """Seconds a script takes inside the phone (its own clock: adb's round trip is not in it)."""
    out = adb(adb_port, "-s", serial, "shell", f"s=$(date +%s%N); {script}; e=$(date +%s%N); echo $((e - s))")
    return int(out.stdout.split()[-1]) / 1e9


def bench_clock_nodes(adb_port: int, work: Path) -> dict[str, float]:
    """Up of CLOCK_PHONES rooted phones with the clock nodes over FUSE and as plain files, and
    the cost of a `cat` of a FUSE node (scaling_governor) against a plain one (scaling_cur_freq)."""
    samples: dict[str, list[float]] = {}
    # Both orders (plain, fuse, fuse, plain): the first start of a run pays for cold caches.
    for i, fuse in enumerate((False, True, True, False)):
        os.environ[CLOCK_FUSE_ENV] = "1" if fuse else "0"
        key = "fuse" if fuse else "plain"
        start = time.perf_counter()
        state = control.start_daemon(work / f"clocks-{i}", ["adreno-sd865"] * CLOCK_PHONES, adb_port=adb_port)
        try:
            control.connect_phones(state.phones, adb_port, timeout_s=120)
            samples.setdefault(f"clock_up_{key}_s", []).append(time.perf_counter() - start)
            serial = state.phones[0].adb_serial
            for name, node in (
                ("governor", f"{POLICY}/scaling_governor"),
                ("cur_freq", f"{POLICY}/scaling_cur_freq"),
            ):
                took = _in_phone_s(adb_port, serial, _READS.format(n=CLOCK_READS, node=node))
                samples.setdefault(f"clock_cat_{name}_{key}_ms", []).append(1000 * took / CLOCK_READS)
        finally:
            os.environ.pop(CLOCK_FUSE_ENV, None)
            control.disconnect_phones(state.phones, adb_port)
            control.stop_daemon(state)
    return {key: statistics.mean(values) for key, values in samples.items()}


def main() -> None:
    server = start_adb_server(free_tcp_port())
    results: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench_virtual_") as tmp:
            work = Path(tmp)
            results.update(bench_transfer(server.port, work))
            results.update(bench_up(server.port, work))
            results.update(bench_idle(server.port, work))
            results.update(bench_run_cpu(server.port, work))
            results.update(bench_clock_nodes(server.port, work))
    finally:
        kill_adb_server(server)
    rows = [
        (f"push {FILE_MB} MB (Debian adb)", f"{results['push_mb_s']:.0f} MB/s"),
        (f"pull {FILE_MB} MB (Debian adb)", f"{results['pull_mb_s']:.0f} MB/s"),
        (f"farm virtual up --count {UP_COUNT}", f"{results['up_16_s']:.1f} s"),
        (f"farm virtual down ({UP_COUNT} phones)", f"{results['down_16_s']:.1f} s"),
        (
            f"idle CPU, {IDLE_PHONES} phones, {IDLE_WINDOW_S:.0f} s",
            f"{results['idle_cpu_percent_of_core']:.1f} % of a core",
        ),
        ("idle CPU per phone", f"{results['idle_cpu_percent_per_phone']:.2f} % of a core"),
        (
            f"daemon CPU per run ({RUN_PHONES} phones, {results['run_count']} short runs)",
            f"{results['run_daemon_cpu_per_run_ms']:.0f} ms",
        ),
    ]
    for key in ("plain", "fuse"):
        rows += [
            (f"up {CLOCK_PHONES} rooted phones, clock nodes {key}", f"{results[f'clock_up_{key}_s']:.1f} s"),
            (
                f"cat scaling_governor in the phone ({key})",
                f"{results[f'clock_cat_governor_{key}_ms']:.2f} ms",
            ),
            (
                f"cat scaling_cur_freq in the phone ({key})",
                f"{results[f'clock_cat_cur_freq_{key}_ms']:.2f} ms",
            ),
        ]
    report(OUT, "virtual", rows, results, ROOT)


if __name__ == "__main__":
    main()
