"""A phone's CPU quotas on the host's real cgroups (v1 or v2): each set_quotas leaves the kernel
holding the targets (a parent shrinking below its child's old quota included, and a new period
for a new speed), and a call that changes nothing writes nothing (the physics calls it up to ten
times a second per phone)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from vphone.cgroup import CgroupsUnavailable, PhoneCgroups, cfs_quota, read_host_cgroups

from vphone import cgroup

pytestmark = pytest.mark.integration

# (cores, speeds) per step: the child grows with its parent, then both shrink below the child's
# old quota, then the parent grows while the child shrinks at another speed.
STEPS = (
    ({"cpu": 1.0, "cpu/background": 0.5, "gpu": 0.8}, {"cpu": 1.0, "cpu/background": 1.0, "gpu": 1.0}),
    ({"cpu": 0.3, "cpu/background": 0.3, "gpu": 0.8}, {"cpu": 0.3, "cpu/background": 0.3, "gpu": 1.0}),
    ({"cpu": 0.8, "cpu/background": 0.2, "gpu": 0.4}, {"cpu": 0.5, "cpu/background": 0.5, "gpu": 0.5}),
)


@pytest.fixture
def phone_groups() -> Iterator[PhoneCgroups]:
    try:
        groups = PhoneCgroups(read_host_cgroups(), f"test-quotas-{os.getpid()}")
        groups.create(weight_cores=1.0, pids_max=64, subgroups=("background",))
    except (CgroupsUnavailable, OSError) as exc:
        pytest.skip(f"no CPU budgets here: {exc}")
    yield groups
    groups.destroy()


def test_quotas_are_the_targets_and_an_unchanged_call_writes_nothing(
    phone_groups: PhoneCgroups, monkeypatch: pytest.MonkeyPatch
) -> None:
    for cores, speeds in STEPS:
        phone_groups.set_quotas(cores, speeds)
        for group, target in cores.items():
            quota_us, period_us = cfs_quota(target, speeds[group])
            assert phone_groups.cfs_period_us(group) == period_us, (group, cores)
            assert math.isclose(phone_groups.quota_cores(group) or 0, quota_us / period_us), (group, cores)
    writes: list[Path] = []
    monkeypatch.setattr(cgroup, "_write", lambda path, text: writes.append(path))
    phone_groups.set_quotas(*STEPS[-1])
    assert writes == []
    # One group changing is one group written.
    phone_groups.set_quotas({**STEPS[-1][0], "gpu": 0.6}, STEPS[-1][1])
    assert [p.parent.name for p in writes] == ["gpu"] * len(writes) and writes
