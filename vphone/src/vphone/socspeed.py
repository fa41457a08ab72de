"""A virtual SoC with its real relative speeds (pure): how many host cores the phone's fastest
CPU core, all its CPU cores and its GPU get, so that their speeds keep the proportions of the
profile's published throughput (profile.ThroughputSpec) on this host.

The phone runs in slow motion: one factor, `slowdown`, divides every speed of the real SoC.
Two paths differ in efficiency per host, so the plan takes a calibration (calibration.py): a C
loop on one host core (the phone's CPU work) and a GEMM through PoCL on one host core (the
phone's OpenCL "GPU"). With R_all = all cores / the fastest core and R_gpu = GPU / the fastest
core (fp32 GFLOP/s), the fastest core gets s host cores, all cores s x R_all and the GPU
s x R_gpu x (C GFLOP/s per host core / PoCL GFLOP/s per host core): measured GEMM ratios then
equal the profile's. s is as large as the host allows: one thread runs on one host core
(s <= 1), and all cores and the GPU together need no more than the host's cores (a benchmark
beside a background GPU load keeps its speed). Below
MIN_CORE_SHARE a CFS quota no longer gives ms-scale work an even rate (the kernel's 1 ms
minimum quota per 20 ms period), so s stops there and the ratios that would need more host
cores are held as far as the host allows and named (`unheld`), with why. A phone with more CPUs
than the host has cores names the ratios of all its cores too: its threads share one quota
(`_shared_quota`).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass

from vphone.profile import Profile

# Host cores for the fastest core, at least: cgroup.CFS_MIN_QUOTA_US / cgroup.CFS_PERIOD_US.
MIN_CORE_SHARE = 0.05
SLOWDOWN_PROP = "ro.vphone.slowdown"
UNHELD_PROP = "ro.vphone.unheld_ratios"


class Ratio(enum.Enum):
    GPU_PER_BIG_CORE = "GPU / 1 big core"
    GPU_PER_ALL_CORES = "GPU / all cores"
    ALL_CORES_PER_BIG_CORE = "all cores / 1 big core"


@dataclass(frozen=True)
class HostCalibration:
    """What one host core does (GFLOP/s of a small fp32 GEMM) on each path, and how many cores
    the phones may use."""

    host_cores: int
    c_gflops: float  # the C loop, one thread
    pocl_gflops: float  # PoCL, one worker thread; 0 when PoCL cannot run here
    # Host cores idle when the phone started (the host's other work has the rest); None: not
    # measured (all host_cores). Not cached with the speeds: it is the host's load of the moment.
    free_cores: float | None = None


@dataclass(frozen=True)
class ProfileSpeeds:
    """The profile's fp32 GFLOP/s of its fastest core, of all its cores together, of its GPU."""

    big_core: float
    all_cores: float
    gpu: float | None

    def ratio(self, ratio: Ratio) -> float | None:
        if ratio is Ratio.ALL_CORES_PER_BIG_CORE:
            return self.all_cores / self.big_core
        if self.gpu is None:
            return None
        return self.gpu / (self.big_core if ratio is Ratio.GPU_PER_BIG_CORE else self.all_cores)


@dataclass(frozen=True)
class UnheldRatio:
    ratio: Ratio
    profile: float
    held: float
    why: str

    def line(self, profile_name: str) -> str:
        return (
            f"{profile_name}: this host cannot hold {self.ratio.value} = {self.profile:.3g} "
            f"(budgeted at {self.held:.3g}): {self.why}"
        )


@dataclass(frozen=True)
class SpeedPlan:
    """Host cores per part of the phone at top clocks (clocks and throttling scale them)."""

    core_cores: float  # the fastest CPU core
    cpu_units: float  # all cores / the fastest core: the CPU work gets at most core_cores x this
    gpu_cores: float  # the GPU (PoCL's workers); 0 without a GPU
    # How many times slower than the real SoC the phone runs; None: the profile states no
    # throughput, so the budgets are the profile's own (cpu.budget_cores, gpu.budget_cores).
    slowdown: float | None
    unheld: tuple[UnheldRatio, ...] = ()

    @property
    def cpu_cores(self) -> float:
        return self.core_cores * self.cpu_units

    @property
    def host_cores(self) -> float:
        """Host cores the whole phone may use at once at top clocks."""
        return self.cpu_cores + self.gpu_cores

    @property
    def gpu_threads(self) -> int:
        """PoCL workers that can use the GPU's budget (each runs on one host core at a time)."""
        return max(1, math.ceil(self.gpu_cores - 1e-9))


def profile_speeds(profile: Profile) -> ProfileSpeeds | None:
    throughput = profile.throughput
    if throughput is None:
        return None
    per_core = {c.name: throughput.clusters[c.name].fp32_gflops_per_core.value for c in profile.cpu.clusters}
    gpu = throughput.gpu.fp32_gflops.value if throughput.gpu is not None and profile.has_opencl else None
    return ProfileSpeeds(
        big_core=max(per_core.values()),
        all_cores=sum(per_core[c.name] * c.cpus for c in profile.cpu.clusters),
        gpu=gpu,
    )


def legacy_plan(profile: Profile) -> SpeedPlan:
    """The profile's own budgets: every thread at most a host core, cpu.budget_cores in all."""
    gpu = profile.gpu.host_budget_cores if profile.gpu is not None else 0.0
    return SpeedPlan(core_cores=1.0, cpu_units=profile.cpu.budget_cores, gpu_cores=gpu, slowdown=None)


def plan_speeds(profile: Profile, host: HostCalibration) -> SpeedPlan:
    """The host budgets that keep the profile's proportions on this host (module docstring)."""
    speeds = profile_speeds(profile)
    if speeds is None or host.c_gflops <= 0:
        return legacy_plan(profile)
    cores = float(max(1, host.host_cores))
    all_units = speeds.all_cores / speeds.big_core
    # PoCL's efficiency relative to the C loop; without PoCL (no OpenCL here) the GPU cannot be
    # calibrated, and the C loop's stands in.
    pocl = host.pocl_gflops if host.pocl_gflops > 0 else host.c_gflops
    gpu_units = (speeds.gpu / speeds.big_core) * (host.c_gflops / pocl) if speeds.gpu is not None else 0.0
    # CPU work and the GPU busy at once (a benchmark beside a GPU load) fit the host together.
    share = max(MIN_CORE_SHARE, min(1.0, cores / (all_units + gpu_units)))
    cpu_units = min(all_units, cores / share)
    gpu_cores = min(gpu_units * share, cores - cpu_units * share)
    unheld: list[UnheldRatio] = []
    if cpu_units < all_units - 1e-9:
        unheld.append(
            UnheldRatio(
                Ratio.ALL_CORES_PER_BIG_CORE,
                all_units,
                cpu_units,
                _too_few(all_units * share, "all CPU cores", share, host.host_cores),
            )
        )
    if speeds.gpu is not None and gpu_cores < gpu_units * share - 1e-9:
        why = _too_few((all_units + gpu_units) * share, "all CPU cores and the GPU", share, host.host_cores)
        held_gpu = gpu_cores / share * pocl / host.c_gflops
        unheld.append(UnheldRatio(Ratio.GPU_PER_BIG_CORE, speeds.gpu / speeds.big_core, held_gpu, why))
        unheld.append(
            UnheldRatio(Ratio.GPU_PER_ALL_CORES, speeds.gpu / speeds.all_cores, held_gpu / cpu_units, why)
        )
    unheld += _shared_quota(
        profile, host, speeds, cpu_units, gpu_cores / share * pocl / host.c_gflops, unheld
    )
    unheld += _short_of_free_cores(host, speeds, share, cpu_units * share, gpu_cores, pocl, unheld)
    return SpeedPlan(
        core_cores=share,
        cpu_units=cpu_units,
        gpu_cores=gpu_cores,
        slowdown=speeds.big_core / (share * host.c_gflops),
        unheld=tuple(unheld),
    )


def _shared_quota(
    profile: Profile,
    host: HostCalibration,
    speeds: ProfileSpeeds,
    cpu_units: float,
    gpu_units: float,
    unheld: list[UnheldRatio],
) -> list[UnheldRatio]:
    """The ratios of all cores that multi-threaded work cannot reach when the phone has more CPUs
    than the host has cores. All the phone's threads share one CFS quota, so the time a thread
    spends spinning at a barrier (a thread pool's wait), or the host spends switching between
    them, comes out of the others' budget, where a real core's idle spin costs only itself: the
    budgets hold the ratio, the work does not (bench_socspeed measured 55-74% of all cores' budget
    on 2 host cores). One host core per phone CPU keeps every thread's time its own."""
    if profile.cpu.ncpu <= host.host_cores:
        return []
    why = (
        f"the phone's {profile.cpu.ncpu} CPUs share one CPU quota on {host.host_cores} host cores, "
        "so a thread that spins or is switched out spends the others' time and multi-threaded "
        "work runs below the budget (a host with a core per phone CPU holds it)"
    )
    named = {u.ratio for u in unheld}
    found = []
    if Ratio.ALL_CORES_PER_BIG_CORE not in named:
        found.append(
            UnheldRatio(Ratio.ALL_CORES_PER_BIG_CORE, speeds.all_cores / speeds.big_core, cpu_units, why)
        )
    if speeds.gpu is not None and Ratio.GPU_PER_ALL_CORES not in named:
        found.append(
            UnheldRatio(Ratio.GPU_PER_ALL_CORES, speeds.gpu / speeds.all_cores, gpu_units / cpu_units, why)
        )
    return found


def _short_of_free_cores(
    host: HostCalibration,
    speeds: ProfileSpeeds,
    core_cores: float,
    cpu_cores: float,
    gpu_cores: float,
    pocl_gflops: float,
    unheld: list[UnheldRatio],
) -> list[UnheldRatio]:
    """The ratios whose parts need more host cores than were free when the phone started. The
    budgets are caps: a part whose cap is more than the host's idle cores runs at what the
    host's other work leaves it (bench_socspeed measured GPU / 1 big core 40-55% under the
    profile on the phones whose GPU needs 1.0-1.4 host cores, on a 2-core host at load 9-13)."""
    free = host.free_cores
    if free is None or free >= host.host_cores - 1e-9:
        return []
    budgets = {"big": core_cores, "all": cpu_cores, "gpu": gpu_cores}
    # A part gets what is free, and a sliver however busy the host (its weight wins that).
    held = {part: min(cores, max(free, MIN_CORE_SHARE)) for part, cores in budgets.items()}
    gflops = {
        "big": held["big"] * host.c_gflops,
        "all": held["all"] * host.c_gflops,
        "gpu": held["gpu"] * pocl_gflops,
    }
    parts = {
        Ratio.GPU_PER_BIG_CORE: ("gpu", "big"),
        Ratio.GPU_PER_ALL_CORES: ("gpu", "all"),
        Ratio.ALL_CORES_PER_BIG_CORE: ("all", "big"),
    }
    names = {"big": "the fastest core", "all": "all CPU cores", "gpu": "the GPU"}
    named = {u.ratio for u in unheld}
    found = []
    for ratio, (top, bottom) in parts.items():
        profile_ratio = speeds.ratio(ratio)
        short = [p for p in (top, bottom) if budgets[p] > free + 1e-9]
        if ratio in named or profile_ratio is None or not short:
            continue
        needs = " and ".join(f"{names[p]} needs {budgets[p]:.3g} host cores" for p in short)
        why = (
            f"{needs}, and {free:.2g} of this host's {host.host_cores} cores were free when the "
            "phone started (the host's other work had the rest; a quieter host holds it)"
        )
        found.append(UnheldRatio(ratio, profile_ratio, gflops[top] / gflops[bottom], why))
    return found


def _too_few(needed_cores: float, part: str, share: float, host_cores: int) -> str:
    return (
        f"{part} would need {needed_cores:.3g} host cores with the fastest core at {share:.3g} "
        f"host core (below {MIN_CORE_SHARE:g} a CFS quota gives ms-scale work no even rate), "
        f"and this host has {host_cores}"
    )


def plan_props(plan: SpeedPlan) -> dict[str, str]:
    """The read-only properties a phone states its slow motion with (none without one)."""
    if plan.slowdown is None:
        return {}
    props = {SLOWDOWN_PROP: f"{plan.slowdown:.4g}"}
    if plan.unheld:
        props[UNHELD_PROP] = ",".join(u.ratio.name.lower() for u in plan.unheld)
    return props


# Opt-in for now: with it, every budget of a phone is scaled by one factor so that its CPU and GPU
# keep the profile's proportions (slow motion); without it, each profile's own budgets. The
# proportions slow every phone 10-90x on a small host, which the end-to-end suite and the demo
# could not yet afford (issue 29's note); `VPHONE_SOC_SPEEDS=1 vphone up ...` turns them on.
SOC_SPEEDS_ENV = "VPHONE_SOC_SPEEDS"


def soc_speeds_enabled(environ: Mapping[str, str]) -> bool:
    return environ.get(SOC_SPEEDS_ENV, "") == "1"
