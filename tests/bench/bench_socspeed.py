"""Benchmark: virtual SoCs keep their real relative speeds (issue 29, item 2).

Per shipped profile, one phone (its profile's throughput block, this host's calibration) runs
the gemm program three ways: the cpu backend pinned to the fastest core (taskset), cpu-mt with a
thread per CPU, and the gpu backend (PoCL). The measured GFLOP/s ratios
  GPU / 1 big core, GPU / all cores, all cores / 1 big core
are printed against the profile's published ones: each within 20%, or a ratio the phone says
this host cannot hold (ro.vphone.unheld_ratios, daemon.log), with the factor it runs slower than
the real SoC (ro.vphone.slowdown). On a shared host a busy neighbour takes CPU time from the
cgroups' quotas (the quotas are caps), which lowers the measured speeds it falls on.
Needs root (host cgroups). Prints a table and writes results/bench/bench_socspeed.json.
Run: .venv/bin/python tests/bench/bench_socspeed.py [PROFILE ...]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from vphone.profiles import PROFILES_DIR, load_profile  # noqa: E402
from vphone.socspeed import Ratio, profile_speeds  # noqa: E402
from vphone.testing.socphone import install, kernel_binary, phone, run_gemm  # noqa: E402

from tests.bench.table import report  # noqa: E402

OUT = ROOT / "results" / "bench" / "bench_socspeed.json"
SIZE = 256
TOLERANCE = 0.20
# Long enough for many 20 ms CFS periods at any phone's share of a host core.
COMMON = (f"--m={SIZE}", f"--n={SIZE}", f"--k={SIZE}", "--warmup=1", "--iters=3", "--min-seconds=2")
GPU_ARGS = ("--transfers=once", "--cl-cache=/data/local/tmp/clcache")


def _fastest_cpu_mask(name: str) -> str:
    profile = load_profile(name)
    firsts = profile.cpu.first_cpus()
    best = max(range(len(profile.cpu.clusters)), key=lambda i: profile.cpu.clusters[i].capacity)
    return f"{1 << firsts[best]:x}"


def measure(name: str, serial: str, state: Path) -> dict[str, Any]:
    profile = load_profile(name)
    flop = 2.0 * SIZE**3
    with phone(profile, serial, state) as w:
        if w.world.cgroups is None:
            raise SystemExit(f"no host cgroups here: {w.world.budget_note}")
        gemm = install(w, kernel_binary("gemm"))
        props = {
            k: w.sh(f"getprop {k}").stdout.strip() for k in ("ro.vphone.slowdown", "ro.vphone.unheld_ratios")
        }
        plan = w.world.physics.plan
        big = run_gemm(w, f"taskset {_fastest_cpu_mask(name)} {gemm}", *COMMON, backend="cpu", timeout_s=300)
        every = run_gemm(w, gemm, *COMMON, f"--threads={profile.cpu.ncpu}", backend="cpu-mt", timeout_s=300)
        gflops = {
            "big_core": flop / big.per_iteration_s / 1e9,
            "all_cores": flop / every.per_iteration_s / 1e9,
        }
        if profile.has_opencl:
            gpu = run_gemm(w, gemm, *COMMON, *GPU_ARGS, backend="gpu", timeout_s=300)
            gflops["gpu"] = flop / gpu.per_iteration_s / 1e9
    speeds = profile_speeds(profile)
    assert speeds is not None
    measured = {
        Ratio.GPU_PER_BIG_CORE: gflops["gpu"] / gflops["big_core"] if "gpu" in gflops else None,
        Ratio.GPU_PER_ALL_CORES: gflops["gpu"] / gflops["all_cores"] if "gpu" in gflops else None,
        Ratio.ALL_CORES_PER_BIG_CORE: gflops["all_cores"] / gflops["big_core"],
    }
    unheld = {u.ratio: u for u in plan.unheld}
    ratios = {}
    for ratio, got in measured.items():
        want = speeds.ratio(ratio)
        if want is None or got is None:
            continue
        held = unheld[ratio].held if ratio in unheld else want
        ratios[ratio.name.lower()] = {
            "profile": want,
            "held": held,
            "measured": got,
            "within_20pct": abs(got / held - 1) <= TOLERANCE,
            "unheld_why": unheld[ratio].why if ratio in unheld else None,
        }
    return {
        "gflops": gflops,
        "props": props,
        "slowdown": plan.slowdown,
        "host_cores": {"big_core": plan.core_cores, "all_cores": plan.cpu_cores, "gpu": plan.gpu_cores},
        "ratios": ratios,
    }


def main() -> None:
    names = sys.argv[1:] or sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
    results: dict[str, Any] = {"load_start": os.getloadavg()[0]}
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-socspeed-") as tmp:
        for i, name in enumerate(names):
            r = measure(name, f"VPSPD{i:02d}", Path(tmp))
            results[name] = r
            rows.append(
                (
                    f"{name} slowdown",
                    f"{r['slowdown']:.3g}x (ro.vphone.slowdown {r['props']['ro.vphone.slowdown']})",
                )
            )
            for ratio, v in r["ratios"].items():
                verdict = "ok" if v["within_20pct"] else "OFF"
                held = "" if v["unheld_why"] is None else f" held {v['held']:.3g}: {v['unheld_why']}"
                rows.append(
                    (
                        f"{name} {ratio}",
                        f"profile {v['profile']:.3g} measured {v['measured']:.3g} {verdict}{held}",
                    )
                )
    results["load_end"] = os.getloadavg()[0]
    report(OUT, "bench_socspeed", rows, results, ROOT)


if __name__ == "__main__":
    main()
