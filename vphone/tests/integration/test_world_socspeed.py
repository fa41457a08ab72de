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
from vphone.profiles import load_profile
from vphone.socspeed import SOC_SPEEDS_ENV
from vphone.testing.socphone import phone, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap"),
]


def test_quotas_follow_the_socs_proportions_and_the_phone_says_its_slowdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SOC_SPEEDS_ENV, "1")  # opt-in (vphone.socspeed)
    profile = load_profile("adreno-sd865")
    t = profile.throughput
    assert t is not None and t.gpu is not None
    per_core = {c.name: (t.clusters[c.name].fp32_gflops_per_core.value, c.cpus) for c in profile.cpu.clusters}
    big = max(g for g, _ in per_core.values())
    every = sum(g * n for g, n in per_core.values())
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
