"""Clock rules as the kernel applies them: root's writes, caps from heat and fixed performance
mode, the speed work runs at, and the CFS quotas that follow (pure; no processes)."""

from __future__ import annotations

import errno
import math

import pytest
from vphone.cgroup import cfs_quota
from vphone.clocks import Knob, Limits, SocClocks
from vphone.powerhal import PowerHal
from vphone.profiles import load_profile
from vphone.socmodel import SocModel

SHIPPED_SD865 = load_profile("adreno-sd865")  # little 4 x A55 (cap 256), big 3 x A77 (900), prime 1 x (1024)
# The same SoC on a kernel with PM QoS limits (5.3+): what the rules below are written against.
SD865 = SHIPPED_SD865.model_copy(update={"cpu": SHIPPED_SD865.cpu.model_copy(update={"limits_qos": True})})
LITTLE, BIG, PRIME = 0, 1, 2  # policy indices (policy0, policy4, policy7)
MALI = load_profile("mali-tensor")


def _write(model: SocModel, knob: Knob, index: int, text: str) -> int | None:
    return model.write(knob, index, text).error


def test_governor_writes_are_checked_like_the_kernel() -> None:
    m = SocModel(SD865)
    assert _write(m, Knob.SCALING_GOVERNOR, 0, "bogus\n") == errno.EINVAL
    assert m.state.policies[0].governor == "schedutil"  # unchanged
    assert _write(m, Knob.SCALING_GOVERNOR, 0, "Performance\n") is None  # strncasecmp, as cpufreq
    assert m.state.policies[0].governor == "performance"
    # setspeed belongs to the userspace governor only
    assert _write(m, Knob.SCALING_SETSPEED, 0, "600000") == errno.EINVAL
    assert _write(m, Knob.SCALING_GOVERNOR, 0, "userspace") is None
    assert _write(m, Knob.SCALING_SETSPEED, 0, "600000") is None
    assert m.soc.policy_work_khz(m.state, 0) == 614400  # CPUFREQ_RELATION_L: lowest entry >= 600000
    assert _write(m, Knob.SCALING_MAX, 0, "max") == errno.EINVAL


def test_a_pin_is_the_current_frequency_when_its_write_returns() -> None:
    """As cpufreq switches within the write: cpuinfo_cur_freq read right after a pin shows it,
    counted as a transition, without waiting for the next physics tick."""
    m = SocModel(SD865)
    top = m.advance(0, 100_000_000, 30.0, 1.0, 0.0).cpu_cur_khz[LITTLE]
    assert _write(m, Knob.SCALING_GOVERNOR, LITTLE, "userspace") is None
    assert _write(m, Knob.SCALING_SETSPEED, LITTLE, "300000") is None
    readings = m.readings(30.0)
    assert top != 300000 and readings.cpu_cur_khz[LITTLE] == 300000
    assert readings.total_trans[LITTLE] >= 1


def test_frequency_writes_resolve_to_the_table_and_max_wins() -> None:
    soc = SocClocks(SD865)
    m = SocModel(SD865)
    assert _write(m, Knob.SCALING_MAX, PRIME, "1500000\n") is None  # not in the table: accepted, resolved
    assert soc.policy_limits(m.state, PRIME).high == 1401600  # RELATION_H: highest entry <= 1500000
    assert _write(m, Knob.SCALING_MIN, PRIME, "2000000") is None  # min above max: the max wins
    lim = soc.policy_limits(m.state, PRIME)
    assert lim.low == lim.high == 1401600
    assert _write(m, Knob.SCALING_MAX, PRIME, "-1") is None  # %u wraps: the top frequency
    assert soc.policy_limits(m.state, PRIME).high == 2841600
    assert _write(m, Knob.SCALING_MAX, PRIME, "99999999999") is None
    assert soc.policy_limits(m.state, PRIME).high == 2841600


def test_crossed_limits_are_refused_by_kernels_before_pm_qos() -> None:
    """4.19 (the shipped sd865's kernel): cpufreq_set_policy refuses min > max, comparing the
    user's requests (not the resolved limits); devfreq's min/max_freq_store the same (0: no limit)."""
    soc = SocClocks(SHIPPED_SD865)
    m = SocModel(SHIPPED_SD865)
    assert _write(m, Knob.SCALING_MAX, PRIME, "1500000\n") is None
    assert _write(m, Knob.SCALING_MIN, PRIME, "2000000") == errno.EINVAL
    assert _write(m, Knob.SCALING_MIN, PRIME, "1500000") is None  # equal to the request: fine
    assert soc.policy_limits(m.state, PRIME) == Limits(1401600, 1401600)
    assert _write(m, Knob.SCALING_MAX, PRIME, "1400000") == errno.EINVAL  # below the min's request
    assert m.state.policies[PRIME].max_req == 1500000  # unchanged
    assert _write(m, Knob.SCALING_MAX, LITTLE, "0") == errno.EINVAL  # below the boot min
    assert _write(m, Knob.SCALING_MAX, PRIME, "-1") is None  # %u wraps: the top, above any min
    gpu = soc.gpu
    assert gpu is not None
    assert _write(m, Knob.GPU_MAX, 0, f"{gpu.table[1]}") is None
    assert _write(m, Knob.GPU_MIN, 0, f"{gpu.table[2]}") == errno.EINVAL
    assert _write(m, Knob.GPU_MIN, 0, f"{gpu.table[1]}") is None
    assert _write(m, Knob.GPU_MAX, 0, f"{gpu.table[0]}") == errno.EINVAL
    assert _write(m, Knob.GPU_MAX, 0, "0") is None  # no limit: never refused
    assert m.state.gpu is not None and m.state.gpu.min_req == gpu.table[1]


def test_speed_is_the_fastest_online_core_and_pins_scale_it() -> None:
    m = SocModel(SD865)
    soc = m.soc
    assert soc.cpu_speed(m.state) == 1.0
    # Pinning the little cluster alone changes nothing: the work runs on the prime core.
    _write(m, Knob.SCALING_MAX, LITTLE, "300000")
    assert soc.cpu_speed(m.state) == 1.0
    # Pinning every policy to its lowest frequency: the prime core at 844.8 MHz is still fastest.
    for policy in (BIG, PRIME):
        _write(m, Knob.SCALING_MAX, policy, "0")
    assert math.isclose(soc.cpu_speed(m.state), 844_800 / 2_841_600)
    q = m.quotas({"": tuple(range(8)), "background": (0, 1, 2, 3)}, threads=1.0)
    assert math.isclose(q.cpu, 844_800 / 2_841_600)  # one thread at the prime core's speed
    assert math.isclose(q.cores["cpu/background"], 256 / 1024 * 300_000 / 1_804_800)  # little cores only
    # Offlining the prime core hands the speed to the big cluster (capacity 900).
    assert _write(m, Knob.CPU_ONLINE, 7, "0") is None
    assert math.isclose(soc.cpu_speed(m.state), 900 / 1024 * 710_400 / 2_419_200)


def test_hotplug_refuses_the_last_cpu_and_bad_booleans() -> None:
    m = SocModel(MALI)
    for cpu in range(7):
        assert _write(m, Knob.CPU_ONLINE, cpu, "0\n") is None
    assert _write(m, Knob.CPU_ONLINE, 7, "0") == errno.EBUSY
    assert _write(m, Knob.CPU_ONLINE, 3, "maybe") == errno.EINVAL
    assert _write(m, Knob.CPU_ONLINE, 3, "on") is None and m.state.online[3]
    assert m.soc.policy_online_cpus(m.state, 0) == (3,)


def test_gpu_devfreq_and_kgsl_levels() -> None:
    m = SocModel(SD865)  # 305, 400, 441.6, 490, 525, 587 MHz
    soc = m.soc
    assert _write(m, Knob.GPU_GOVERNOR, 0, "userspace-not-here") == errno.EINVAL
    assert _write(m, Knob.GPU_MAX, 0, "450000000\n") is None
    assert soc.gpu_limits(m.state).high == 450_000_000  # devfreq shows the request, clamped to OPPs
    assert soc.gpu_work_hz(m.state) == 441_600_000  # the work runs at the OPP below it
    assert _write(m, Knob.GPU_MAX, 0, "0x10") is None  # sscanf %lu reads the 0: no limit, the top OPP
    assert soc.gpu_limits(m.state).high == 587_000_000
    assert _write(m, Knob.GPU_MAX, 0, "1") is None  # below the table: clamped to the lowest OPP
    assert soc.gpu_limits(m.state).high == 305_000_000
    assert _write(m, Knob.GPU_MAX, 0, "4294967295") is None
    assert _write(m, Knob.KGSL_MAX_PWRLEVEL, 0, "2\n") is None  # level 2 of 0..5 = 490 MHz
    assert soc.gpu_work_hz(m.state) == 490_000_000
    assert math.isclose(m.quotas({}).gpu, 490 / 587)
    assert _write(m, Knob.KGSL_MAX_PWRLEVEL, 0, "2x") == errno.EINVAL  # kstrtouint: whole word
    assert _write(m, Knob.KGSL_MIN_PWRLEVEL, 0, "1") is None  # min below max pulls max along
    assert m.state.kgsl is not None and m.state.kgsl.max_pwrlevel == 1
    assert _write(m, Knob.KGSL_MAX_PWRLEVEL, 0, "99") is None and m.state.kgsl.max_pwrlevel == 5
    assert _write(m, Knob.GPU_GOVERNOR, 0, "powersave") is None
    assert soc.gpu_work_hz(m.state) == 305_000_000


def test_fixed_performance_holds_every_policy_and_the_gpu() -> None:
    m = SocModel(MALI)
    hal = PowerHal(MALI)
    m.set_fixed_performance(True)  # the GPU's clock; the CPU limits are the power HAL's writes
    for knob, index, text in hal.fixed_performance(True):
        m.write(knob, index, text)
    soc = m.soc
    fixed = MALI.fixed_performance
    assert fixed is not None
    for i, khz in enumerate(fixed.cpu_khz):
        lim = soc.policy_limits(m.state, i)
        assert lim.low == lim.high == khz
    assert soc.gpu_work_hz(m.state) == fixed.gpu_hz
    assert math.isclose(soc.cpu_speed(m.state), fixed.cpu_khz[-1] / 2_802_000)
    m.set_fixed_performance(False)
    for knob, index, text in hal.fixed_performance(False):  # EndHint: the defaults
        m.write(knob, index, text)
    assert soc.cpu_speed(m.state) == 1.0
    plain = SocModel(load_profile("adreno-sd8gen2"))  # its power HAL has no such mode
    plain.set_fixed_performance(True)
    assert not plain.state.fixed_performance


@pytest.mark.parametrize("name", ["adreno-sd865", "mali-tensor", "adreno-nexus6p"])
def test_quotas_follow_the_threads_that_want_a_core_up_to_the_budget(name: str) -> None:
    profile = load_profile(name)
    m = SocModel(profile)
    groups = {"": tuple(range(profile.cpu.ncpu)), "top-app": tuple(range(profile.cpu.ncpu))}
    budget = profile.cpu.budget_cores
    assert budget == 2.0
    assert m.quotas(groups, threads=0.0).cpu == 1.0  # idle: room for one thread at full speed
    assert m.quotas(groups, threads=1.5).cpu == 1.5 == m.quotas(groups, threads=1.5).cores["cpu/top-app"]
    assert m.quotas(groups, threads=7.0).cpu == budget  # never more than the budget
    for policy in range(len(profile.cpu.clusters)):  # pinned: each thread at the pinned speed
        m.write(Knob.SCALING_MAX, policy, "0")
    speed = m.soc.cpu_speed(m.state)
    assert math.isclose(m.quotas(groups, threads=1.0).cpu, speed)
    assert math.isclose(m.quotas(groups, threads=3.0).cpu, budget * speed)
    assert profile.gpu is not None and m.quotas(groups).gpu == profile.gpu.host_budget_cores


@pytest.mark.parametrize("threads", [1.0, 8.0])
def test_a_pinned_clock_keeps_each_cfs_period_s_quota_and_stretches_the_period(threads: float) -> None:
    """Time must scale with the clock ratio. A throttled thread pays a warm-up each time it runs
    again, so the quota per period must not shrink with the clock: a 20 ms period at every clock
    left a kernel pinned to 38% of the top clock 3.4-4.1x slower instead of 2.6x (issue 28).
    At any clock each group's period holds its top-clock quota, stretched by the clock ratio."""
    m = SocModel(SD865)
    groups = {"": tuple(range(8)), "background": (0, 1, 2, 3)}
    top = m.quotas(groups, threads=threads)
    for policy in (LITTLE, BIG, PRIME):
        _write(m, Knob.SCALING_MAX, policy, "1075200")
    _write(m, Knob.GPU_MAX, 0, "305000000")
    pinned = m.quotas(groups, threads=threads)
    for group in ("cpu", "cpu/background", "gpu"):
        ratio = top.cores[group] / pinned.cores[group]
        assert ratio > 1.5, group  # the pin slowed this group
        top_quota_us, top_period_us = cfs_quota(top.cores[group], top.speeds.get(group, 1.0))
        quota_us, period_us = cfs_quota(pinned.cores[group], pinned.speeds[group])
        assert abs(quota_us - top_quota_us) <= 1, (group, quota_us, top_quota_us)
        assert math.isclose(period_us / top_period_us, ratio, rel_tol=1e-3), group
