"""/dev/cpuset and /dev/stune|cpuctl as Android's init mounts them: Android's groups and CPU
lists, writes to tasks that really move processes (and fail for a pid that does not exist), a
group's CPUs setting how fast its processes run, and `cpus` writes checked like the kernel's."""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import pytest
from vphone.cpusets import CgroupTrees
from vphone.profiles import load_profile
from vphone.testing.socphone import budgeted, phone, read, su, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap"),
]
CPUSET = "/dev/cpuset"


def test_rooted_phone_has_androids_cpusets_that_really_move_processes(tmp_path: Path) -> None:
    with phone(budgeted("adreno-sd865", cpu=0.4), "VPSET01", tmp_path) as w:
        assert read(w, f"{CPUSET}/top-app/cpus") == "0-7\n"
        assert read(w, f"{CPUSET}/foreground/cpus") == "0-6\n"
        assert read(w, f"{CPUSET}/background/cpus") == "0-3\n"
        assert read(w, f"{CPUSET}/system-background/cpus") == "0-3\n"
        assert read(w, f"{CPUSET}/restricted/cpus") == "0-3\n"  # Android 11+
        assert read(w, "/dev/cpuctl/top-app/cpu.uclamp.latency_sensitive") == "1\n"  # Android 12: cpuctl
        cg = w.world.cgroups
        if cg is None:
            pytest.skip(f"no host cgroups here: {w.world.budget_note}")
        # Root moves its own shell into background and sees itself there, with the phone's pids.
        moved = su(w, f"echo $$ > {CPUSET}/background/tasks && cat {CPUSET}/background/tasks && echo $$")
        assert moved.returncode == 0, moved.stderr
        listed, me = moved.stdout.split()[:-1], moved.stdout.split()[-1]
        assert me in listed
        # A pid the phone does not have is refused by the kernel itself (ESRCH; the shell's echo
        # words it its own way), as is a pid of another phone or of the host.
        assert su(w, f"echo 99999 > {CPUSET}/top-app/tasks").returncode != 0
        assert su(w, f"echo {os.getpid()} > {CPUSET}/top-app/tasks").returncode != 0
        # The group's CPUs decide the speed: the little cores' quota.
        little = 256 / 1024  # capacity of the A55 cluster at its top clock
        assert math.isclose(cg.quota_cores("cpu/background") or 0, 0.4 * little, rel_tol=0.01)
        assert math.isclose(cg.quota_cores("cpu/top-app") or 0, 0.4, rel_tol=0.01)
        # Moving background onto the big cores makes it as fast as they are.
        assert su(w, f"echo 4-6 > {CPUSET}/background/cpus").returncode == 0
        wait_until(lambda: read(w, f"{CPUSET}/background/effective_cpus") == "4-6\n", "background on big")
        wait_until(
            lambda: math.isclose(cg.quota_cores("cpu/background") or 0, 0.4 * 900 / 1024, rel_tol=0.01),
            "the big cores' quota",
        )
        # A list outside the phone's CPUs is refused and the old one comes back.
        refused = su(w, f"echo 0-9 > {CPUSET}/background/cpus")
        if w.world.physics._cgfs is not None:  # cgroupfs over FUSE: refused in write(2) itself
            assert refused.returncode == 1 and "Invalid argument" in refused.stderr, refused
        else:  # plain files: the write succeeds, the daemon puts the old list back
            assert refused.returncode == 0, refused.stderr
            assert "cpus '0-9' invalid" in read(w, "/dev/.farm/kmsg")
        wait_until(lambda: read(w, f"{CPUSET}/background/cpus") == "4-6\n", "the old list back")


def test_unrooted_phone_shows_cpusets_read_only(tmp_path: Path) -> None:
    with phone(budgeted("adreno-sd8gen2"), "VPSET02", tmp_path) as w:
        assert read(w, f"{CPUSET}/top-app/cpus") == "0-7\n"
        assert read(w, f"{CPUSET}/background/cpus") == "0-2\n"  # sd8gen2: three little cores
        denied = w.sh(f"echo $$ > {CPUSET}/top-app/tasks")
        assert denied.returncode != 0 and "Permission denied" in denied.stderr


def test_sched_tree_follows_the_release(tmp_path: Path) -> None:
    base = load_profile("adreno-sd865")
    pie = base.model_copy(
        update={"props": {**base.props, "ro.build.version.sdk": "28", "ro.build.version.release": "9"}}
    )
    trees = CgroupTrees(tmp_path / "devcg", pie)
    trees.create(None)
    assert trees.sched_phone_dir == "/dev/stune"
    assert (trees.sched_dir / "top-app" / "schedtune.boost").read_text() == "10\n"
    assert (trees.sched_dir / "top-app" / "schedtune.prefer_idle").read_text() == "1\n"
    oreo = CgroupTrees(tmp_path / "oreo", load_profile("adreno-nexus6p"))
    oreo.create(None)
    assert oreo.sched_phone_dir == "/dev/cpuctl"
    assert (oreo.sched_dir / "bg_non_interactive" / "cpu.shares").read_text() == "52\n"
