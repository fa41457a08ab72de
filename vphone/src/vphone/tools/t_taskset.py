"""taskset: toybox's (`taskset [-ap] [mask] [PID | cmd [args...]]`), in the phone's CPU numbers.

The kernel's sched_setaffinity knows only the host's CPUs, so the daemon pins instead
(vphone.affinity): a request file in the control dir names the phone tids and the
mask, and the answer says what the kernel would (ESRCH, EPERM, EINVAL). The pinned threads run
in the host cgroup `affinity-<hex>` under the phone's own (at the speed of those CPUs), which
children inherit; reading a mask back reads that name in /proc/TID/cgroup (the phone's cgroup
namespace starts at the phone's cpu group), a cpuset group's `cpus`, or all online CPUs.
`taskset MASK cmd` pins the calling process (native/farmtool.c), which then execs cmd itself
(toolexec.py): cmd keeps the caller's pid and the pin, as with toybox's taskset.
Options, messages and exit codes are toybox 0.8's (there is no -c).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import time

import ctlstore
import toolerrors
import toolexec

TOYBOX = "/system/bin/toybox"
REQUEST_PREFIX = "taskset.request."  # same names as vphone/src/vphone/affinity.py
ANSWER_PREFIX = "taskset.answer."
GROUP_PREFIX = "affinity-"
ONLINE = "/sys/devices/system/cpu/online"
CPUSET_DIR = "/dev/cpuset"
CPU_SETSIZE = 1024  # bits of a mask the kernel looks at


class TasksetError(Exception):
    """One line toybox prints as `taskset: LINE`, and the exit status."""

    def __init__(self, line: str, status: int = 1) -> None:
        super().__init__(line)
        self.status = status


def parse_mask(text: str) -> int | None:
    """toybox's mask: hex digits only (no 0x), any length; None for anything else."""
    if not text or any(c not in "0123456789abcdefABCDEF" for c in text):
        return None
    return int(text, 16) & ((1 << CPU_SETSIZE) - 1)


def format_mask(mask: int) -> str:
    return f"{mask:x}"


def parse_cpulist(text: str) -> int:
    """'0-3,7' -> 0x8f (a malformed part counts for nothing)."""
    mask = 0
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            for cpu in range(int(lo), int(hi or lo) + 1):
                mask |= 1 << cpu
    return mask


def cpu_cgroup(text: str) -> str | None:
    """The cpu controller's path in /proc/TID/cgroup (v1 `N:cpu,cpuacct:/x`, else v2 `0::/x`)."""
    unified = None
    for line in text.splitlines():
        _hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if "cpu" in controllers.split(","):
            return path
        if not controllers and unified is None:
            unified = path
    return unified


def mask_of_group(path: str, online: int, cpuset_cpus: str | None) -> int:
    """The affinity of a thread in cgroup `path` (relative to the phone's cpu group):
    a taskset group's mask, a cpuset group's CPUs (`cpuset_cpus`, its file), else every CPU."""
    last = path.rstrip("/").rpartition("/")[2]
    if last.startswith(GROUP_PREFIX):
        with contextlib.suppress(ValueError):
            return int(last.removeprefix(GROUP_PREFIX), 16) & online
    if cpuset_cpus is not None and ".." not in path.split("/"):
        return parse_cpulist(cpuset_cpus) & online or online
    return online


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def get_mask(tid: int) -> int:
    """The affinity of phone thread `tid`; raises TasksetError as toybox words ESRCH."""
    text = _read(f"/proc/{tid}/cgroup")
    if text is None:
        raise TasksetError(f"failed to get pid {tid}'s affinity: {os.strerror(errno.ESRCH)}")
    online = parse_cpulist(_read(ONLINE) or "0")
    path = cpu_cgroup(text) or "/"
    rel = path.strip("/")
    cpus = _read(f"{CPUSET_DIR}/{rel}/cpus") if rel and not rel.startswith(GROUP_PREFIX) else None
    return mask_of_group(path, online, cpus)


def set_mask(tid: int, mask: int) -> None:
    """Ask the daemon to pin phone thread `tid` (affinity.py); raises TasksetError."""
    ident = f"{os.getpid()}.{time.monotonic_ns()}"
    code = ctlstore.ask_daemon(
        ctlstore.shared(REQUEST_PREFIX + ident),
        ctlstore.shared(ANSWER_PREFIX + ident),
        {"tids": [tid], "mask": mask},
    )
    if code:
        raise TasksetError(f"failed to set pid {tid}'s affinity: {os.strerror(code)}")


def _pid(text: str) -> int:
    if not text.lstrip("-").isdigit():
        raise TasksetError(f"Not int {text}")
    return int(text)


def _threads(pid: int, every: bool) -> list[int]:
    if not every:
        return [pid]
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return [pid]  # get_mask words the ESRCH


def _options(args: list[str]) -> tuple[set[str], list[str]] | int:
    """toybox's "<1^pa": flags until the first operand; the exit status on bad input."""
    flags: set[str] = set()
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            i += 1
            break
        for c in args[i][1:]:
            if c not in "pa":
                return toolerrors.toybox_error("taskset", f"Unknown option '{c}'")
            flags.add(c)
        i += 1
    operands = args[i:]
    if not operands:
        return toolerrors.toybox_error("taskset", "Needs 1 argument")
    return flags, operands


def taskset(args: list[str]) -> int | toolexec.Exec:
    if "--help" in args[:1]:
        return subprocess.run([TOYBOX, "taskset", "--help"], check=False).returncode
    parsed = _options(args)
    if isinstance(parsed, int):
        return parsed
    flags, operands = parsed
    try:
        if "p" in flags:
            _per_pid(operands, every="a" in flags)
            return 0
        if len(operands) < 2:
            raise TasksetError("Needs 2 args")
        mask = parse_mask(operands[0])
        if mask is None:
            raise TasksetError(f"bad mask '{operands[0]}'")
        set_mask(toolexec.CALLER.pid, mask)
    except TasksetError as error:
        sys.stdout.flush()
        sys.stderr.write(f"taskset: {error}\n")
        return error.status
    return toolexec.Exec(len(args) - len(operands) + 1)


def _per_pid(operands: list[str], *, every: bool) -> None:
    """`-p [mask] PID`: the last operand is the pid, the first (if two or more) the mask."""
    pid = _pid(operands[-1])
    for tid in _threads(pid, every) if pid else [0]:
        target = tid or toolexec.CALLER.pid  # pid 0: the caller itself, named 0 as toybox does
        sys.stdout.write(f"pid {tid}'s current affinity mask: {format_mask(get_mask(target))}\n")
        if len(operands) > 1:
            sys.stdout.flush()
            mask = parse_mask(operands[0])  # judged after the current mask, as toybox does
            if mask is None:
                raise TasksetError(f"bad mask '{operands[0]}'")
            set_mask(target, mask)
            sys.stdout.write(f"pid {tid}'s new affinity mask: {format_mask(get_mask(target))}\n")
