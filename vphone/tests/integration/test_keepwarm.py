"""keepwarm: one idle-policy spinner per usable host CPU while a phone runs a lowered clock, gone
after the last such phone and when the process that started them dies; their time counts as
idle. A phone at rest starts none."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from vphone.calibration import idle_cores

from vphone import keepwarm

pytestmark = pytest.mark.integration


def _children_spinning(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(text.rpartition(")")[2].split()[1]) == parent and b"sched_setscheduler" in cmdline:
            found.append(int(stat.parent.name))
    return found


def _wait(predicate, what: str, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_spinners_follow_the_phones_and_run_at_idle_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(keepwarm.KEEP_WARM_ENV, raising=False)
    spinners = keepwarm._Spinners()
    cpus = os.sched_getaffinity(0)
    spinners.acquire()
    spinners.acquire()
    try:
        pids = _children_spinning(os.getpid())
        assert len(pids) == len(cpus)
        # Each has set its policy and CPU once it runs its loop.
        _wait(lambda: all(os.sched_getscheduler(p) == os.SCHED_IDLE for p in pids), "SCHED_IDLE")
        _wait(lambda: sorted(min(os.sched_getaffinity(p)) for p in pids) == sorted(cpus), "one per CPU")
        spinners.release()
        assert _children_spinning(os.getpid()) == pids  # a phone still runs
    finally:
        spinners.release()
    assert _children_spinning(os.getpid()) == []


def test_off_when_the_environment_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(keepwarm.KEEP_WARM_ENV, "0")
    spinners = keepwarm._Spinners()
    spinners.acquire()
    try:
        assert _children_spinning(os.getpid()) == []
    finally:
        spinners.release()


def test_a_spinner_ends_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from vphone import keepwarm; keepwarm.SPINNERS.acquire(); import time; time.sleep(60)",
        ],
        env={**os.environ, keepwarm.KEEP_WARM_ENV: "1"},
    )
    try:
        _wait(lambda: len(_children_spinning(parent.pid)) == len(os.sched_getaffinity(0)), "spinners")
        orphans = _children_spinning(parent.pid)
    finally:
        parent.kill()
        parent.wait()
    _wait(lambda: not any(Path(f"/proc/{p}").exists() for p in orphans), "orphaned spinners to exit")


def test_spinner_time_counts_as_idle() -> None:
    before = "cpu0 100 0 100 700 100 0 0 0 0 0\ncpu1 100 0 100 700 100 0 0 0 0 0\n"
    # 100 jiffies per CPU pass; cpu0 spent 50 busy, cpu1 80 busy, of which a spinner 60.
    after = "cpu0 150 0 100 750 100 0 0 0 0 0\ncpu1 180 0 100 720 100 0 0 0 0 0\n"
    assert idle_cores(before, after, [0, 1]) == pytest.approx(0.5 + 0.2)
    assert idle_cores(before, after, [0, 1], spun_jiffies=60) == pytest.approx(0.5 + 0.2 + 0.6)
    assert idle_cores(before, after, [0, 1], spun_jiffies=1000) == 2.0


def test_throttled_periods_of_a_slowed_group_are_what_counts() -> None:
    assert keepwarm.throttled_since({"cpu/affinity-f": 3}, {"cpu/affinity-f": 4})
    assert not keepwarm.throttled_since({"cpu/affinity-f": 4}, {"cpu/affinity-f": 4})
    assert not keepwarm.throttled_since({}, {"cpu/affinity-f": 9})  # first read: nothing to compare


def test_a_phone_at_rest_keeps_nothing_warm_and_work_held_back_on_slow_cores_does(virtual_phones) -> None:  # type: ignore[no-untyped-def]
    """Its background cpuset runs on little cores (slower than the prime core at every top
    clock): at rest no spinner; a loop pinned to the little cores, held back by their quota,
    starts them, and they end after it (KEEP_WARM_HOLD_NS)."""
    phones = virtual_phones(count=1, profiles=["adreno-sd865"])
    daemon = phones.daemon_pid
    assert daemon is not None
    device = phones[0].device(phones.client())
    # Ten physics ticks (rows of the ground-truth log) without spinners: a rule that counted
    # every slowed group started them at the first tick and kept them.
    rows = phones[0].ground_truth.read_text().count("\n")
    _wait(lambda: phones[0].ground_truth.read_text().count("\n") >= rows + 10, "ten ticks")
    assert _children_spinning(daemon) == []
    pid = device.shell("taskset f sh -c 'while :; do :; done' > /dev/null 2>&1 < /dev/null & echo $!").strip()
    assert pid.isdigit(), pid
    try:
        _wait(
            lambda: len(_children_spinning(daemon)) == len(os.sched_getaffinity(0)), "spinners for the loop"
        )
    finally:
        device.shell(f"kill {pid}")
    _wait(lambda: _children_spinning(daemon) == [], "spinners gone after the loop")
