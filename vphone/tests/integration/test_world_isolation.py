"""Each phone's processes in its own host cgroups: every process of the phone joins them (shell,
su's children, init), the quota caps a phone that tries to use more, a fork flood stops at the
pids limit while the neighbours keep serving, and nothing is left behind on the host."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from vphone.cgroup import CPU_GROUP, GPU_GROUP
from vphone.procscan import ProcScanner
from vphone.testing.socphone import budgeted, install, phone, su, wait_until
from vphone.worldthread import WorldThread

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap"),
]


def _needs_cgroups(w: WorldThread) -> None:
    if w.world.cgroups is None:
        pytest.skip(f"no CPU budgets here: {w.world.budget_note}")


def _members(w: WorldThread) -> set[int]:
    return set(ProcScanner(w.world.sandbox.pidns).members())


def _cpu_ns(w: WorldThread) -> int:
    """On-CPU ns of every thread of the phone so far (schedstat)."""
    total = 0
    for pid in _members(w):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
    return total


def _in_group(w: WorldThread, pid: int) -> bool:
    cg = w.world.cgroups
    assert cg is not None
    procs = cg.procs_file(CPU_GROUP).read_text().split()
    return str(pid) in procs or any(
        str(pid) in (cg.group_dir(f"{CPU_GROUP}/{g.name}") / "cgroup.procs").read_text().split()
        for g in w.world.cgroup_trees.groups()
        if g.name
    )


def test_every_process_of_a_phone_is_in_its_cgroups(tmp_path: Path) -> None:
    with phone(budgeted("adreno-sd865", cpu=0.3, gpu=0.2), "VPISO01", tmp_path) as w:
        _needs_cgroups(w)
        cg = w.world.cgroups
        assert cg is not None
        sleeper = subprocess.Popen(
            w.world.shell_argv("sleep 30 & su -c 'sleep 31' & wait"),
            env=w.world.shell_env(None),
            start_new_session=True,
        )
        try:
            wait_until(lambda: len(_members(w)) >= 5, "the shell, sleep and su's sleep")
            outside = [pid for pid in _members(w) if not _in_group(w, pid)]
            assert outside == []  # init, the reaper, adb shells and su's children alike
            # So the physics may look only at the cgroup's pids: it finds the same processes as a
            # scan of all of /proc (compared until both agree: a process may start in between).
            scanner = ProcScanner(w.world.sandbox.pidns, candidates=cg.member_pids)
            wait_until(lambda: set(scanner.members()) == _members(w), "the cgroup's view to match /proc's")
            assert abs((cg.quota_cores(CPU_GROUP) or 0) - 0.3) < 1e-3
            assert abs((cg.quota_cores(GPU_GROUP) or 0) - 0.2) < 1e-3
        finally:
            os.killpg(sleeper.pid, signal.SIGKILL)
            sleeper.wait(10)
        cpu_dir = cg.cpu_dir
    assert not cpu_dir.exists()  # removed with the phone


def test_a_phone_that_wants_more_is_held_to_its_quota(tmp_path: Path) -> None:
    with phone(budgeted("adreno-sd8gen2", cpu=0.2, gpu=0.2), "VPISO02", tmp_path) as w:
        _needs_cgroups(w)
        cg = w.world.cgroups
        assert cg is not None
        before = cg.cpu_stat(CPU_GROUP)
        hog = subprocess.Popen(
            w.world.shell_argv("for i in 1 2 3; do (while :; do :; done) & done; wait"),
            env=w.world.shell_env(None),
            start_new_session=True,
        )
        try:
            # The kernel's own counters say the quota is in force...
            wait_until(lambda: cg.cpu_stat(CPU_GROUP).nr_throttled - before.nr_throttled >= 20, "throttling")
            # ...and the three loops together never get more than it (a busy host can only give
            # them less, so this bound cannot race).
            start_ns, start = _cpu_ns(w), time.monotonic()
            wait_until(lambda: time.monotonic() - start >= 2.0, "a 2 s window")
            used_cores = (_cpu_ns(w) - start_ns) / 1e9 / (time.monotonic() - start)
            assert used_cores <= 0.2 * 1.25, used_cores
        finally:
            os.killpg(hog.pid, signal.SIGKILL)
            hog.wait(10)


def test_a_fork_flood_is_capped_and_the_other_phones_keep_serving(tmp_path: Path) -> None:
    with (
        phone(budgeted("adreno-sd865", cpu=0.2, gpu=0.1, pids_max=48), "VPISO03", tmp_path) as flood,
        phone(budgeted("adreno-sd8gen2", cpu=0.3, gpu=0.1), "VPISO04", tmp_path) as other,
    ):
        _needs_cgroups(flood)
        cg = flood.world.cgroups
        assert cg is not None
        bomb = subprocess.Popen(
            flood.world.shell_argv("f() { f | f & }; f; sleep 60"),
            env=flood.world.shell_env(None),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            wait_until(lambda: cg.pids_max_hits() > 0, "forks to fail at pids.max")
            assert len(_members(flood)) <= 48
            served = other.sh("getprop ro.product.model; echo ok", timeout_s=30)
            assert served.returncode == 0 and served.stdout.split()[-1] == "ok"
            gemm_like = other.sh("i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; echo $i", timeout_s=60)
            assert gemm_like.stdout.strip() == "2000"
        finally:
            os.killpg(bomb.pid, signal.SIGKILL)
            bomb.wait(10)
    # Stopping the flooded phone ended every process of it (the pid namespace died with init).


def test_su_children_and_pushed_programs_stay_in_the_budget(tmp_path: Path, cl_busy_binary: Path) -> None:
    with phone(budgeted("adreno-sd865", cpu=0.3, gpu=0.25), "VPISO05", tmp_path) as w:
        _needs_cgroups(w)
        cg = w.world.cgroups
        assert cg is not None
        busy = install(w, cl_busy_binary)
        run = subprocess.Popen(
            w.world.shell_argv(f"su -c '{busy} --seconds=20'"),
            env=w.world.shell_env(None),
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            assert run.stdout is not None and "start" in run.stdout.readline()
            # PoCL's worker threads are the GPU: the physics moves them under the GPU's quota.
            wait_until(lambda: len(cg.threads(GPU_GROUP)) > 0, "PoCL workers in the gpu group")
            assert all(_in_group(w, pid) for pid in _members(w))
        finally:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(10)
        assert su(w, "true").returncode == 0
