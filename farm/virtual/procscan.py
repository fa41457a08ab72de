"""Find one phone's processes on the host and measure their CPU time, split PoCL / other.

A process belongs to the phone when /proc/PID/ns/pid is the phone's PID namespace. PoCL (our
"GPU") runs kernels on worker threads of the process that loaded libpocl; this PoCL (3.1) does
not name them, so GPU time = on-CPU + runqueue-wait time of the non-main threads of processes
that map libpocl (a kernel is in flight while its worker runs or waits for a host core).
On-CPU time comes from /proc/PID/task/TID/schedstat (ns resolution), falling back to stat ticks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

POCL_MARKER = "libpocl"
# How often a member process without libpocl is re-checked (it may dlopen OpenCL later): every
# scan while it is young (a benchmark loads OpenCL first thing; its workers should reach the GPU's
# budget at once), then every half second.
MAPS_RECHECK_S = 0.5
YOUNG_PROCESS_S = 3.0
_TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuSample:
    """CPU time spent since the previous scan, in ns."""

    pocl_ns: int
    other_ns: int
    rss_kb: int
    pids: tuple[int, ...]
    pocl_tids: tuple[int, ...] = ()  # the "GPU" threads seen in this scan
    # Threads (other than PoCL's) that wanted a core: sum of min(1, (on-CPU + runqueue wait) /
    # interval). Wait includes time throttled by the cgroup quota and queued behind other host
    # work, so a busy thread counts as 1 however little CPU it got.
    demand_threads: float = 0.0


def _thread_times_ns(task_dir: str) -> tuple[int, int] | None:
    """(on-CPU ns, runqueue-wait ns) of one thread. A PoCL worker that is runnable but waits for
    a host core still has a kernel in flight, i.e. the "GPU" is busy; without schedstat the wait
    is unknown (0)."""
    try:
        with open(f"{task_dir}/schedstat", "rb") as f:
            fields = f.read().split()
        return int(fields[0]), int(fields[1])
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"{task_dir}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * _TICK_NS, 0
    except (OSError, ValueError, IndexError):
        return None


def _maps_pocl(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            return POCL_MARKER.encode() in f.read()
    except OSError:
        return False


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return 0


class ProcScanner:
    """Stateful: each `scan` returns the CPU time used since the previous one."""

    def __init__(self, pidns: str, exclude_pids: frozenset[int] = frozenset()) -> None:
        self.pidns = pidns
        self.exclude = exclude_pids
        self._ns_of: dict[int, bool] = {}  # pid -> belongs to this phone (never changes for a pid)
        self._pocl: dict[int, tuple[bool, float, float]] = {}  # pid -> (maps pocl, checked at, first seen)
        self._prev: dict[tuple[int, int], tuple[int, int]] = {}  # (pid, tid) -> (cpu, wait) ns last scan

    def members(self) -> list[int]:
        pids = []
        seen = set()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            seen.add(pid)
            member = self._ns_of.get(pid)
            if member is None:
                try:
                    member = os.readlink(f"/proc/{pid}/ns/pid") == self.pidns
                except OSError:
                    continue
                self._ns_of[pid] = member
            if member and pid not in self.exclude:
                pids.append(pid)
        for gone in [p for p in self._ns_of if p not in seen]:
            del self._ns_of[gone]
            self._pocl.pop(gone, None)
        return pids

    def scan(self, now_s: float, max_new_ns: int, interval_ns: int = 0) -> CpuSample:
        """CPU time since the last scan. A thread seen for the first time counts at most
        `max_new_ns` (it started within the interval, or existed before we started looking).
        `interval_ns`: the time since the last scan, for `demand_threads`."""
        pocl_ns = other_ns = rss_kb = 0
        demand = 0.0
        pocl_tids: list[int] = []
        current: dict[tuple[int, int], tuple[int, int]] = {}
        pids = self.members()
        for pid in pids:
            has_pocl, checked, first_seen = self._pocl.get(pid, (False, -1e9, now_s))
            young = now_s - first_seen < YOUNG_PROCESS_S
            if not has_pocl and (young or now_s - checked >= MAPS_RECHECK_S):
                has_pocl = _maps_pocl(pid)
                self._pocl[pid] = (has_pocl, now_s, first_seen)
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            rss_kb += _rss_kb(pid)
            for t in tids:
                tid = int(t)
                is_pocl = has_pocl and tid != pid
                times = _thread_times_ns(f"/proc/{pid}/task/{t}")
                if times is None:
                    continue
                key = (pid, tid)
                current[key] = times
                prev = self._prev.get(key)
                if prev is None:
                    on = min(times[0], max_new_ns)
                    wait = min(times[1], max(0, max_new_ns - on))
                else:
                    on, wait = max(0, times[0] - prev[0]), max(0, times[1] - prev[1])
                if is_pocl:
                    pocl_ns += on + wait
                    pocl_tids.append(tid)
                else:
                    other_ns += on
                    if interval_ns > 0:
                        demand += min(1.0, (on + wait) / interval_ns)
        self._prev = current
        return CpuSample(
            pocl_ns=pocl_ns,
            other_ns=other_ns,
            rss_kb=rss_kb,
            pids=tuple(pids),
            pocl_tids=tuple(pocl_tids),
            demand_threads=demand,
        )
