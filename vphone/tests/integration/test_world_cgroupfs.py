"""A rooted phone's cgroup trees with cgroupfs semantics (vphone/src/vphone/cgroupfs.py), through adb
on a real phone sandbox: groups made and removed as the kernel does, tasks listed in the phone's
pid numbers and moved for real, writes refused in write(2) with the kernel's errno, and the
confinement (other pids, shell, names, umount)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from vphone.cgroupfs import CGROUP_FUSE_ENV
from vphone.testing.socphone import budgeted, phone, read, su

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="FUSE and phone uids need root"),
]
CPUSET = "/dev/cpuset"


def _fused(w: object) -> None:
    if getattr(getattr(w, "world"), "physics")._cgfs is None:  # noqa: B009
        pytest.skip("FUSE is not usable here: the plain trees are in use")


def test_groups_are_made_moved_into_and_removed_as_the_kernel_does(tmp_path: Path) -> None:
    with phone(budgeted("adreno-sd865", cpu=0.4), "VPCGF01", tmp_path) as w:
        _fused(w)
        # One command: mkdir, the lists, moving the shell itself; no wait for any layout.
        done = su(
            w,
            f"mkdir {CPUSET}/g && echo 0-3 > {CPUSET}/g/cpus && echo 0 > {CPUSET}/g/mems"
            f" && echo $$ > {CPUSET}/g/tasks && cat {CPUSET}/g/tasks && echo self=$$",
        )
        assert done.returncode == 0, done.stderr
        *listed, self_line = done.stdout.split()
        assert self_line.removeprefix("self=") in listed
        assert read(w, f"{CPUSET}/g/effective_cpus") == "0-3\n"
        assert sorted(w.sh(f"ls {CPUSET}/g").stdout.split()) == sorted(
            w.sh(f"ls {CPUSET}/top-app").stdout.split()
        )
        cg = w.world.cgroups
        if cg is not None:
            assert cg.group_dir("cpu/g").is_dir()
        # A group with tasks or children is busy; an empty one goes, with its host cgroup.
        busy = su(w, f"sleep 30 & echo $! > {CPUSET}/g/tasks; rmdir {CPUSET}/g; echo rc=$?; kill $!")
        assert "Device or resource busy" in busy.stderr and "rc=1" in busy.stdout, busy
        assert su(w, f"mkdir {CPUSET}/g/inner && rmdir {CPUSET}/g").returncode != 0
        removed = su(w, f"rmdir {CPUSET}/g/inner && rmdir {CPUSET}/g && ls {CPUSET}")
        assert removed.returncode == 0, removed.stderr
        assert "g" not in removed.stdout.split()
        if cg is not None:
            assert not cg.group_dir("cpu/g").exists()
        # A group without cpus takes no task (ENOSPC), a list outside the parent is EINVAL.
        empty = su(w, f"mkdir {CPUSET}/e && echo $$ > {CPUSET}/e/tasks")
        assert empty.returncode != 0 and "No space left on device" in empty.stderr, empty
        bad = su(w, f"echo 0-9 > {CPUSET}/e/cpus")
        assert bad.returncode != 0 and "Invalid argument" in bad.stderr
        assert read(w, f"{CPUSET}/e/cpus") == "\n"
        # Files are the kernel's: no new ones, no unlink, no rename, no chmod.
        for command, error in (
            (f"echo x > {CPUSET}/e/newfile", "Permission denied"),
            (f"rm {CPUSET}/e/cpus", "Operation not permitted"),
            (f"mv {CPUSET}/e/cpus {CPUSET}/e/cpus2", "Operation not permitted"),
            (f"chmod 777 {CPUSET}/e/cpus", "Operation not permitted"),
            (f"ln -s /etc {CPUSET}/e/link", "Operation not permitted"),
        ):
            refused = su(w, command)
            assert refused.returncode != 0 and error in refused.stderr, (command, refused)


def test_tasks_list_phone_pids_and_moves_stay_inside_the_phone(tmp_path: Path) -> None:
    with phone(budgeted("adreno-sd865", cpu=0.4), "VPCGF02", tmp_path) as w:
        _fused(w)
        procs = f"{CPUSET}/background/cgroup.procs"
        moved = su(w, f"echo $$ > {procs} && cat {procs}; ps -A -o PID")
        assert moved.returncode == 0, moved.stderr
        phone_pids = {int(p) for p in moved.stdout.split() if p.isdigit()}
        listed = [int(p) for p in read(w, f"{CPUSET}/top-app/tasks").split()]
        # Every listed tid is one of the phone's (no host numbers); ps shows processes, tasks threads.
        ps = {int(p) for p in w.sh("ps -A -T -o TID").stdout.split() if p.isdigit()}
        assert set(listed) <= ps | phone_pids
        assert all(p < 100000 for p in listed)
        # A host pid, another process's number that the phone lacks, pid garbage.
        host = subprocess.Popen(["sleep", "30"])
        try:
            for pid, error in ((host.pid, "No such process"), (999999, "No such process"), ("x", "Invalid")):
                refused = su(w, f"echo {pid} > {CPUSET}/top-app/tasks")
                assert refused.returncode != 0 and error in refused.stderr, (pid, refused)
            cg = w.world.cgroups
            if cg is not None:
                assert str(host.pid) not in cg.threads_file("cpu/top-app").read_text().split()
        finally:
            host.kill()
            host.wait()
        # Root moves shell's task too (the daemon moves it, not the phone's uid on the host).
        shells = w.sh("nohup sleep 30 > /dev/null 2>&1 < /dev/null & echo $!").stdout.strip()
        try:
            taken = su(w, f"echo {shells} > {CPUSET}/background/tasks && cat {CPUSET}/background/tasks")
            assert taken.returncode == 0 and shells in taken.stdout.split(), taken
        finally:
            su(w, f"kill {shells}")
        # Shell writes no tasks (root/system's, 0664), makes no group; `..` is no group name.
        denied = w.sh(f"echo $$ > {CPUSET}/top-app/tasks")
        assert denied.returncode != 0 and "Permission denied" in denied.stderr
        assert w.sh(f"mkdir {CPUSET}/mine").returncode != 0
        assert su(w, f"mkdir {CPUSET}/top-app/..").returncode != 0
        assert su(w, f"mkdir {CPUSET}/affinity-3").returncode != 0  # taskset's host groups
        # The phone's root cannot take the view away.
        kept = su(w, f"umount {CPUSET}; umount -l {CPUSET}; cat {CPUSET}/top-app/cpus")
        assert kept.stdout.strip().endswith("0-7"), kept
        assert "cgroupfs" in w.sh("grep /dev/cpuset /proc/mounts").stdout


def test_sched_tree_has_groups_and_bookkeeping_membership(tmp_path: Path) -> None:
    with phone(budgeted("adreno-sd865", cpu=0.4), "VPCGF03", tmp_path) as w:
        _fused(w)
        sched = w.world.cgroup_trees.sched_phone_dir
        done = su(
            w,
            f"mkdir {sched}/mine && echo 512 > {sched}/mine/cpu.shares && echo $$ > {sched}/mine/tasks"
            f" && cat {sched}/mine/cpu.shares {sched}/mine/tasks && echo self=$$",
        )
        assert done.returncode == 0, done.stderr
        shares, *listed, self_line = done.stdout.split()
        assert shares == "512" and self_line.removeprefix("self=") in listed
        assert su(w, f"echo lots > {sched}/mine/cpu.shares").returncode != 0
        assert su(w, f"rmdir {sched}/mine").returncode == 0  # its task (that su) has exited


def test_fallback_without_fuse_keeps_the_plain_trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CGROUP_FUSE_ENV, "0")
    with phone(budgeted("adreno-sd865", cpu=0.4), "VPCGF04", tmp_path) as w:
        assert w.world.physics._cgfs is None
        assert read(w, f"{CPUSET}/top-app/cpus") == "0-7\n"
        moved = su(w, f"echo $$ > {CPUSET}/background/tasks && cat {CPUSET}/background/tasks && echo $$")
        assert moved.returncode == 0 and moved.stdout.split()[-1] in moved.stdout.split()[:-1]
