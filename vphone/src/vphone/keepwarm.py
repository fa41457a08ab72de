"""Keep the host's CPUs busy at the lowest priority while phones run under CPU budgets.

A virtual SoC slows a phone by its CFS quota (cgroup.cfs_quota): the phone's threads run, are
held back, run again. On a VM host a CPU with nothing to run halts, and work that resumes on it
after a halt pays for it: measured on this 2-core Firecracker VM (2026-12-07), a 160^3 gemm held
to 5 ms per 52 ms period spent 2.0-2.4 ms of CPU per iteration (3.0 pinned to one CPU) against
1.5 unthrottled, and 1.6-1.9 ms with an idle-policy spinner on each CPU. The loss grows with the
held-back gap, so a phone pinned to a low clock (longer gaps) ran 3.3-3.9x slower where its
clock tables say 2.61x; with the spinners 2.3-2.8x. Keeping the guest idle loop polling
(/dev/cpu_dma_latency = 0) did not help (2.34 ms per iteration): a runnable task did.

So while work of a phone of this process is held back at a slowed speed (a group below full
speed, from a lowered clock or a cpuset of slower cores, whose cgroup cpu.stat counted a
throttled period in the last 2 s: physics.py), one process per usable host CPU spins under
SCHED_IDLE: it runs only when nothing else on that CPU wants to (any normal task preempts it on
wake-up), so the phones' work resumes on a CPU that never halted. It is not free: with spinners
on all the time, two test workers' phones on a 2-core host ran 15-25% slower (a VM's vCPUs spend
their host's share spinning), and a rule that counted every slowed group, busy or not, kept them
on with every phone at rest (the suite 1278 -> 1710 s); hence only while throttled work waits.
Calibration counts their time as idle. VPHONE_KEEP_WARM=0 turns it off. Reference counted over
the phones; a spinner exits by itself when the process that started it is gone.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

KEEP_WARM_ENV = "VPHONE_KEEP_WARM"
# Spins until its parent (the process that started it) is gone: no orphan outlives a killed daemon.
_SPIN = (
    "import os, sys\n"
    "parent, cpu = int(sys.argv[1]), int(sys.argv[2])\n"
    "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
    "os.sched_setaffinity(0, {cpu})\n"
    "while os.getppid() == parent:\n"
    "    for _ in range(100000):\n"
    "        pass\n"
)


def throttled_since(before: Mapping[str, int], now: Mapping[str, int]) -> bool:
    """Whether a group's count of throttled periods grew between two reads (a group first seen
    now has no earlier count to grow from)."""
    return any(count > before.get(group, count) for group, count in now.items())


def keep_warm_enabled(environ: Mapping[str, str]) -> bool:
    return environ.get(KEEP_WARM_ENV, "1") != "0"


class _Spinners:
    """The spinner processes of this process (one owner: the module's SPINNERS)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._procs: dict[int, subprocess.Popen[bytes]] = {}  # host CPU -> its spinner

    def acquire(self) -> None:
        """One more phone with budgets; the first starts a spinner per usable host CPU."""
        with self._lock:
            self._users += 1
            if self._users == 1 and keep_warm_enabled(os.environ):
                self._start(sorted(os.sched_getaffinity(0)))

    def release(self) -> None:
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users == 0:
                self._stop()

    def cpu_jiffies(self) -> int:
        """User + system clock ticks the spinners have used (to count their time as idle)."""
        with self._lock:
            pids = [p.pid for p in self._procs.values() if p.poll() is None]
        return sum(_process_jiffies(pid) for pid in pids)

    def _start(self, cpus: Iterable[int]) -> None:
        for cpu in cpus:
            try:
                self._procs[cpu] = subprocess.Popen(
                    [sys.executable, "-S", "-c", _SPIN, str(os.getpid()), str(cpu)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    close_fds=True,
                    process_group=0,  # a Ctrl-C to the daemon's group is not theirs to take
                )
            except OSError as exc:
                log.warning("cannot keep host CPU %d warm (phones may slow more at low clocks): %s", cpu, exc)
        if self._procs:
            log.info("keeping host CPUs %s warm at idle priority while phones run", sorted(self._procs))

    def _stop(self) -> None:
        procs, self._procs = self._procs, {}
        for proc in procs.values():
            proc.kill()
        for proc in procs.values():
            proc.wait()


def _process_jiffies(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rpartition(")")[2].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))


SPINNERS = _Spinners()
