"""Benchmark: virtual SoCs keep their real relative speeds (issue 29, item 2).

Per shipped profile, one phone (its profile's throughput block, this host's calibration) runs
the gemm program three ways: the cpu backend pinned to the fastest core (taskset), cpu-mt with a
thread per CPU, and the gpu backend (PoCL). The measured GFLOP/s ratios
  GPU / 1 big core, GPU / all cores, all cores / 1 big core
are printed against the profile's published ones: each within 20%, or a ratio the phone says
this host cannot hold (ro.vphone.unheld_ratios, daemon.log), with the factor it runs slower than
the real SoC (ro.vphone.slowdown). On a shared host a busy neighbour takes CPU time from the
cgroups' quotas (the quotas are caps), which lowers the measured speeds it falls on: each run
records the share of CFS periods its cgroup was throttled in (its quota bound: near 1 when the
host gave it all its quota, low when the host was too busy to) and its speed as a share of the
plan's (host cores x the calibration's GFLOP/s per host core).
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

from vphone.affinity import group_of  # noqa: E402
from vphone.calibration import host_calibration  # noqa: E402
from vphone.cgroup import CPU_GROUP, GPU_GROUP, PhoneCgroups  # noqa: E402
from vphone.profiles import PROFILES_DIR, load_profile  # noqa: E402
from vphone.socspeed import Ratio, profile_speeds  # noqa: E402
from vphone.testing.socphone import KernelTimes, install, kernel_binary, phone, run_gemm  # noqa: E402
from vphone.worldthread import WorldThread  # noqa: E402

from tests.bench.table import report  # noqa: E402

os.environ["VPHONE_SOC_SPEEDS"] = "1"  # the phones this bench starts keep their SoC's proportions (opt-in)

OUT = ROOT / "results" / "bench" / "bench_socspeed.json"
SIZE = 256
TOLERANCE = 0.20
# Long enough for many 20 ms CFS periods at any phone's share of a host core.
COMMON = (f"--m={SIZE}", f"--n={SIZE}", f"--k={SIZE}", "--warmup=1", "--iters=3", "--min-seconds=2")
GPU_ARGS = ("--transfers=once", "--cl-cache=/data/local/tmp/clcache")


def _fastest_cpu(name: str) -> int:
    profile = load_profile(name)
    firsts = profile.cpu.first_cpus()
    best = max(range(len(profile.cpu.clusters)), key=lambda i: profile.cpu.clusters[i].capacity)
    return firsts[best]


def _throttled_run(
    w: WorldThread, cg: PhoneCgroups, group: str, command: str, *args: str, backend: str
) -> tuple[KernelTimes, float]:
    """The run's times and the share of its cgroup's CFS periods that hit the quota."""
    before = cg.cpu_stat(group) if cg.group_dir(group).is_dir() else None
    times = run_gemm(w, command, *args, backend=backend, timeout_s=300)
    after = cg.cpu_stat(group)
    periods = after.nr_periods - (before.nr_periods if before else 0)
    throttled = after.nr_throttled - (before.nr_throttled if before else 0)
    return times, throttled / periods if periods else 0.0


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
        cg = w.world.cgroups
        assert cg is not None
        fastest = _fastest_cpu(name)
        big, big_thr = _throttled_run(
            w, cg, group_of((fastest,)), f"taskset {1 << fastest:x} {gemm}", *COMMON, backend="cpu"
        )
        every, all_thr = _throttled_run(
            w, cg, CPU_GROUP, gemm, *COMMON, f"--threads={profile.cpu.ncpu}", backend="cpu-mt"
        )
        gflops = {
            "big_core": flop / big.per_iteration_s / 1e9,
            "all_cores": flop / every.per_iteration_s / 1e9,
        }
        throttled = {"big_core": big_thr, "all_cores": all_thr}
        if profile.has_opencl:
            gpu, gpu_thr = _throttled_run(w, cg, GPU_GROUP, gemm, *COMMON, *GPU_ARGS, backend="gpu")
            gflops["gpu"] = flop / gpu.per_iteration_s / 1e9
            throttled["gpu"] = gpu_thr
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
    calib = host_calibration()
    planned = {
        "big_core": plan.core_cores * calib.c_gflops,
        "all_cores": plan.cpu_cores * calib.c_gflops,
        "gpu": plan.gpu_cores * calib.pocl_gflops,
    }
    return {
        "gflops": gflops,
        "share_of_plan": {k: v / planned[k] for k, v in gflops.items()},
        "throttled_periods": throttled,
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
            got = ", ".join(
                f"{k} {r['gflops'][k]:.3g} GFLOP/s = {r['share_of_plan'][k]:.0%} of plan, "
                f"throttled {r['throttled_periods'][k]:.0%}"
                for k in r["gflops"]
            )
            rows.append((f"{name} speeds", got))
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
