"""Benchmark: the virtual phones' SoC (clocks, heat, CPU budgets), measured with the kernels' own
per-iteration timestamps.

1. isolation: gemm latency on phone A alone vs while three neighbours run heavy OpenCL work; four
   phones with budgets that fit this host (cpu 0.2 + gpu 0.2 cores each); median of 5 runs, cpu
   and gpu backends;
2. pinned clocks: a rooted sd865 phone's gemm (cpu) at top clocks vs every policy pinned to its
   lowest frequency, against the ratio its own sysfs nodes predict;
3. heat: the hot profile under a sustained load: seconds until the first thermal cap, and gemm
   latency before vs while throttled.
On a shared host every number carries its neighbours' noise. Needs root (host cgroups).
Prints a table and writes results/bench/bench_physics.json.
Run: .venv/bin/python tests/bench/bench_physics.py
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from vphone.testing.opencl import C_FLAGS, CL_BUSY_SRC  # noqa: E402
from vphone.testing.socphone import (  # noqa: E402
    budgeted,
    install,
    kernel_binary,
    phone,
    read,
    run_gemm,
    su,
    wait_until,
)
from vphone.worldthread import WorldThread  # noqa: E402

from tests.bench.table import report  # noqa: E402

OUT = ROOT / "results" / "bench" / "bench_physics.json"
RUNS = 5
PHONES = 4
CPU_BUDGET, GPU_BUDGET = 0.2, 0.2
# Runs long enough (~1 s at the budget) that the 20 ms CFS periods average out.
CPU_ARGS = ("--m=256", "--n=256", "--k=256", "--warmup=2", "--iters=30")
GPU_ARGS = ("--m=512", "--n=512", "--k=512", "--warmup=2", "--iters=20", "--cl-cache=/data/local/tmp/clcache")
PIN_ARGS = ("--m=200", "--n=200", "--k=200", "--warmup=2", "--iters=40")


def _spawn(w: WorldThread, command: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        w.world.shell_argv(command),
        env=w.world.shell_env(None),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)


def bench_isolation(work: Path, cl_busy: Path) -> dict[str, float]:
    profile = budgeted("adreno-sd8gen2", cpu=CPU_BUDGET, gpu=GPU_BUDGET)
    phones = [phone(profile, f"VPBENCH{i}", work) for i in range(PHONES)]
    for p in phones:
        p.__enter__()
    try:
        a, neighbours = phones[0], phones[1:]
        gemm = install(a, kernel_binary("gemm"))
        busy = [install(n, cl_busy) for n in neighbours]
        run_gemm(a, gemm, *GPU_ARGS, backend="gpu")  # compile the kernels once (PoCL's cache)
        result: dict[str, float] = {}
        for backend, args in (("cpu", CPU_ARGS), ("gpu", GPU_ARGS)):
            # Alone and loaded runs alternate, so the host's own background drifts into both.
            alone, loaded = [], []
            for _ in range(RUNS):
                alone.append(run_gemm(a, gemm, *args, backend=backend).per_iteration_s * 1000)
                load = [_spawn(n, f"{b} --seconds=600") for n, b in zip(neighbours, busy, strict=True)]
                try:
                    time.sleep(1.5)  # the neighbours' OpenCL is compiled and looping
                    loaded.append(run_gemm(a, gemm, *args, backend=backend).per_iteration_s * 1000)
                finally:
                    _stop(load)
            result[f"isolation_{backend}_alone_ms"] = statistics.median(alone)
            result[f"isolation_{backend}_loaded_ms"] = statistics.median(loaded)
            result[f"isolation_{backend}_change_pct"] = 100 * (
                statistics.median(loaded) / statistics.median(alone) - 1
            )
        result["host_load_average"] = os.getloadavg()[0]
        return result
    finally:
        for p in phones:
            p.__exit__()


def bench_pinned(work: Path) -> dict[str, float]:
    with phone(budgeted("adreno-sd865", cpu=0.25), "VPBENCHP", work) as w:
        gemm = install(w, kernel_binary("gemm"))
        policies = [f"/sys/devices/system/cpu/cpufreq/policy{c}" for c in w.world.profile.cpu.first_cpus()]
        top = statistics.median(run_gemm(w, gemm, *PIN_ARGS).per_iteration_s for _ in range(3))
        su(w, " ".join(f"echo 0 > {p}/scaling_max_freq;" for p in policies))
        speeds = []
        for p in policies:
            related = read(w, f"{p}/related_cpus").split()[0]
            capacity = int(read(w, f"/sys/devices/system/cpu/cpu{related}/cpu_capacity"))
            speeds.append(
                capacity * int(read(w, f"{p}/scaling_max_freq")) / int(read(w, f"{p}/cpuinfo_max_freq"))
            )
        expected = 1024 / max(speeds)
        cg = w.world.cgroups
        assert cg is not None
        wait_until(lambda: abs((cg.quota_cores("cpu") or 0) - 0.25 / expected) < 1e-3, "the pinned quota")
        pinned = statistics.median(run_gemm(w, gemm, *PIN_ARGS).per_iteration_s for _ in range(3))
        return {
            "pinned_top_ms": top * 1000,
            "pinned_min_ms": pinned * 1000,
            "pinned_ratio": pinned / top,
            "pinned_expected_ratio": expected,
        }


def bench_heat(work: Path) -> dict[str, float]:
    with phone(budgeted("adreno-sd888-hot", cpu=0.5), "VPBENCHH", work) as w:
        gemm = install(w, kernel_binary("gemm"))
        prime = "/sys/devices/system/cpu/cpufreq/policy7"
        cool = statistics.median(run_gemm(w, gemm, *PIN_ARGS).per_iteration_s for _ in range(3))
        load = [_spawn(w, "while :; do :; done")]
        try:
            start = time.monotonic()
            wait_until(
                lambda: read(w, prime + "/scaling_max_freq") != read(w, prime + "/cpuinfo_max_freq"),
                "a cap",
                300,
            )
            to_throttle = time.monotonic() - start
            time.sleep(3.0)  # let step_wise settle into its cap
            hot = statistics.median(run_gemm(w, gemm, *PIN_ARGS).per_iteration_s for _ in range(3))
            status = read(w, "/dev/.farm/thermalservice.txt").split("Thermal Status: ")[1].split()[0]
        finally:
            _stop(load)
        return {
            "heat_seconds_to_throttle": to_throttle,
            "heat_cool_ms": cool * 1000,
            "heat_throttled_ms": hot * 1000,
            "heat_latency_change_pct": 100 * (hot - cool) / cool,
            "heat_thermal_status": float(status),
        }


def main() -> None:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench_physics_") as tmp:
        work = Path(tmp)
        cl_busy = work / "cl_busy"
        subprocess.run(["gcc", *C_FLAGS, "-o", str(cl_busy), str(CL_BUSY_SRC), "-lOpenCL"], check=True)
        results.update(bench_isolation(work, cl_busy))
        results.update(bench_pinned(work))
        results.update(bench_heat(work))
    rows = [
        (
            f"gemm cpu on phone A, alone ({RUNS} runs, median)",
            f"{results['isolation_cpu_alone_ms']:.2f} ms/iter",
        ),
        ("... with 3 neighbours busy on OpenCL", f"{results['isolation_cpu_loaded_ms']:.2f} ms/iter"),
        ("... change", f"{results['isolation_cpu_change_pct']:+.1f} %"),
        ("gemm gpu on phone A, alone", f"{results['isolation_gpu_alone_ms']:.2f} ms/iter"),
        ("... with 3 neighbours busy on OpenCL", f"{results['isolation_gpu_loaded_ms']:.2f} ms/iter"),
        ("... change", f"{results['isolation_gpu_change_pct']:+.1f} %"),
        ("host load average (1 min) after the isolation runs", f"{results['host_load_average']:.1f}"),
        ("sd865 gemm cpu at top clocks", f"{results['pinned_top_ms']:.2f} ms/iter"),
        ("... every policy pinned to its lowest", f"{results['pinned_min_ms']:.2f} ms/iter"),
        (
            "... ratio (expected from sysfs)",
            f"{results['pinned_ratio']:.2f} ({results['pinned_expected_ratio']:.2f})",
        ),
        ("hot profile: seconds to the first cap", f"{results['heat_seconds_to_throttle']:.1f} s"),
        (
            "... gemm cool -> throttled",
            f"{results['heat_cool_ms']:.2f} -> {results['heat_throttled_ms']:.2f} ms/iter",
        ),
        (
            "... change, Thermal Status",
            f"{results['heat_latency_change_pct']:+.0f} %, {results['heat_thermal_status']:.0f}",
        ),
    ]
    report(OUT, "physics", rows, results, ROOT)


if __name__ == "__main__":
    main()
