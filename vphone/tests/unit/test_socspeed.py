"""The speed plan (socspeed.py): a profile's published throughput and a host calibration ->
host budgets in the profile's proportions, one slow-motion factor, and the ratios a host cannot
hold, with why. The expected ratios are recomputed here from the profile's own numbers."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from vphone.calibration import idle_cores
from vphone.errors import ConfigError
from vphone.profile import Profile, load_profile_file
from vphone.profiles import PROFILES_DIR, load_profile
from vphone.socmodel import SocModel
from vphone.socspeed import (
    MIN_CORE_SHARE,
    SLOWDOWN_PROP,
    HostCalibration,
    Ratio,
    legacy_plan,
    plan_props,
    plan_speeds,
)

SHIPPED = sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))


def _published(profile: Profile) -> tuple[float, float, float]:
    """(fastest core, all cores, GPU) fp32 GFLOP/s straight from the profile's YAML numbers."""
    t = profile.throughput
    assert t is not None and t.gpu is not None
    per_core = [(t.clusters[c.name].fp32_gflops_per_core.value, c.cpus) for c in profile.cpu.clusters]
    return max(g for g, _ in per_core), sum(g * n for g, n in per_core), t.gpu.fp32_gflops.value


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_profile_states_its_throughput_with_sources(name: str) -> None:
    t = load_profile(name).throughput
    assert t is not None
    cited = [t.memory_bandwidth_gbs, *(c.fp32_gflops_per_core for c in t.clusters.values())]
    if t.gpu is not None:
        cited.append(t.gpu.fp32_gflops)
    assert all(c.value > 0 and len(c.source) > 20 for c in cited)


def test_a_two_core_host_budgets_every_ratio_of_the_sd865() -> None:
    profile = load_profile("adreno-sd865")
    big, every, gpu = _published(profile)
    host = HostCalibration(host_cores=2, c_gflops=20.0, pocl_gflops=30.0)
    plan = plan_speeds(profile, host)
    # What gemm would measure: C GFLOP/s per host core on the CPU side, PoCL's on the GPU side.
    one_core = plan.core_cores * host.c_gflops
    all_cores = plan.cpu_cores * host.c_gflops
    the_gpu = plan.gpu_cores * host.pocl_gflops
    assert math.isclose(the_gpu / one_core, gpu / big, rel_tol=1e-9)
    assert math.isclose(the_gpu / all_cores, gpu / every, rel_tol=1e-9)
    assert math.isclose(all_cores / one_core, every / big, rel_tol=1e-9)
    # As fast as the host allows: CPU and GPU busy at once fill the host's two cores.
    assert plan.cpu_cores + plan.gpu_cores == pytest.approx(2.0)
    assert plan.core_cores <= 1.0 and plan.gpu_threads == 2  # 1.4 host cores: two PoCL workers
    assert plan.slowdown == pytest.approx(big / one_core)
    # ... but 8 phone CPUs share one quota on 2 host cores: the phone names the all-cores ratios.
    assert {u.ratio for u in plan.unheld} == {Ratio.ALL_CORES_PER_BIG_CORE, Ratio.GPU_PER_ALL_CORES}
    assert plan_props(plan)[SLOWDOWN_PROP] == f"{plan.slowdown:.4g}"


def test_a_phone_with_more_cpus_than_host_cores_says_its_threads_share_one_quota() -> None:
    """bench_socspeed on 2 host cores: all cores reached 55-74% of their budget while their
    quota was in force (the quota was right; the threads spend each other's time), so the
    all-cores ratios are named with why; a host with a core per phone CPU names none."""
    profile = load_profile("adreno-sd865")
    big, every, gpu = _published(profile)
    small = plan_speeds(profile, HostCalibration(host_cores=2, c_gflops=20.0, pocl_gflops=30.0))
    shared = {u.ratio: u for u in small.unheld}
    assert set(shared) == {Ratio.ALL_CORES_PER_BIG_CORE, Ratio.GPU_PER_ALL_CORES}
    all_cores = shared[Ratio.ALL_CORES_PER_BIG_CORE]
    assert all_cores.profile == pytest.approx(every / big) and all_cores.held == pytest.approx(every / big)
    assert shared[Ratio.GPU_PER_ALL_CORES].profile == pytest.approx(gpu / every)
    line = all_cores.line(profile.name)
    assert line.startswith("adreno-sd865: this host cannot hold all cores / 1 big core = 4.82")
    assert "8 CPUs share one CPU quota on 2 host cores" in line
    assert plan_props(small)["ro.vphone.unheld_ratios"] == "all_cores_per_big_core,gpu_per_all_cores"
    assert plan_speeds(profile, HostCalibration(host_cores=8, c_gflops=20.0, pocl_gflops=30.0)).unheld == ()


def test_a_big_host_gives_the_fastest_core_one_host_core_at_most() -> None:
    profile = load_profile("mali-tensor")
    big, _every, gpu = _published(profile)
    host = HostCalibration(host_cores=64, c_gflops=20.0, pocl_gflops=20.0)
    plan = plan_speeds(profile, host)
    assert plan.core_cores == 1.0 and plan.unheld == ()  # a thread runs on one host core
    assert plan.gpu_cores == pytest.approx(gpu / big)
    assert plan.slowdown == pytest.approx(big / 20.0)


def test_a_host_too_small_for_the_gpu_says_which_ratio_and_why() -> None:
    profile = load_profile("adreno-sd8gen2")
    big, every, gpu = _published(profile)
    # One core, PoCL 20x less efficient than C: the GPU would need 40 cores at the finest share.
    host = HostCalibration(host_cores=1, c_gflops=20.0, pocl_gflops=1.0)
    plan = plan_speeds(profile, host)
    assert plan.core_cores == MIN_CORE_SHARE
    assert plan.gpu_cores == pytest.approx(1.0 - plan.cpu_cores)  # all the CPU cores leave
    held = {u.ratio: u for u in plan.unheld}
    assert set(held) == {Ratio.GPU_PER_BIG_CORE, Ratio.GPU_PER_ALL_CORES, Ratio.ALL_CORES_PER_BIG_CORE}
    unheld = held[Ratio.GPU_PER_BIG_CORE]
    assert unheld.profile == pytest.approx(gpu / big)
    assert unheld.held == pytest.approx(plan.gpu_cores * host.pocl_gflops / (MIN_CORE_SHARE * host.c_gflops))
    line = unheld.line(profile.name)
    assert line.startswith("adreno-sd8gen2: this host cannot hold GPU / 1 big core = ")
    assert "this host has 1" in line and "all CPU cores and the GPU would need" in line
    assert held[Ratio.GPU_PER_ALL_CORES].profile == pytest.approx(gpu / every)
    assert (
        plan_props(plan)["ro.vphone.unheld_ratios"]
        == "gpu_per_big_core,gpu_per_all_cores,all_cores_per_big_core"
    )


def test_a_profile_without_throughput_keeps_its_own_budgets() -> None:
    profile = load_profile("adreno-sd865").model_copy(update={"throughput": None})
    plan = plan_speeds(profile, HostCalibration(2, 20.0, 30.0))
    assert plan == legacy_plan(profile)
    assert (plan.core_cores, plan.cpu_units, plan.slowdown) == (1.0, profile.cpu.budget_cores, None)
    assert plan_props(plan) == {}


def test_the_cgroup_quotas_follow_the_plan() -> None:
    profile = load_profile("adreno-sd865")
    plan = plan_speeds(profile, HostCalibration(2, 20.0, 30.0))
    model = SocModel(profile, plan)
    one = model.quotas({}, threads=1.0)
    every = model.quotas({}, threads=8.0)
    assert one.cpu == pytest.approx(plan.core_cores)
    assert every.cpu == pytest.approx(plan.cpu_cores)
    assert every.gpu == pytest.approx(plan.gpu_cores)
    # A cpuset of the four little cores: at most four cores, each at the little core's speed.
    little = model.quotas({"background": (0, 1, 2, 3)}, threads=8.0)
    assert little.cores["cpu/background"] == pytest.approx(4 * plan.core_cores * 256 / 1024)


def test_a_throughput_block_must_name_every_cluster(tmp_path: Path) -> None:
    text = (PROFILES_DIR / "adreno-sd865.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    entry = "\n    {}:\n      fp32_gflops_per_core:"
    bad.write_text(text.replace(entry.format("prime"), entry.format("prim")))
    line = max(i for i, ln in enumerate(bad.read_text().splitlines(), 1) if ln == "  clusters:")
    with pytest.raises(ConfigError) as err:
        load_profile_file(bad)
    assert f"{bad}:{line}" in str(err.value.location) and "throughput.clusters" in str(err.value)


def test_a_gpu_that_needs_more_host_cores_than_were_free_is_named() -> None:
    """bench_socspeed on a 2-core host at load 9-13: GPU / 1 big core 40-55% under the profile
    on the phones whose GPU needs more than one host core, and the phone did not say so. With
    the host's free cores measured at start-up, it names the ratio, with what was free."""
    profile = load_profile("adreno-sd8gen2")
    big, _every, gpu = _published(profile)
    quiet = plan_speeds(profile, HostCalibration(2, 20.0, 30.0, free_cores=2.0))
    assert Ratio.GPU_PER_BIG_CORE not in {u.ratio for u in quiet.unheld}
    assert quiet.gpu_cores > 1.0  # the GPU's budget: more than one host core
    busy = plan_speeds(profile, HostCalibration(2, 20.0, 30.0, free_cores=0.6))
    assert busy.gpu_cores == quiet.gpu_cores  # the budgets stay; the phone says what it cannot hold
    named = {u.ratio: u for u in busy.unheld}
    unheld = named[Ratio.GPU_PER_BIG_CORE]
    assert unheld.profile == pytest.approx(gpu / big)
    # What the host can give: the GPU 0.6 host cores, the fastest core its whole share.
    assert unheld.held == pytest.approx(0.6 * 30.0 / (busy.core_cores * 20.0))
    line = unheld.line(profile.name)
    assert f"the GPU needs {busy.gpu_cores:.3g} host cores" in line and "0.6 of this host's 2 cores" in line
    assert "gpu_per_big_core" in plan_props(busy)["ro.vphone.unheld_ratios"].split(",")
    # A host with no idle core at all: named too (every part gets a sliver).
    saturated = plan_speeds(profile, HostCalibration(2, 20.0, 30.0, free_cores=0.0))
    assert Ratio.GPU_PER_BIG_CORE in {u.ratio for u in saturated.unheld}


def test_idle_cores_from_two_readings_of_proc_stat() -> None:
    before = "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0 0 0\n"
    # cpu0 idle 75 of 100 jiffies (iowait counts as idle), cpu1 busy throughout.
    after = "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 20 0 15 110 15 0 0 0 0 0\ncpu1 105 0 5 50 0 0 0 0 0 0\n"
    assert idle_cores(before, after, (0, 1)) == pytest.approx(0.75)
    assert idle_cores(before, after, (0,)) == pytest.approx(0.75)
    assert idle_cores(before, before, (0, 1)) == 0.0
