"""`mount -t cgroup` and new cpuset groups inside a rooted phone (vphone/src/vphone/cgmounts.py), and
that they keep the phone a sandbox: a view shows the phone's own tree only, shell cannot mount
(not even by writing the daemon's request file itself), views cannot cover the phone's control
or kernel dirs, and links the phone's root plants in its cgroup tree are never followed by the
daemon into the host's files."""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import pytest
from vphone.cgroup import FARM_GROUP
from vphone.cgroupfs import CGROUP_FUSE_ENV
from vphone.testing.socphone import budgeted, phone, read, su

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap"),
]
VIEW = "/data/local/tmp/cg/devlib_cgh1"


def test_root_mounts_the_cpuset_view_and_makes_a_group_that_really_runs_tasks(tmp_path: Path) -> None:
    with phone(budgeted("adreno-sd865", cpu=0.4), "VPCGM01", tmp_path) as w:
        assert read(w, "/proc/cgroups").splitlines()[1:] == ["cpuset\t1\t6\t1", "cpu\t2\t7\t1"]
        done = su(w, f"mkdir -p {VIEW} && mount -t cgroup -o cpuset devlib_cgh1 {VIEW}")
        assert done.returncode == 0, done.stderr
        listed = w.sh("mount").stdout
        assert (
            f"devlib_cgh1 on {VIEW} type cgroup (rw,nosuid,nodev,noexec,relatime,cpuset,noprefix," in listed
        )
        assert "/tasks type" not in listed  # the membership binds are part of the cgroup mount
        # The same hierarchy as /dev/cpuset: Android's groups, and nothing of the host's.
        assert w.sh(f"ls {VIEW}").stdout == w.sh("ls /dev/cpuset").stdout
        # A new group: laid out as the kernel does (no CPUs yet) by the next command.
        assert su(w, f"mkdir {VIEW}/big").returncode == 0
        assert read(w, "/dev/cpuset/big/cpus") == "\n"
        assert su(w, f"echo 4-6 > {VIEW}/big/cpus && echo 0 > {VIEW}/big/mems").returncode == 0
        assert read(w, "/dev/cpuset/big/effective_cpus") == "4-6\n"
        moved = su(w, f"echo $$ > {VIEW}/big/cgroup.procs && cat /dev/cpuset/big/tasks && echo $$")
        assert moved.returncode == 0, moved.stderr
        assert moved.stdout.split()[-1] in moved.stdout.split()[:-1]
        # A pid of the host is not the phone's to move (ESRCH from the kernel itself).
        assert su(w, f"echo {os.getpid()} > {VIEW}/big/tasks").returncode != 0
        # Nested groups and bad cpus are judged against the parent.
        nested = su(w, f"mkdir {VIEW}/big/inner && echo 7 > {VIEW}/big/inner/cpus")
        if w.world.physics._cgfs is not None:  # cgroupfs over FUSE: refused in write(2)
            assert nested.returncode == 1 and "Invalid argument" in nested.stderr, nested
        else:
            assert nested.returncode == 0, nested.stderr
            assert "cpuset: big/inner: cpus '7' invalid or outside the parent" in read(w, "/dev/.farm/kmsg")
        assert read(w, "/dev/cpuset/big/inner/cpus") == "\n"
        cg = w.world.cgroups
        if cg is None:
            pytest.skip(f"no host cgroups here: {w.world.budget_note}")
        # The group is a host cgroup under the phone's own, at the big cores' speed.
        assert cg.group_dir("cpu/big").is_dir() and cg.group_dir("cpu/big/inner").is_dir()
        assert not (cg.host.cpu_root / FARM_GROUP / "big").exists()
        assert math.isclose(cg.quota_cores("cpu/big") or 0, 0.4 * 900 / 1024, rel_tol=0.01)


def test_cgroup_mounts_keep_the_phone_a_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The plain trees (no FUSE): only there can the phone's root plant links for the daemon.
    monkeypatch.setenv(CGROUP_FUSE_ENV, "0")
    victim = tmp_path / "host-file"
    victim.write_text("the host's\n")
    with phone(budgeted("adreno-sd865", cpu=0.4), "VPCGM02", tmp_path) as w:
        # Shell may not mount, neither through mount nor by writing the daemon's request itself.
        denied = w.sh("mkdir -p /data/local/tmp/v && mount -t cgroup -o cpuset x /data/local/tmp/v")
        assert denied.returncode == 1 and "Operation not permitted" in denied.stderr
        forged = '{"device": "x", "options": "cpuset", "dir": "/data/local/tmp/v"}'
        assert w.sh(f"echo '{forged}' > /dev/.farm/shared/mount.request.1").returncode == 0
        assert "/data/local/tmp/v" not in w.sh("cat /proc/mounts").stdout  # handled and refused
        assert w.sh("ls /dev/.farm/shared/mount.answer.1").returncode != 0  # no answer either
        # Root may not cover its control dir, the kernel's trees or a controller it has no view of.
        for target, error in (
            ("/dev/.farm", "Permission denied"),
            ("/proc", "Permission denied"),
            ("/system/bin", "Permission denied"),
        ):
            refused = su(w, f"mount -t cgroup -o cpuset x {target}")
            assert refused.returncode == 1 and error in refused.stderr, (target, refused.stderr)
        assert "Invalid argument" in su(w, "mount -t cgroup -o memory x /data/local/tmp/v").stderr
        assert "Device or resource busy" in su(w, "mount -t cgroup -o cpu,cpuset x /data/local/tmp/v").stderr
        assert "Operation not permitted" in su(w, "mount -t tmpfs none /data/local/tmp/v").stderr
        # Links planted in the cgroup tree name host files when the daemon resolves them: it
        # never follows one (a write to cpus would rewrite effective_cpus through it).
        planted = su(
            w,
            "rm /dev/cpuset/background/effective_cpus"
            f" && ln -s {victim} /dev/cpuset/background/effective_cpus"
            f" && ln -s {tmp_path} /dev/cpuset/linked && echo 0-2 > /dev/cpuset/background/cpus",
        )
        assert planted.returncode == 0, planted.stderr
        assert w.sh("ls /dev/cpuset").returncode == 0  # the next command: the writes are handled
        assert victim.read_text() == "the host's\n"
        # Shell may not touch the control dir any more; its root may: a kernel-log link planted
        # there is not followed.
        assert w.sh(f"rm -f /dev/.farm/kmsg && ln -s {victim} /dev/.farm/kmsg").returncode != 0
        assert su(w, f"rm -f /dev/.farm/kmsg && ln -s {victim} /dev/.farm/kmsg").returncode == 0
        assert su(w, "echo 0-99 > /dev/cpuset/background/cpus").returncode == 0
        assert w.sh("true").returncode == 0
        assert victim.read_text() == "the host's\n"
        # beside the phone: its userdata partition (userdata.py), nothing else
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            ["host-file", "VPCGM02", "VPCGM02.userdata.img"]
        )
