"""A taskset mask narrowed to the caller's cpuset, as the kernel narrows it: a phone whose init
puts its services (adbd, so every adb shell) in /dev/cpuset/foreground through ro.cpuset.default
(AOSP system/core/init/README.md, `writepid`) cannot pin a benchmark to the prime core, and is
not told: taskset succeeds, and only reading the mask back shows it (kernel/sched/core.c
`__sched_setaffinity` intersects the mask with `cpuset_cpus_allowed`)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from vphone.testing.socphone import budgeted, phone
from vphone.worldthread import WorldThread

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap"),
]
PID = re.compile(r"pid \d+'s")


@pytest.fixture
def foreground(tmp_path: Path) -> Iterator[WorldThread]:
    # adreno-sd8gen2: little 0-2, mid 3-6, prime 7; the stock foreground cpuset is 0-6.
    profile = budgeted("adreno-sd8gen2", cpu=0.25)
    props = {**profile.props, "ro.cpuset.default": "/foreground"}
    with phone(profile.model_copy(update={"props": props}), "VPCPUSET1", tmp_path) as w:
        if w.world.cgroups is None:
            pytest.skip(f"no CPU budgets here: {w.world.budget_note}")
        yield w


def _mask(w: WorldThread, command: str) -> str:
    result = w.sh(command)
    assert result.returncode == 0, result
    return PID.sub("pid N's", result.stdout)


def test_a_shell_in_the_foreground_cpuset_gets_its_mask_narrowed(foreground: WorldThread) -> None:
    w = foreground
    assert w.sh("getprop ro.cpuset.default").stdout == "/foreground\n"
    # The shell starts where init put adbd: its mask is the cpuset's CPUs.
    assert _mask(w, "taskset -p $$") == "pid N's current affinity mask: 7f\n"
    assert w.sh("cat /dev/cpuset/foreground/cpus").stdout == "0-6\n"
    # Asked for the mid cores and the prime one: the prime one is dropped, silently.
    narrowed = "taskset f0 sh -c 'taskset -p $$'"
    assert _mask(w, narrowed) == "pid N's current affinity mask: 70\n"
    # Only the prime core: nothing is left, the kernel's EINVAL.
    alone = w.sh("taskset 80 true")
    assert alone.returncode == 1
    assert PID.sub("pid N's", alone.stderr) == "taskset: failed to set pid N's affinity: Invalid argument\n"


def test_a_shell_in_the_top_cpuset_keeps_its_mask(tmp_path: Path) -> None:
    """Stock AOSP sets no ro.cpuset.default: the shell may pin to any online CPU."""
    with phone(budgeted("adreno-sd8gen2", cpu=0.25), "VPCPUSET2", tmp_path) as w:
        if w.world.cgroups is None:
            pytest.skip(f"no CPU budgets here: {w.world.budget_note}")
        assert _mask(w, "taskset f0 sh -c 'taskset -p $$'") == "pid N's current affinity mask: f0\n"
