"""A phone whose profile states its SoC's throughput gets host cgroup quotas in the SoC's
proportions, scaled by this host's calibration, and says its slow-motion factor as a read-only
property. The truth is the profile's YAML numbers and the calibration cache file."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from vphone.calibration import CACHE_FILE, cache_dir
from vphone.cgroup import CPU_GROUP, GPU_GROUP
from vphone.profile import Profile
from vphone.profiles import load_profile
from vphone.socspeed import SOC_SPEEDS_ENV
from vphone.testing.socphone import install, kernel_binary, phone, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap"),
]


def _published(profile: Profile) -> tuple[float, float]:
    """(fastest core, all cores) fp32 GFLOP/s straight from the profile's YAML numbers."""
    t = profile.throughput
    assert t is not None
    per_core = [(t.clusters[c.name].fp32_gflops_per_core.value, c.cpus) for c in profile.cpu.clusters]
    return max(g for g, _ in per_core), sum(g * n for g, n in per_core)


def test_quotas_follow_the_socs_proportions_and_the_phone_says_its_slowdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SOC_SPEEDS_ENV, "1")  # opt-in (vphone.socspeed)
    profile = load_profile("adreno-sd865")
    t = profile.throughput
    assert t is not None and t.gpu is not None
    big, every = _published(profile)
    with phone(profile, "VPSPD01", tmp_path) as w:
        cg = w.world.cgroups
        if cg is None:
            pytest.skip(f"no host cgroups here: {w.world.budget_note}")
        calib = json.loads((cache_dir() / CACHE_FILE).read_text())
        efficiency = calib["c_gflops"] / calib["pocl_gflops"]  # PoCL vs C per host core
        gpu_per_big = t.gpu.fp32_gflops.value / big * efficiency  # in host cores

        def ratio(group: str, want: float) -> bool:
            got = (cg.quota_cores(group) or 0.0) / (cg.quota_cores(CPU_GROUP) or 1e-9)
            return math.isclose(got, want, rel_tol=0.02)

        # An idle phone wants one core: its CPU quota is the fastest core's share.
        wait_until(lambda: ratio(GPU_GROUP, gpu_per_big), f"GPU / 1 core quotas = {gpu_per_big:.3g}")
        one_core = cg.quota_cores(CPU_GROUP) or 0.0
        slowdown = float(w.sh("getprop ro.vphone.slowdown").stdout)
        assert slowdown == pytest.approx(big / (one_core * calib["c_gflops"]), rel=0.01)
        # Eight threads that want a core get all the phone's cores: the SoC's all / big ratio.
        spin = "timeout 30 sh -c 'while :; do :; done'"
        assert w.sh(f"for i in 1 2 3 4 5 6 7 8; do ({spin} >/dev/null 2>&1 &); done").returncode == 0
        want = one_core * every / big
        wait_until(
            lambda: math.isclose(cg.quota_cores(CPU_GROUP) or 0.0, want, rel_tol=0.02),
            f"all cores' quota = {want:.3g} host cores",
        )


def test_a_thread_pool_behind_the_quota_gets_all_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program's 8 worker threads on a phone whose CPU quota is about one host core wait longer
    than the daemon's scan interval for a core: each wait is only reported when the thread runs
    again, and the demand counted from those reports alone was about half the threads, so the
    quota stayed at about half of all cores' budget (the bench's all cores reached 25-74% of
    plan). The truth: the profile's all / big ratio times the fastest core's quota."""
    monkeypatch.setenv(SOC_SPEEDS_ENV, "1")
    profile = load_profile("adreno-nexus6p")  # 8 CPUs, the largest all / big ratio (7.2)
    big, every = _published(profile)
    with phone(profile, "VPSPD02", tmp_path) as w:
        cg = w.world.cgroups
        if cg is None:
            pytest.skip(f"no host cgroups here: {w.world.budget_note}")
        wait_until(lambda: cg.quota_cores(CPU_GROUP) is not None, "the phone's CPU quota")
        one_core = w.world.physics.plan.core_cores
        gemm = install(w, kernel_binary("gemm"))
        args = "--backend=cpu-mt --threads=8 --m=256 --n=256 --k=256 --iters=100000 --min-seconds=60"
        assert w.sh(f"(timeout 60 {gemm} {args} >/dev/null 2>&1 &)").returncode == 0
        want = one_core * every / big
        wait_until(
            lambda: (cg.quota_cores(CPU_GROUP) or 0.0) >= 0.95 * want,
            f"all cores' quota = {want:.3g} host cores while 8 threads compute",
        )
