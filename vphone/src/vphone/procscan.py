"""Find one phone's processes on the host and measure their CPU time, split PoCL / other.

A process belongs to the phone when /proc/PID/ns/pid is the phone's PID namespace. PoCL (our
"GPU") runs kernels on worker threads of the process that loaded libpocl, and GPU time = on-CPU +
runqueue-wait time of those workers (a kernel is in flight while its worker runs or waits for a
host core). This PoCL (3.1) does not name them, and a process that loads OpenCL has other
threads too: llama-bench built with its OpenCL backend maps libpocl at start-up and decodes on
its CPU threads, which read 72-95% GPU busy when every non-main thread of such a process counted.
A worker is told by where it waits: between kernels it sleeps in futex(2) on the pthread
device's scheduler condition, a static of libpocl-devices-pthread.so, so the futex address in
/proc/PID/task/TID/syscall lies in a pocl mapping (_waits_in_pocl). A thread is a worker from
the first scan that sees it wait there (workers are created at clGetDeviceIDs and wait for work
before any kernel); until then its time is CPU time. Where the syscall file cannot be read (it
needs ptrace access: the daemon is root), every non-main thread of the process counts, as before.
On-CPU time comes from /proc/PID/task/TID/schedstat (ns resolution), falling back to stat ticks.

Cost (it runs ~10 times a second per phone): the candidates are the pids of the phone's own
cgroup when it has one (every phone process joins it before it enters the phone), not all of
/proc, whose size grows with the host; a process's maps are re-read only if it ran since the
last look (loading libpocl takes CPU time); RSS only when asked for.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

POCL_MARKER = "libpocl"
# How often a member process without libpocl is re-checked (it may dlopen OpenCL later): every
# scan while it is young (a benchmark loads OpenCL first thing; its workers should reach the GPU's
# budget at once), then every half second.
MAPS_RECHECK_S = 0.5
YOUNG_PROCESS_S = 3.0
FUTEX_SYSCALL_X86_64 = 202
FUTEX_SYSCALL_AARCH64 = 98
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
    # interval), or 1 for a thread runnable at the scan (_runnable). Wait includes time throttled
    # by the cgroup quota and queued behind other host work, so a busy thread counts as 1
    # however little CPU it got.
    demand_threads: float = 0.0


def _runnable(task_dir: str) -> bool:
    """Whether the thread runs or waits for a core now (state R; a thread throttled by its
    cgroup's quota is R too). schedstat adds a runqueue wait only when the thread gets its core:
    a thread that waits longer than a scan interval (8 threads behind a phone's quota of about
    one host core) shows nothing in one interval and at most 1 in the next, and demand counted
    from that alone was about half of such threads, so the quota that follows the demand gave
    all cores of a phone about half their budget."""
    try:
        with open(f"{task_dir}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split(maxsplit=1)[0] == b"R"
    except (OSError, IndexError):
        return False


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


def pocl_ranges(maps_text: str) -> tuple[tuple[int, int], ...]:
    """Address ranges of every mapping of a pocl library (/proc/PID/maps text)."""
    ranges = []
    for line in maps_text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and POCL_MARKER in fields[5].rsplit("/", 1)[-1]:
            start, _, end = fields[0].partition("-")
            ranges.append((int(start, 16), int(end, 16)))
    return tuple(ranges)


def waits_in(syscall_text: str, ranges: tuple[tuple[int, int], ...]) -> bool:
    """Whether /proc/PID/task/TID/syscall shows a futex wait on an address inside `ranges`
    ("202 0x7f..128 0x189 ..." on x86_64: the number, then the arguments; "running" or "-1 ..."
    when not in a system call)."""
    fields = syscall_text.split()
    if len(fields) < 2 or not fields[0].isdigit():
        return False
    if int(fields[0]) not in (FUTEX_SYSCALL_X86_64, FUTEX_SYSCALL_AARCH64):
        return False
    address = int(fields[1], 16)
    return any(start <= address < end for start, end in ranges)


def _read(path: str) -> str:
    with open(path, "rb") as f:
        return f.read().decode("ascii", "replace")


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return 0


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


@dataclass
class _PoclCheck:
    """What a process's maps said, and when: libpocl once seen stays (it is never unloaded)."""

    has_pocl: bool
    checked_s: float
    first_seen_s: float
    cpu_ns_at_check: int  # on-CPU time of its threads when the maps were read


class ProcScanner:
    """Stateful: each `scan` returns the CPU time used since the previous one.
    `candidates`: the pids that may belong to the phone (its cgroup's, read per scan); no
    callable, or one that returns None or raises OSError, means every pid in /proc. Membership
    is still the PID namespace: a process joins the cgroup just before it enters the namespace."""

    def __init__(
        self,
        pidns: str,
        exclude_pids: frozenset[int] = frozenset(),
        candidates: Callable[[], Iterable[int] | None] | None = None,
    ) -> None:
        self.pidns = pidns
        self.exclude = exclude_pids
        self._candidates = candidates
        self._ns_of: dict[int, bool] = {}  # pid -> belongs to this phone (never changes for a pid)
        self._pocl: dict[int, _PoclCheck] = {}
        self._workers: set[tuple[int, int]] = set()  # (pid, tid) seen waiting in pocl
        self._ranges: dict[int, tuple[float, tuple[tuple[int, int], ...]]] = {}  # pid -> (read at, ranges)
        self._unreadable: set[int] = set()  # pids whose syscall files we may not read
        self._prev: dict[tuple[int, int], tuple[int, int]] = {}  # (pid, tid) -> (cpu, wait) ns last scan

    def _candidate_pids(self) -> Iterable[int]:
        if self._candidates is not None:
            try:
                pids = self._candidates()
            except OSError:
                pids = None  # the cgroup went away (phone stopping): look at everything
            if pids is not None:
                return pids
        return _all_pids()

    def members(self) -> list[int]:
        pids = []
        seen = set()
        for pid in self._candidate_pids():
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
            self._ranges.pop(gone, None)
            self._unreadable.discard(gone)
            self._workers = {w for w in self._workers if w[0] != gone}
        return pids

    def _has_pocl(self, pid: int, now_s: float, cpu_ns: int) -> bool:
        """Whether the process maps libpocl: read while it is young, then every MAPS_RECHECK_S,
        but only if it ran since the last read (a sleeping process cannot have loaded it)."""
        check = self._pocl.get(pid)
        if check is None:
            check = _PoclCheck(False, -1e9, now_s, -1)
            self._pocl[pid] = check
        if check.has_pocl:
            return True
        young = now_s - check.first_seen_s < YOUNG_PROCESS_S
        due = young or now_s - check.checked_s >= MAPS_RECHECK_S
        if due and cpu_ns != check.cpu_ns_at_check:
            check.has_pocl = _maps_pocl(pid)
            check.checked_s, check.cpu_ns_at_check = now_s, cpu_ns
        return check.has_pocl

    def _is_worker(self, pid: int, tid: int, now_s: float) -> bool:
        """Whether a non-main thread of a libpocl process is a PoCL worker (module docstring)."""
        if (pid, tid) in self._workers or pid in self._unreadable:
            return True
        read_s, ranges = self._ranges.get(pid, (-1e9, ()))
        if now_s - read_s >= MAPS_RECHECK_S:  # the device library is loaded after libpocl
            try:
                ranges = pocl_ranges(_read(f"/proc/{pid}/maps"))
            except OSError:
                return False
            self._ranges[pid] = (now_s, ranges)
        try:
            waiting = waits_in(_read(f"/proc/{pid}/task/{tid}/syscall"), ranges)
        except PermissionError:
            self._unreadable.add(pid)
            return True
        except OSError:
            return False
        if waiting:
            self._workers.add((pid, tid))
        return waiting

    def scan(self, now_s: float, max_new_ns: int, interval_ns: int = 0, *, rss: bool = True) -> CpuSample:
        """CPU time since the last scan. A thread seen for the first time counts at most
        `max_new_ns` (it started within the interval, or existed before we started looking).
        `interval_ns`: the time since the last scan, for `demand_threads`. `rss`: also sum the
        processes' RSS (else rss_kb is 0)."""
        pocl_ns = other_ns = rss_kb = 0
        demand = 0.0
        pocl_tids: list[int] = []
        current: dict[tuple[int, int], tuple[int, int]] = {}
        pids = self.members()
        for pid in pids:
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            times_of = {int(t): _thread_times_ns(f"/proc/{pid}/task/{t}") for t in tids}
            cpu_now_ns = sum(t[0] for t in times_of.values() if t is not None)
            has_pocl = self._has_pocl(pid, now_s, cpu_now_ns)
            if rss:
                rss_kb += _rss_kb(pid)
            for tid, times in times_of.items():
                if times is None:
                    continue
                is_pocl = has_pocl and tid != pid and self._is_worker(pid, tid, now_s)
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
                        runnable = _runnable(f"/proc/{pid}/task/{tid}")
                        demand += 1.0 if runnable else min(1.0, (on + wait) / interval_ns)
        self._prev = current
        return CpuSample(
            pocl_ns=pocl_ns,
            other_ns=other_ns,
            rss_kb=rss_kb,
            pids=tuple(pids),
            pocl_tids=tuple(pocl_tids),
            demand_threads=demand,
        )
