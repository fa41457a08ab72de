"""Benchmark: rooted phones' cgroup trees over FUSE (cgroupfs.py) against the plain trees.

For each mode (plain, fuse, fuse, plain: the first start pays for cold caches), through the real
Debian adb and a private adb server:
1. `up` of 4 rooted sd865 phones (daemon start until all show `device`);
2. `cat /dev/cpuset/top-app/tasks` in the phone (its own clock, mean of 100);
3. the round trip of one `su -c 'mkdir G && echo 0-3 > G/cpus && echo 0 > G/mems && echo $$ >
   G/tasks'` through adb (mean of 10; plain trees: the writes may precede the group's layout, so
   this measures the command, not a working group).
Prints a table and writes results/bench/bench_cgroupfs.json.
Run: .venv/bin/python tests/bench/bench_cgroupfs.py
"""

from __future__ import annotations

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

from vphone.cgroupfs import CGROUP_FUSE_ENV  # noqa: E402
from vphone.testing.phones import free_tcp_port, kill_adb_server, start_adb_server  # noqa: E402

from tests.bench.bench_virtual import _in_phone_s  # noqa: E402
from tests.bench.table import report  # noqa: E402
from vphone import control  # noqa: E402

OUT = ROOT / "results" / "bench" / "bench_cgroupfs.json"
PHONES = 4
READS = 100
MKDIRS = 10
_READS = "i=0; while [ $i -lt {n} ]; do cat /dev/cpuset/top-app/tasks >/dev/null; i=$((i+1)); done"
_MKDIR = "su -c 'mkdir {g} && echo 0-3 > {g}/cpus && echo 0 > {g}/mems && echo $$ > {g}/tasks'"


def bench(adb_port: int, work: Path) -> dict[str, float]:
    samples: dict[str, list[float]] = {}
    for i, fuse in enumerate((False, True, True, False)):
        os.environ[CGROUP_FUSE_ENV] = "1" if fuse else "0"
        key = "fuse" if fuse else "plain"
        start = time.perf_counter()
        state = control.start_daemon(work / f"cg-{i}", ["adreno-sd865"] * PHONES, adb_port=adb_port)
        try:
            control.connect_phones(state.phones, adb_port, timeout_s=120)
            samples.setdefault(f"up_{key}_s", []).append(time.perf_counter() - start)
            serial = state.phones[0].adb_serial
            took = _in_phone_s(adb_port, serial, _READS.format(n=READS))
            samples.setdefault(f"cat_tasks_{key}_ms", []).append(1000 * took / READS)
            for n in range(MKDIRS):
                start = time.perf_counter()
                # Not checked: in the plain trees the writes may precede the layout and fail.
                subprocess.run(
                    ["adb", "-P", str(adb_port), "-s", serial, "shell", _MKDIR.format(g=f"/dev/cpuset/b{n}")],
                    capture_output=True,
                    timeout=120,
                    check=False,
                )
                took_ms = 1000 * (time.perf_counter() - start)
                samples.setdefault(f"mkdir_round_trip_{key}_ms", []).append(took_ms)
        finally:
            os.environ.pop(CGROUP_FUSE_ENV, None)
            control.disconnect_phones(state.phones, adb_port)
            control.stop_daemon(state)
    return {key: statistics.mean(values) for key, values in samples.items()}


def main() -> None:
    server = start_adb_server(free_tcp_port())
    results: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench_cgroupfs_") as tmp:
            results.update(bench(server.port, Path(tmp)))
    finally:
        kill_adb_server(server)
    results["load_average_1m"] = os.getloadavg()[0]
    rows = []
    for key in ("plain", "fuse"):
        rows += [
            (f"up {PHONES} rooted phones, cgroup trees {key}", f"{results[f'up_{key}_s']:.1f} s"),
            (
                f"cat /dev/cpuset/top-app/tasks in the phone ({key})",
                f"{results[f'cat_tasks_{key}_ms']:.2f} ms",
            ),
            (
                f"su mkdir + cpus + mems + move $$ via adb ({key})",
                f"{results[f'mkdir_round_trip_{key}_ms']:.1f} ms",
            ),
        ]
    rows.append(("load average (1 min) at the end", f"{results['load_average_1m']:.1f}"))
    report(OUT, "cgroupfs", rows, results, ROOT)


if __name__ == "__main__":
    main()
