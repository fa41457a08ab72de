"""Clocks that matter, on real phones' sysfs: root pins a rooted phone's CPU and a benchmark slows
by the ratio the phone's own nodes predict; refused writes fail as the kernel's do (in write(2)
over FUSE) and the phone keeps running; hotplug; fixed performance mode on Android 11+;
read-only clocks when unrooted."""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from vphone.testing.socphone import (
    budgeted,
    install,
    kernel_binary,
    phone,
    read,
    run_gemm,
    su,
    wait_until,
)
from vphone.worldthread import WorldThread

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap"),
]
CPUFREQ = "/sys/devices/system/cpu/cpufreq"
# A budget well under a host core, so that the top-clock run gets its quota on a busy host too.
BUDGET_CORES = 0.25
# The top-clock run must have hit its quota in most CFS periods for its speed to be the profile's.
MIN_QUOTA_BOUND_PERIODS = 0.5


@pytest.fixture
def rooted(tmp_path: Path) -> Iterator[WorldThread]:
    with phone(budgeted("adreno-sd865", cpu=BUDGET_CORES), "VPCLK01", tmp_path) as w:
        if w.world.cgroups is None:
            pytest.skip(f"no CPU budgets here: {w.world.budget_note}")
        yield w


def _policies(w: WorldThread) -> list[str]:
    return [f"{CPUFREQ}/policy{c}" for c in w.world.profile.cpu.first_cpus()]


def _fastest_core_speed(w: WorldThread) -> float:
    """The speed the phone's own nodes imply: max over online policies of cpu_capacity x
    scaling_max_freq / cpuinfo_max_freq, over the largest capacity (an independent reading of
    what clocks.py claims the work runs at)."""
    best, top_capacity = 0.0, 0
    for policy in _policies(w):
        cpus = read(w, f"{policy}/affected_cpus").split()
        capacity = int(
            read(w, f"/sys/devices/system/cpu/cpu{read(w, f'{policy}/related_cpus').split()[0]}/cpu_capacity")
        )
        top_capacity = max(top_capacity, capacity)
        if cpus:
            ratio = int(read(w, f"{policy}/scaling_max_freq")) / int(read(w, f"{policy}/cpuinfo_max_freq"))
            best = max(best, capacity * ratio)
    return best / top_capacity


def _max_in_table(w: WorldThread, policy: str) -> bool:
    return (
        read(w, f"{policy}/scaling_max_freq").strip()
        in read(w, f"{policy}/scaling_available_frequencies").split()
    )


def _wait_quota(w: WorldThread, cores: float) -> None:
    cg = w.world.cgroups
    assert cg is not None
    wait_until(
        lambda: math.isclose(cg.quota_cores("cpu") or 0, cores, rel_tol=0.01), f"a CPU quota of {cores:.3f}"
    )


@pytest.mark.serial  # a speed ratio: needs the host's cores
def test_pinned_clock_slows_a_kernel_by_the_expected_ratio(rooted: WorldThread) -> None:
    w = rooted
    gemm = install(w, kernel_binary("gemm"))
    args = ("--m=160", "--n=160", "--k=160", "--warmup=3", "--iters=120")
    cg = w.world.cgroups
    assert cg is not None and math.isclose(cg.quota_cores("cpu") or 0, BUDGET_CORES, rel_tol=1e-3)
    before = cg.cpu_stat("cpu")
    top = run_gemm(w, gemm, *args)
    after = cg.cpu_stat("cpu")
    bound = (after.nr_throttled - before.nr_throttled) / max(1, after.nr_periods - before.nr_periods)
    pin = " ".join(f"echo 1075200 > {p}/scaling_max_freq;" for p in _policies(w))
    assert su(w, pin).returncode == 0
    # The nodes show what is in force once the physics has taken the writes (out-of-table
    # numbers resolved into the table): only then are they a reading of the speed.
    wait_until(lambda: all(_max_in_table(w, p) for p in _policies(w)), "the pins to resolve")
    speed = _fastest_core_speed(w)  # 0.384: the big cores' 1056 MHz outruns the prime's 1075 MHz
    assert 0.3 < speed < 0.5
    # The kernel's quota says the same, exactly, once the physics has taken the writes (ms).
    _wait_quota(w, BUDGET_CORES * speed)
    throttled_before = cg.cpu_stat("cpu").nr_throttled
    pinned = run_gemm(w, gemm, *args)
    assert cg.cpu_stat("cpu").nr_throttled > throttled_before  # the quota was what held it back
    ratio = pinned.per_iteration_s / top.per_iteration_s
    expected = 1 / speed
    if bound >= MIN_QUOTA_BOUND_PERIODS:  # else the host starved the top-clock run: no truth to compare
        assert 0.6 * expected < ratio < 1.4 * expected, (ratio, expected, top, pinned)
    restore = " ".join(f"echo 2841600 > {p}/scaling_max_freq;" for p in _policies(w))
    assert su(w, restore).returncode == 0
    _wait_quota(w, BUDGET_CORES)


def test_refused_writes_fail_like_the_kernel_and_the_phone_keeps_running(rooted: WorldThread) -> None:
    w = rooted
    policy = f"{CPUFREQ}/policy0"
    fused = w.world.physics._fused is not None  # else plain files: the write succeeds, then reverts

    def refused(command: str, node: str, keeps: str) -> None:
        result = su(w, command)
        if fused:  # write(2) fails as the kernel's store does; mksh says so and exits 1
            assert result.returncode == 1 and "Invalid argument" in result.stderr, result
            assert read(w, node) == keeps
        else:
            assert result.returncode == 0
            wait_until(lambda: read(w, node) == keeps, f"{node} to come back")

    refused(f"echo bogus > {policy}/scaling_governor", f"{policy}/scaling_governor", "schedutil\n")
    assert "governor 'bogus' is not available (EINVAL)" in read(w, "/dev/.farm/kmsg")  # the log says why
    refused(f"echo 600000 > {policy}/scaling_setspeed", f"{policy}/scaling_setspeed", "<unsupported>\n")
    # An out-of-table number is not an error to the kernel: it is resolved, and read back as such.
    assert su(w, f"echo 1000000 > {policy}/scaling_max_freq").returncode == 0
    wait_until(lambda: read(w, f"{policy}/scaling_max_freq") == "979200\n", "the max to resolve down")
    assert (
        su(
            w, f"echo userspace > {policy}/scaling_governor; echo 600000 > {policy}/scaling_setspeed"
        ).returncode
        == 0
    )
    # cur_freq and setspeed are rewritten one after the other: wait for both.
    wait_until(
        lambda: read(w, f"{policy}/scaling_cur_freq") == read(w, f"{policy}/scaling_setspeed") == "614400\n",
        "userspace to set 614.4 MHz",
    )
    kgsl = "/sys/class/kgsl/kgsl-3d0"
    refused(f"echo 2x > {kgsl}/max_pwrlevel", f"{kgsl}/max_pwrlevel", "0\n")
    refused(f"echo warp > {kgsl}/devfreq/governor", f"{kgsl}/devfreq/governor", "msm-adreno-tz\n")
    assert w.world.physics._task is not None and not w.world.physics._task.done()
    assert w.sh("getprop ro.product.model").stdout.strip() == "Mi 10"
    # stats/time_in_state counts (10 ms units) at the frequency the policy runs at.
    stats = f"{policy}/stats/time_in_state"

    def at_614400() -> int:
        return int(dict(line.split() for line in read(w, stats).splitlines())["614400"])

    before = at_614400()
    wait_until(lambda: at_614400() >= before + 20, "0.2 s more at 614.4 MHz")
    # total_trans is its own file, rewritten after time_in_state: wait for it too.
    wait_until(lambda: int(read(w, f"{policy}/stats/total_trans")) >= 1, "a counted transition")


def test_root_pins_the_gpu_through_kgsl_levels_and_devfreq(rooted: WorldThread) -> None:
    """What farm's GPU pin writes (kgsl pwrlevels, devfreq max_freq) reads back and sets the PoCL
    workers' quota to the GPU budget x the pinned OPP / the top OPP."""
    w = rooted
    cg, gpu = w.world.cgroups, w.world.profile.gpu
    assert cg is not None and gpu is not None
    kgsl, devfreq = "/sys/class/kgsl/kgsl-3d0", "/sys/class/devfreq/3d00000.qcom,kgsl-3d0"
    table = [int(f) for f in read(w, f"{devfreq}/available_frequencies").split()]
    assert table == sorted(table) and int(read(w, f"{kgsl}/num_pwrlevels")) == len(table)

    def gpu_quota_at(hz: int) -> None:
        want = gpu.host_budget_cores * hz / table[-1]
        wait_until(
            lambda: math.isclose(cg.quota_cores("gpu") or 0, want, rel_tol=0.01), f"the GPU at {hz} Hz"
        )

    gpu_quota_at(table[-1])
    slowest = len(table) - 1  # kgsl level 0 is the fastest
    assert (
        su(w, f"echo {slowest} > {kgsl}/min_pwrlevel; echo {slowest} > {kgsl}/max_pwrlevel").returncode == 0
    )
    wait_until(
        lambda: (
            (read(w, f"{kgsl}/max_pwrlevel"), read(w, f"{devfreq}/max_freq"))
            == (f"{slowest}\n", f"{table[0]}\n")
        ),
        "the kgsl pin to read back",
    )
    gpu_quota_at(table[0])
    assert su(w, f"echo 0 > {kgsl}/max_pwrlevel; echo {slowest} > {kgsl}/min_pwrlevel").returncode == 0
    assert su(w, f"echo {table[1]} > {devfreq}/max_freq").returncode == 0
    wait_until(lambda: read(w, f"{devfreq}/max_freq") == f"{table[1]}\n", "devfreq's max to read back")
    gpu_quota_at(table[1])
    assert su(w, f"echo {table[-1]} > {devfreq}/max_freq").returncode == 0
    gpu_quota_at(table[-1])


def test_hotplug_takes_cpus_down_and_refuses_the_last(rooted: WorldThread) -> None:
    w = rooted
    cg = w.world.cgroups
    assert cg is not None
    cpu = "/sys/devices/system/cpu"
    assert su(w, f"echo 0 > {cpu}/cpu7/online").returncode == 0
    wait_until(
        lambda: (
            (read(w, f"{cpu}/online"), read(w, f"{cpu}/offline"), read(w, f"{CPUFREQ}/policy7/affected_cpus"))
            == ("0-6\n", "7\n", "\n")
        ),
        "cpu7 to go offline",
    )
    _wait_quota(w, BUDGET_CORES * _fastest_core_speed(w))
    assert (cg.quota_cores("cpu") or 0) < BUDGET_CORES  # the prime core's speed is gone
    down = "; ".join(f"echo 0 > {cpu}/cpu{c}/online" for c in range(1, 7))
    assert su(w, down).returncode == 0
    wait_until(lambda: read(w, f"{cpu}/online") == "0\n", "all but cpu0 offline")
    last = su(w, f"echo 0 > {cpu}/cpu0/online")
    if w.world.physics._fused is not None:  # the kernel's EBUSY, in write(2)
        assert last.returncode == 1 and "busy" in last.stderr, last
    # The kernel-log line comes first, then the node reverts (at once over FUSE).
    wait_until(
        lambda: "last online CPU" in read(w, "/dev/.farm/kmsg") and read(w, f"{cpu}/cpu0/online") == "1\n",
        "EBUSY for the last CPU",
    )
    assert su(w, "; ".join(f"echo 1 > {cpu}/cpu{c}/online" for c in range(8))).returncode == 0
    wait_until(lambda: read(w, f"{cpu}/online") == "0-7\n", "every CPU back")


def test_fixed_performance_mode_on_android_11_and_later(tmp_path: Path) -> None:
    with phone(budgeted("mali-tensor", cpu=BUDGET_CORES), "VPCLK02", tmp_path) as w:
        fixed = w.world.profile.fixed_performance
        assert fixed is not None
        enabled = w.sh("cmd power set-fixed-performance-mode-enabled true")
        assert enabled.returncode == 0 and enabled.stderr == ""
        # As on a Pixel, the HAL call returns once the nodes show the mode: read back at once.
        policies = _policies(w)
        for policy, khz in zip(policies, fixed.cpu_khz, strict=True):
            assert read(w, f"{policy}/scaling_max_freq") == f"{khz}\n"
            assert read(w, f"{policy}/scaling_min_freq") == f"{khz}\n"
        assert read(w, "/sys/class/devfreq/1c500000.mali/max_freq") == f"{fixed.gpu_hz}\n"
        cg = w.world.cgroups
        if cg is not None:
            assert math.isclose(
                cg.quota_cores("cpu") or 0, BUDGET_CORES * fixed.cpu_khz[-1] / 2_802_000, rel_tol=0.01
            )
        assert w.sh("cmd power set-fixed-performance-mode-enabled false").returncode == 0
        assert read(w, f"{policies[-1]}/scaling_max_freq") == "2802000\n"  # released
        # Unrooted: the clocks stay read-only for the shell.
        refused = w.sh(f"echo 300000 > {policies[0]}/scaling_max_freq")
        assert refused.returncode != 0 and "Permission denied" in refused.stderr


def test_fixed_performance_mode_where_the_power_hal_lacks_it(tmp_path: Path) -> None:
    with phone(budgeted("adreno-sd8gen2"), "VPCLK03", tmp_path) as w:
        failed = w.sh("cmd power set-fixed-performance-mode-enabled true")
        assert failed.returncode == 255 and failed.stderr.startswith("Failed to set FIXED_PERFORMANCE mode")
    with phone(budgeted("adreno-nexus6p"), "VPCLK04", tmp_path) as w:  # Android 8.1
        before_11 = w.sh("cmd power set-fixed-performance-mode-enabled true")
        assert before_11.returncode == 20 and "Can't find service: power" in before_11.stderr
        missing = w.sh("dumpsys thermalservice")
        assert "Can't find service: thermalservice" in missing.stderr
