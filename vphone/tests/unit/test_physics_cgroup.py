"""Host cgroup plumbing that needs no cgroup: mount discovery, quotas, the join wrapper, the
budget-fit line, and the Android cpuset lists (pure)."""

from __future__ import annotations

from pathlib import Path

from vphone.cgroup import (
    CFS_MIN_QUOTA_US,
    CgroupVersion,
    budget_problem,
    cfs_quota,
    detect_host_cgroups,
    phone_group_name,
)
from vphone.cpusets import cpuset_groups, format_cpulist, parse_cpulist
from vphone.profiles import load_profile

HYBRID = """\
22 1 0:21 / /sys/fs/cgroup rw,relatime shared:9 - tmpfs tmpfs rw,mode=755
23 22 0:22 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
24 22 0:23 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
25 22 0:24 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
26 22 0:25 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
UNIFIED = "30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
COMOUNTED = "23 22 0:22 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"


def test_v1_wins_on_hybrid_hosts_and_v2_needs_the_cpu_controller() -> None:
    hybrid = detect_host_cgroups(HYBRID, "")
    assert hybrid is not None and hybrid.version is CgroupVersion.V1
    assert hybrid.cpu_root == Path("/sys/fs/cgroup/cpu") and hybrid.pids_root == Path("/sys/fs/cgroup/pids")
    unified = detect_host_cgroups(UNIFIED, "cpuset cpu io memory pids\n")
    assert unified is not None and unified.version is CgroupVersion.V2
    assert unified.cpu_root == unified.pids_root == Path("/sys/fs/cgroup")
    assert detect_host_cgroups(UNIFIED, "memory io\n") is None
    comounted = detect_host_cgroups(COMOUNTED, None)
    assert comounted is not None and comounted.cpu_root == Path("/sys/fs/cgroup/cpu,cpuacct")
    assert comounted.pids_root is None


def test_quota_keeps_the_kernel_minimum() -> None:
    assert cfs_quota(0.5) == (10_000, 20_000)
    assert cfs_quota(2.0) == (40_000, 20_000)
    quota, period = cfs_quota(0.01)
    assert quota >= CFS_MIN_QUOTA_US and abs(quota / period - 0.01) < 1e-3


def test_budget_line_names_the_overcommit(tmp_path: Path) -> None:
    assert budget_problem([0.4] * 4, 2) is None
    line = budget_problem([2.0] * 4, 2)
    assert line is not None and "\n" not in line and "8 > 2" in line and "budget_cores" in line
    assert phone_group_name("VP1", tmp_path / "a") != phone_group_name("VP1", tmp_path / "b")


def test_cpulists_and_androids_stock_cpusets() -> None:
    assert format_cpulist((0, 1, 2, 5, 7, 8)) == "0-2,5,7-8"
    assert parse_cpulist("0-2,5\n", 8) == (0, 1, 2, 5)
    assert parse_cpulist("", 8) == ()
    for bad in ("0-9", "3-1", "a", "0,,1"):
        assert parse_cpulist(bad, 8) is None, bad
    groups = {g.name: g.cpus for g in cpuset_groups(load_profile("adreno-sd865"))}
    assert groups["top-app"] == tuple(range(8)) and groups["background"] == (0, 1, 2, 3)
    assert groups["foreground"] == tuple(range(7))  # without the prime core
    assert "restricted" in groups  # Android 11+
    assert "restricted" not in {g.name for g in cpuset_groups(load_profile("adreno-nexus6p"))}
