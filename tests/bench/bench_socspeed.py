"""Benchmark: virtual SoCs keep their real relative speeds (issue 29, item 2).

Per shipped profile, one phone (its profile's throughput block, this host's calibration) runs
the gemm program three ways: the cpu backend pinned to the fastest core (taskset), cpu-mt with a
thread per CPU, and the gpu backend (PoCL). The measured GFLOP/s ratios
  GPU / 1 big core, GPU / all cores, all cores / 1 big core
are printed against the profile's published ones: each within 20%, or a ratio the phone says
this host cannot hold (ro.vphone.unheld_ratios, daemon.log; UNHELD with why), with the factor it
runs slower than the real SoC (ro.vphone.slowdown). Each ratio twice: in wall time, and in CPU
time (GFLOP per CPU-second of the run's processes x the mean quota in force while it ran: what
the phone would measure had the host given every part all its quota, i.e. without the load of
the host's other work). On a shared host a busy neighbour takes CPU time from the
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
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from vphone.affinity import group_of  # noqa: E402
from vphone.calibration import host_calibration  # noqa: E402
from vphone.cgroup import CPU_GROUP, GPU_GROUP, PhoneCgroups  # noqa: E402
from vphone.profiles import PROFILES_DIR, load_profile  # noqa: E402
from vphone.socspeed import Ratio, profile_speeds  # noqa: E402
from vphone.testing.socphone import install, kernel_binary, phone, run_gemm  # noqa: E402
from vphone.worldthread import WorldThread  # noqa: E402

from tests.bench.table import report  # noqa: E402

os.environ["VPHONE_SOC_SPEEDS"] = "1"  # the phones this bench starts keep their SoC's proportions (opt-in)

OUT = ROOT / "results" / "bench" / "bench_socspeed.json"
SIZE = 256
TOLERANCE = 0.20
# Long enough for many 20 ms CFS periods at any phone's share of a host core.
WARMUP = 1
COMMON = (f"--m={SIZE}", f"--n={SIZE}", f"--k={SIZE}", f"--warmup={WARMUP}", "--iters=3", "--min-seconds=2")
GPU_ARGS = ("--transfers=once", "--cl-cache=/data/local/tmp/clcache")


def _fastest_cpu(name: str) -> int:
    profile = load_profile(name)
    firsts = profile.cpu.first_cpus()
    best = max(range(len(profile.cpu.clusters)), key=lambda i: profile.cpu.clusters[i].capacity)
    return firsts[best]


@dataclass(frozen=True)
class Measured:
    """One run: its wall-clock GFLOP/s, and what the host gave it. `cpu_s` is the CPU time its
    processes used (children's times), `quota_cores` the mean quota of its cgroup while it ran:
    GFLOP per CPU-second x quota is its speed had the host given it all its quota (a busy
    neighbour takes CPU time from a cap, not from the model)."""

    gflops: float
    cpu_gflops: float  # per CPU-second
    quota_cores: float
    throttled: float  # share of its cgroup's CFS periods that hit the quota

    @property
    def held_gflops(self) -> float:
        return self.cpu_gflops * self.quota_cores


def _quota_sampler(cg: PhoneCgroups, group: str, samples: list[float], stop: threading.Event) -> None:
    while not stop.wait(0.05):
        if cg.group_dir(group).is_dir():
            quota = cg.quota_cores(group)
            if quota is not None:
                samples.append(quota)


def _measured_run(
    w: WorldThread, cg: PhoneCgroups, group: str, command: str, *args: str, backend: str
) -> Measured:
    before = cg.cpu_stat(group) if cg.group_dir(group).is_dir() else None
    samples: list[float] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_quota_sampler, args=(cg, group, samples, stop), daemon=True)
    t0 = os.times()
    sampler.start()
    try:
        times = run_gemm(w, command, *args, backend=backend, timeout_s=300)
    finally:
        stop.set()
        sampler.join()
    t1 = os.times()
    after = cg.cpu_stat(group)
    periods = after.nr_periods - (before.nr_periods if before else 0)
    throttled = after.nr_throttled - (before.nr_throttled if before else 0)
    cpu_s = (t1.children_user + t1.children_system) - (t0.children_user + t0.children_system)
    flop = 2.0 * SIZE**3 * (times.iterations + WARMUP)
    return Measured(
        gflops=2.0 * SIZE**3 / times.per_iteration_s / 1e9,
        cpu_gflops=flop / max(cpu_s, 1e-3) / 1e9,
        quota_cores=sum(samples) / len(samples) if samples else 0.0,
        throttled=throttled / periods if periods else 0.0,
    )


def measure(name: str, serial: str, state: Path) -> dict[str, Any]:
    profile = load_profile(name)
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
        runs = {
            "big_core": _measured_run(
                w, cg, group_of((fastest,)), f"taskset {1 << fastest:x} {gemm}", *COMMON, backend="cpu"
            ),
            "all_cores": _measured_run(
                w, cg, CPU_GROUP, gemm, *COMMON, f"--threads={profile.cpu.ncpu}", backend="cpu-mt"
            ),
        }
        if profile.has_opencl:
            # PoCL builds the kernel once per phone (the cl cache keeps it): not in the GPU's CPU time.
            run_gemm(
                w, gemm, "--m=32", "--n=32", "--k=32", "--iters=1", *GPU_ARGS, backend="gpu", timeout_s=300
            )
            runs["gpu"] = _measured_run(w, cg, GPU_GROUP, gemm, *COMMON, *GPU_ARGS, backend="gpu")
    speeds = profile_speeds(profile)
    assert speeds is not None
    unheld = {u.ratio: u for u in plan.unheld}
    parts = {
        Ratio.GPU_PER_BIG_CORE: ("gpu", "big_core"),
        Ratio.GPU_PER_ALL_CORES: ("gpu", "all_cores"),
        Ratio.ALL_CORES_PER_BIG_CORE: ("all_cores", "big_core"),
    }
    ratios = {}
    for ratio, (top, bottom) in parts.items():
        want = speeds.ratio(ratio)
        if want is None or top not in runs:
            continue
        held = unheld[ratio].held if ratio in unheld else want
        wall = runs[top].gflops / runs[bottom].gflops
        cpu_time = runs[top].held_gflops / runs[bottom].held_gflops
        ratios[ratio.name.lower()] = {
            "profile": want,
            "held": held,
            "measured": wall,
            "measured_cpu_time": cpu_time,
            "within_20pct": abs(wall / held - 1) <= TOLERANCE,
            "within_20pct_cpu_time": abs(cpu_time / held - 1) <= TOLERANCE,
            "unheld_why": unheld[ratio].why if ratio in unheld else None,
        }
    calib = host_calibration()
    planned = {
        "big_core": plan.core_cores * calib.c_gflops,
        "all_cores": plan.cpu_cores * calib.c_gflops,
        "gpu": plan.gpu_cores * calib.pocl_gflops,
    }
    return {
        "gflops": {k: r.gflops for k, r in runs.items()},
        "gflops_per_cpu_s": {k: r.cpu_gflops for k, r in runs.items()},
        "share_of_plan": {k: r.gflops / planned[k] for k, r in runs.items()},
        "quota_share_of_plan": {
            k: r.quota_cores / (planned[k] / (calib.c_gflops if k != "gpu" else calib.pocl_gflops))
            for k, r in runs.items()
        },
        "throttled_periods": {k: r.throttled for k, r in runs.items()},
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
                f"{k} {r['gflops'][k]:.3g} GFLOP/s = {r['share_of_plan'][k]:.0%} of plan "
                f"(quota {r['quota_share_of_plan'][k]:.0%} of plan, {r['gflops_per_cpu_s'][k]:.3g} "
                f"GFLOP per CPU-s), throttled {r['throttled_periods'][k]:.0%}"
                for k in r["gflops"]
            )
            rows.append((f"{name} speeds", got))
            for ratio, v in r["ratios"].items():
                verdict = "ok" if v["within_20pct"] else "OFF"
                verdict += f"; in CPU time {v['measured_cpu_time']:.3g} "
                verdict += "ok" if v["within_20pct_cpu_time"] else "OFF"
                held = "" if v["unheld_why"] is None else f" (UNHELD, said by the phone: {v['unheld_why']})"
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
