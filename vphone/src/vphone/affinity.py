"""CPU affinity in the phone's CPU numbers: what the daemon does for the phone's `taskset`.

A phone has its profile's CPUs (0-7 on a 2-core host), so the kernel's sched_setaffinity, which
knows only the host's CPUs, cannot pin a task to the phone's big cores. The phone's `taskset`
(tools/t_taskset.py) asks the daemon instead, through the control dir as `mount -t cgroup` does:
it writes `taskset.request.<id>` ({"tids": [phone tids], "mask": N}) and waits for
`taskset.answer.<id>` ({"errno": 0 | E..., "mask": the mask in force}). The daemon judges the
request as the kernel's sched_setaffinity would and moves the threads into the host cgroup
`cpu/affinity-<hex mask>` of the phone (cgroup.py), whose CFS quota is that of the mask's
fastest online core (socmodel.py), at most one host core per CPU in the mask. So the task runs
at the speed of the phone CPUs it is pinned to, its host affinity stays valid, and its children
inherit the pin, as they inherit a kernel's affinity. Reading back is the phone's own business
(the tool reads the group's name in /proc/TID/cgroup, under the phone's cgroup namespace).

Judged as the kernel does:
* a tid that is not a thread of this phone (its PID namespace: another phone's or the host's
  threads have no phone tid at all) -> ESRCH;
* a caller that is neither the phone's root (CAP_SYS_NICE) nor the target's uid -> EPERM, the
  caller being the owner of the request file (the tool runs as the caller);
* a mask that names no online CPU of the phone -> EINVAL;
* no host cgroups here (no CPU budgets) -> ENOSYS: there is nothing to pin with.

Programs that call sched_setaffinity / sched_getaffinity themselves get the same answers: the
calls are forwarded to the daemon by a seccomp listener (affinitynotify.py), which asks
`AffinityServer.set_for_call` / `cpus_for_call` here. A getaffinity reads the mask in force from
the thread's host cgroup: `affinity-<hex>`, a cpuset group's CPUs, else every online CPU.

Limits: the pin is per thread as the kernel's, but a thread pinned this way leaves its cpuset
group (Android's /dev/cpuset/<group>/tasks no longer lists it), where the kernel would keep it
there with its affinity narrowed; moving it into a cpuset group afterwards resets its affinity
to the group's CPUs, as the kernel does.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from vphone import ctlfiles
from vphone.cgroup import CPU_GROUP, PhoneCgroups

log = logging.getLogger(__name__)

REQUEST_PREFIX = "taskset.request."  # same names as tools/t_taskset.py
ANSWER_PREFIX = "taskset.answer."
GROUP_PREFIX = "affinity-"  # cpu/affinity-<hex mask>: tools/t_taskset.py reads the name back
MAX_TIDS = 4096  # one request's threads (a process's, with -a)


@dataclass(frozen=True)
class PhoneThread:
    """One thread of the phone as the host sees it."""

    host_tid: int
    phone_tid: int
    uids: tuple[int, ...]  # host real, effective, saved, fs uid


@dataclass(frozen=True)
class Request:
    tids: tuple[int, ...]
    mask: int


@dataclass(frozen=True)
class Verdict:
    """What the kernel answers: errno 0 with the CPUs in force, or an errno."""

    errno: int
    cpus: tuple[int, ...] = ()


def mask_cpus(mask: int) -> tuple[int, ...]:
    """0x70 -> (4, 5, 6)."""
    return tuple(i for i in range(mask.bit_length()) if mask >> i & 1)


def cpus_mask(cpus: Iterable[int]) -> int:
    return sum(1 << c for c in set(cpus))


def group_of(cpus: tuple[int, ...]) -> str:
    """The host cgroup (relative to the phone's) of threads pinned to `cpus`."""
    return f"{CPU_GROUP}/{GROUP_PREFIX}{cpus_mask(cpus):x}"


def parse_request(body: object) -> Request | None:
    if not isinstance(body, dict):
        return None
    tids, mask = body.get("tids"), body.get("mask")
    if not isinstance(tids, list) or not tids or len(tids) > MAX_TIDS or not isinstance(mask, int):
        return None
    if not all(isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in tids) or mask < 0:
        return None
    return Request(tuple(tids), mask)


def nspid(status_text: str) -> int | None:
    """The innermost pid of `NSpid:` in /proc/PID/status (the phone's, for a phone process)."""
    for line in status_text.splitlines():
        if line.startswith("NSpid:"):
            fields = line.split()[1:]
            return int(fields[-1]) if fields else None
    return None


def status_uids(status_text: str) -> tuple[int, ...]:
    for line in status_text.splitlines():
        if line.startswith("Uid:"):
            return tuple(int(x) for x in line.split()[1:])
    return ()


def judge(
    request: Request,
    caller_uid: int,
    root_uid: int,
    threads: dict[int, PhoneThread],
    online: tuple[int, ...],
) -> Verdict:
    """sched_setaffinity's answer for every tid of the request (pure). `threads`: the phone's
    threads by phone tid; uids are host uids."""
    for tid in request.tids:
        thread = threads.get(tid)
        if thread is None:
            return Verdict(errno.ESRCH)
        if caller_uid != root_uid and caller_uid not in thread.uids[:2]:
            return Verdict(errno.EPERM)
    cpus = tuple(c for c in mask_cpus(request.mask) if c in online)
    if not cpus:
        return Verdict(errno.EINVAL)
    return Verdict(0, cpus)


def cgroup_path(cgroup_text: str) -> str | None:
    """The cpu controller's path in a host /proc/TID/cgroup (v1 `N:cpu,cpuacct:/x`, v2 `0::/x`)."""
    unified = None
    for line in cgroup_text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        if "cpu" in fields[1].split(","):
            return fields[2]  # v1 (a hybrid host's unified line is no cpu controller)
        if fields[:2] == ["0", ""]:
            unified = fields[2]
    return unified


def cpus_of_group(
    rel: str | None, cpusets: dict[str, tuple[int, ...]], online: tuple[int, ...]
) -> tuple[int, ...]:
    """The affinity of a thread in host group `rel` (relative to the phone's cpu group; None:
    outside it): a pin's CPUs, a cpuset group's, else every online CPU (pure)."""
    cpus = pin_of_group(rel)
    if cpus is None:
        cpus = cpusets.get(rel, ()) if rel is not None else ()
    in_force = tuple(c for c in cpus if c in online)
    return in_force or online


def pin_of_group(rel: str | None) -> tuple[int, ...] | None:
    """The CPUs of a pin group `rel` (cpu/affinity-<hex mask>, relative to the phone's cpu
    group); None for any other group (pure). A malformed mask pins to no CPU."""
    last = (rel or "").rpartition("/")[2]
    if not last.startswith(GROUP_PREFIX):
        return None
    try:
        return mask_cpus(int(last.removeprefix(GROUP_PREFIX), 16))
    except ValueError:
        return ()


def thread_group(cgroups: PhoneCgroups, host_tid: int) -> str | None:
    """The cpu cgroup of host thread `host_tid` relative to the phone's cpu group (None:
    outside it). OSError once the thread is gone."""
    text = Path(f"/proc/{host_tid}/cgroup").read_text(encoding="utf-8")
    phone_group = "/" + str(cgroups.group_dir(CPU_GROUP).relative_to(cgroups.host.cpu_root))
    return relative_group(cgroup_path(text), phone_group)


def relative_group(path: str | None, phone_group: str) -> str | None:
    """`path` (from /proc/TID/cgroup) relative to the phone's cpu group `phone_group` (its path
    from the hierarchy's root, leading /); None outside it."""
    if path is None:
        return None
    if path == phone_group:
        return ""
    if path.startswith(phone_group + "/"):
        return path[len(phone_group) + 1 :]
    return None


def phone_threads(host_pids: Iterable[int]) -> dict[int, PhoneThread]:
    """The threads of these (host) processes, by their phone tid."""
    threads: dict[int, PhoneThread] = {}
    for pid in host_pids:
        with contextlib.suppress(OSError):
            for name in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError, ValueError):
                    text = Path(f"/proc/{pid}/task/{name}/status").read_text(encoding="utf-8")
                    tid = nspid(text)
                    if tid is not None:
                        threads[tid] = PhoneThread(int(name), tid, status_uids(text))
    return threads


class AffinityServer:
    """The daemon's side of one phone's taskset requests. No I/O until `serve`."""

    def __init__(self, ctl: Path, root_uid: int) -> None:
        self.ctl = ctl
        self.root_uid = root_uid

    def serve(
        self,
        request: Path,
        cgroups: PhoneCgroups | None,
        members: Iterable[int],
        online: tuple[int, ...],
        on_pinned: Callable[[tuple[int, ...]], None],
    ) -> None:
        """Answer one request file (then remove it). `members`: host pids of the phone's
        processes (in its PID namespace); `on_pinned(cpus)` runs after threads moved to the group
        of `cpus` and before the answer, so the caller's next instruction runs under its quota."""
        if not request.name.startswith(REQUEST_PREFIX) or request.name.endswith(".tmp"):
            return
        taken = ctlfiles.take_request(self.ctl, ctlfiles.shared(request.name))
        if taken is None:
            return  # gone (answered already), a link, or not JSON
        parsed = parse_request(taken.body)
        if parsed is None:
            verdict = Verdict(errno.EINVAL)
        elif cgroups is None:
            verdict = Verdict(errno.ENOSYS)
        else:
            threads = phone_threads(members)
            verdict = judge(parsed, taken.owner_uid, self.root_uid, threads, online)
            if verdict.errno == 0:
                host_tids = [threads[t].host_tid for t in parsed.tids]
                verdict = self._move(cgroups, verdict.cpus, host_tids, online)
            if verdict.errno == 0:
                on_pinned(verdict.cpus)
        answer = request.name.removeprefix(REQUEST_PREFIX)
        ctlfiles.write_json(
            self.ctl,
            ctlfiles.shared(f"{ANSWER_PREFIX}{answer}"),
            {"errno": verdict.errno, "mask": cpus_mask(verdict.cpus)},
            mode=0o644,
            owner_uid=taken.owner_uid,  # the asker removes it (shared/ is sticky)
        )

    def target(
        self, caller: PhoneThread, pid: int, members: Callable[[], Iterable[int]]
    ) -> PhoneThread | None:
        """The thread a syscall's `pid` names in the caller's (the phone's) PID namespace: 0 is
        the caller; None (ESRCH) for a pid that is no thread of the phone."""
        if pid == 0 or pid == caller.phone_tid:
            return caller
        if pid < 0:
            return None
        return phone_threads(members()).get(pid)

    def set_for_call(
        self,
        caller: PhoneThread,
        pid: int,
        mask: int,
        cgroups: PhoneCgroups | None,
        members: Callable[[], Iterable[int]],
        online: tuple[int, ...],
        on_pinned: Callable[[tuple[int, ...]], None],
    ) -> Verdict:
        """A program's sched_setaffinity(pid, mask), judged by the caller's effective uid as the
        kernel does (affinitynotify.py read the mask)."""
        target = self.target(caller, pid, members)
        if target is None:
            return Verdict(errno.ESRCH)
        euid = caller.uids[1] if len(caller.uids) > 1 else -1
        verdict = judge(
            Request((target.phone_tid,), mask), euid, self.root_uid, {target.phone_tid: target}, online
        )
        if verdict.errno == 0 and cgroups is None:
            return Verdict(errno.ENOSYS)
        if verdict.errno == 0 and cgroups is not None:
            verdict = self._move(cgroups, verdict.cpus, [target.host_tid], online)
            if verdict.errno == 0:
                on_pinned(verdict.cpus)
        return verdict

    def cpus_for_call(
        self,
        caller: PhoneThread,
        pid: int,
        cgroups: PhoneCgroups | None,
        members: Callable[[], Iterable[int]],
        cpusets: dict[str, tuple[int, ...]],
        online: tuple[int, ...],
    ) -> Verdict:
        """A program's sched_getaffinity(pid): the CPUs in force (any user may read them)."""
        target = self.target(caller, pid, members)
        if target is None:
            return Verdict(errno.ESRCH)
        if cgroups is None:
            return Verdict(0, online)
        try:
            rel = thread_group(cgroups, target.host_tid)
        except OSError:
            return Verdict(errno.ESRCH)
        return Verdict(0, cpus_of_group(rel, cpusets, online))

    def _move(
        self, cgroups: PhoneCgroups, cpus: tuple[int, ...], host_tids: list[int], online: tuple[int, ...]
    ) -> Verdict:
        if set(cpus) >= set(online):
            return self._unpin(cgroups, cpus, host_tids)
        group = group_of(cpus)
        try:
            if not cgroups.group_dir(group).is_dir():
                cgroups.add_group(group)
            cgroups.move_threads(group, host_tids)
        except OSError as exc:
            log.warning("%s: cannot pin threads to %s: %s", self.ctl, group, exc)
            return Verdict(errno.EAGAIN)
        return Verdict(0, cpus)

    def _unpin(self, cgroups: PhoneCgroups, cpus: tuple[int, ...], host_tids: list[int]) -> Verdict:
        """Every online CPU is the kernel's default affinity, not a pin: a thread keeps its
        cpuset group (whose CPUs the kernel would still intersect the mask with: a background
        thread stays on the little cores), and one pinned before goes back to the phone's top
        group. Runtimes (PoCL, OpenMP) set the full mask on their threads routinely."""
        pinned = []
        for tid in host_tids:
            try:
                rel = thread_group(cgroups, tid)
            except OSError:
                return Verdict(errno.ESRCH)
            if pin_of_group(rel) is not None:
                pinned.append(tid)
        try:
            if pinned:
                cgroups.move_threads(CPU_GROUP, pinned)
        except OSError as exc:
            log.warning("%s: cannot unpin threads: %s", self.ctl, exc)
            return Verdict(errno.EAGAIN)
        return Verdict(0, cpus)
