"""sched_setaffinity and sched_getaffinity of ANY phone process, answered in the phone's CPU
numbers by the daemon (seccomp user notification).

The phone's `taskset` tool asks the daemon through the control dir (affinity.py), but programs
that call the syscalls themselves (toybox `nproc`, OpenMP, thread pools, a benchmark pinning
itself to the big cores) would see the host's 2 CPUs. So every process entering a phone
(native/vphone-exec.c: `launch` for init and its descendants, `enter` for every command) loads a
second seccomp filter with SECCOMP_FILTER_FLAG_NEW_LISTENER that returns SECCOMP_RET_USER_NOTIF
for these two calls, and hands the listener to this module by SCM_RIGHTS on a datagram socket
of the phone's (closing it before the program runs: no phone process holds a listener). One
thread per phone serves the listeners, off the daemon's event loop (the caller blocks in the
syscall until answered, and the loop may be busy):

* SECCOMP_IOCTL_NOTIF_RECV; the caller is a thread of this phone's PID namespace (else the
  kernel carries on with its own answer: SECCOMP_USER_NOTIF_FLAG_CONTINUE, which is what it
  would do without the filter);
* the arguments as the kernel takes them: pid (the caller's PID namespace, 0 = the caller
  thread), len, the mask in the caller's memory (process_vm_readv: it honours page protections,
  so a bad pointer is EFAULT as for copy_from_user);
* SECCOMP_IOCTL_NOTIF_ID_VALID after every read and before acting (the kernel docs' TOCTOU
  check: the caller is still blocked in this call, so its tid still names it);
* setaffinity: the phone's judgement and cgroup move (`AffinityCalls`, physics.py over
  affinity.py: ESRCH, EPERM, EINVAL, ENOSYS); the kernel's length rule first (a shorter len
  zero-fills the mask, a longer one is cut to the mask size);
* getaffinity: EINVAL unless len covers the phone's CPUs and is a multiple of sizeof(long); the
  mask in force written into the caller's buffer, min(len, mask size) bytes, never more; the
  return value is that size, as the kernel's;
* an answer for every call: a handler that fails answers EAGAIN; a listener whose tasks all
  exited (POLLHUP) is closed and forgotten.

Where the host has no user notification (kernel < 5.0, the filter refused, other struct sizes)
the phone still starts, and the daemon log says the affinity syscalls see the host's CPUs.

Residual window: the write into the caller's memory addresses its host tid, checked valid just
before; a tid is reused only after the thread is gone and the host's pid counter wrapped.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import platform
import select
import shutil
import socket
import struct
import tempfile
import threading
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

from vphone.affinity import PhoneThread, Verdict, nspid, status_uids

log = logging.getLogger(__name__)

SOCKET_NAME = "affinity.sock"
MAX_UNIX_PATH_BYTES = 100
LONG_BYTES = 8  # sizeof(unsigned long) on the phones' arm64 and this x86_64 host
LISTENER_LINK = "anon_inode:seccomp notify"

# <linux/seccomp.h>
SECCOMP_GET_NOTIF_SIZES = 3
SECCOMP_USER_NOTIF_FLAG_CONTINUE = 1
NOTIF = struct.Struct("=QII iIQ6Q")  # seccomp_notif: id, pid, flags, seccomp_data
NOTIF_RESP = struct.Struct("=QqiI")  # seccomp_notif_resp: id, val, error, flags
SIZES = struct.Struct("=HHH")  # seccomp_notif_sizes
DATA_BYTES = 64


def _iowr(nr: int, size: int) -> int:
    return (3 << 30) | (size << 16) | (ord("!") << 8) | nr


def _iow(nr: int, size: int) -> int:
    return (1 << 30) | (size << 16) | (ord("!") << 8) | nr


IOCTL_NOTIF_RECV = _iowr(0, NOTIF.size)
IOCTL_NOTIF_SEND = _iowr(1, NOTIF_RESP.size)
IOCTL_NOTIF_ID_VALID = _iow(2, 8)

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}


class Call(Enum):
    SET = "sched_setaffinity"
    GET = "sched_getaffinity"


# (arch, nr) -> call; the filter notifies only these (native/seccomp-gen.c)
SYSCALLS = {
    (AUDIT_ARCH_X86_64, 203): Call.SET,
    (AUDIT_ARCH_X86_64, 204): Call.GET,
    (AUDIT_ARCH_AARCH64, 122): Call.SET,
    (AUDIT_ARCH_AARCH64, 123): Call.GET,
}


@dataclass(frozen=True)
class Notification:
    id: int
    host_tid: int  # the caller thread, in the daemon's (host's) PID namespace
    call: Call | None  # None: a syscall this module does not answer
    pid: int  # pid_t argument, in the caller's PID namespace (0: the caller)
    len_bytes: int  # unsigned int
    mask_addr: int


@dataclass(frozen=True)
class Answer:
    val: int = 0
    errno: int = 0
    carry_on: bool = False  # SECCOMP_USER_NOTIF_FLAG_CONTINUE: the kernel's own answer


# -- pure: the kernel's rules ------------------------------------------------------------------


def parse_notification(raw: bytes) -> Notification:
    nid, pid, _flags, nr, arch, _ip, *args = NOTIF.unpack(raw[: NOTIF.size])
    pid_arg = args[0] & 0xFFFFFFFF
    if pid_arg >= 1 << 31:
        pid_arg -= 1 << 32  # pid_t is signed
    return Notification(nid, pid, SYSCALLS.get((arch, nr)), pid_arg, args[1] & 0xFFFFFFFF, args[2])


def response(nid: int, answer: Answer) -> bytes:
    flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE if answer.carry_on else 0
    return NOTIF_RESP.pack(nid, answer.val, -answer.errno if answer.errno else 0, flags)


def cpumask_bytes(ncpu: int) -> int:
    """The phone kernel's cpumask_size(): nr_cpu_ids bits in unsigned longs."""
    return max(1, -(-ncpu // (8 * LONG_BYTES))) * LONG_BYTES


def set_read_bytes(len_bytes: int, ncpu: int) -> int:
    """How much of the caller's mask sched_setaffinity reads (get_user_cpu_mask): a shorter len
    zero-fills the rest, a longer one is cut to the mask size."""
    return min(len_bytes, cpumask_bytes(ncpu))


def get_size(len_bytes: int, ncpu: int, mask_bytes: int | None = None) -> int | None:
    """sched_getaffinity's return value (bytes written), or None for its EINVAL: len must cover
    nr_cpu_ids bits and be a multiple of sizeof(unsigned long). `mask_bytes`: the kernel's
    cpumask_size() (a phone's: `cpumask_bytes`; a host built with a large NR_CPUS has more)."""
    if len_bytes * 8 < ncpu or len_bytes % LONG_BYTES:
        return None
    return min(len_bytes, cpumask_bytes(ncpu) if mask_bytes is None else mask_bytes)


def mask_from_bytes(data: bytes) -> int:
    """An array of little-endian unsigned longs (both arches) -> bit i = CPU i."""
    return int.from_bytes(data, "little")


def mask_to_bytes(mask: int, size: int) -> bytes:
    return (mask & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


# -- the phone's side ---------------------------------------------------------------------------


class AffinityCalls(Protocol):
    """What one phone answers (physics.py, over affinity.py); called on the listener thread."""

    @property
    def ncpu(self) -> int: ...

    def pidns(self) -> str | None:
        """`pid:[INODE]` of the phone's PID namespace; None before it runs."""

    def set_affinity(self, caller: PhoneThread, pid: int, mask: int) -> Verdict: ...

    def get_affinity(self, caller: PhoneThread, pid: int) -> Verdict: ...


# -- I/O: the caller's memory -----------------------------------------------------------------


class _IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.process_vm_readv.restype = ctypes.c_ssize_t
_libc.process_vm_writev.restype = ctypes.c_ssize_t
_libc.syscall.restype = ctypes.c_long
for _vm in (_libc.process_vm_readv, _libc.process_vm_writev):
    # pid, local iovec, count, remote iovec, count, flags
    _vm.argtypes = (
        ctypes.c_int,
        ctypes.POINTER(_IOVec),
        ctypes.c_ulong,
        ctypes.POINTER(_IOVec),
        ctypes.c_ulong,
        ctypes.c_ulong,
    )


def read_memory(tid: int, addr: int, size: int) -> bytes | None:
    """`size` bytes at `addr` of thread `tid`; None where copy_from_user would fault."""
    if size == 0:
        return b""
    buf = ctypes.create_string_buffer(size)
    local = _IOVec(ctypes.cast(buf, ctypes.c_void_p), size)
    remote = _IOVec(addr, size)
    done = _libc.process_vm_readv(tid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    return buf.raw if done == size else None


def write_memory(tid: int, addr: int, data: bytes) -> bool:
    """Write exactly `data` at `addr` of thread `tid` (page protections honoured)."""
    buf = ctypes.create_string_buffer(data, len(data))
    local = _IOVec(ctypes.cast(buf, ctypes.c_void_p), len(data))
    remote = _IOVec(addr, len(data))
    return _libc.process_vm_writev(tid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) == len(data)


def notif_sizes() -> tuple[int, int, int] | None:
    """The kernel's (seccomp_notif, seccomp_notif_resp, seccomp_data) sizes; None without
    user notification."""
    nr = SYS_SECCOMP.get(platform.machine())
    if nr is None:
        return None
    buf = ctypes.create_string_buffer(SIZES.size)
    if _libc.syscall(nr, SECCOMP_GET_NOTIF_SIZES, 0, buf) != 0:
        return None
    sizes: tuple[int, int, int] = SIZES.unpack(buf.raw)
    return sizes


def unsupported_reason() -> str | None:
    """Why this host cannot answer the calls (None: it can)."""
    sizes = notif_sizes()
    if sizes is None:
        return "this kernel has no seccomp user notification (5.0+)"
    if sizes != (NOTIF.size, NOTIF_RESP.size, DATA_BYTES):
        return f"this kernel's seccomp notification structs differ in size ({sizes})"
    return None


def _caller(host_tid: int) -> tuple[str, PhoneThread] | None:
    """The caller's PID namespace and itself as a phone thread; None once it is gone."""
    try:
        ns = os.readlink(f"/proc/{host_tid}/ns/pid")
        with open(f"/proc/{host_tid}/status", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    tid = nspid(text)
    return None if tid is None else (ns, PhoneThread(host_tid, tid, status_uids(text)))


class Listeners:
    """One phone's listener socket and the thread that serves its listeners. `start` binds and
    starts; `close` stops and closes everything (idempotent). No I/O in the constructor."""

    def __init__(self, name: str, calls: AffinityCalls, state_root: Path) -> None:
        self.name = name
        self.calls = calls
        self.state_root = state_root
        self.socket_path: Path | None = None
        self.served = 0  # notifications answered (tests, bench)
        self._dir: Path | None = None
        self._sock: socket.socket | None = None
        self._wake = (-1, -1)
        self._thread: threading.Thread | None = None
        self._listeners: set[int] = set()
        self._warned = False

    def start(self) -> Path | None:
        """The socket path for vphone-exec's --notify-sock, or None where this host cannot."""
        reason = unsupported_reason()
        if reason is not None:
            log.info("%s: affinity syscalls see the host's CPUs: %s", self.name, reason)
            return None
        # A 0700 directory of our own: nobody but root can reach the socket, nothing can squat
        # on its name; in the state dir (never bound into the phone) if the path fits.
        base = self.state_root if len(str(self.state_root)) < MAX_UNIX_PATH_BYTES - 24 else None
        self._dir = Path(tempfile.mkdtemp(prefix="affinity-", dir=base))
        path = self._dir / SOCKET_NAME
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            sock.bind(str(path))
        except OSError:
            sock.close()
            self._remove_dir()
            raise
        self._sock = sock
        self._wake = os.pipe2(os.O_CLOEXEC)
        self._thread = threading.Thread(target=self._serve, name=f"affinity-{self.name}", daemon=True)
        self._thread.start()
        self.socket_path = path
        return path

    def close(self) -> None:
        if self._thread is not None:
            os.write(self._wake[1], b"x")
            self._thread.join(timeout=10)
            self._thread = None
        for fd in (*self._listeners, *self._wake):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._listeners.clear()
        self._wake = (-1, -1)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._remove_dir()
        self.socket_path = None

    def _remove_dir(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    # -- the thread ---------------------------------------------------------------------------

    def _serve(self) -> None:
        assert self._sock is not None
        poller = select.poll()
        poller.register(self._wake[0], select.POLLIN)
        poller.register(self._sock.fileno(), select.POLLIN)
        while True:
            for fd, events in poller.poll():
                if fd == self._wake[0]:
                    return
                if fd == self._sock.fileno():
                    for listener in self._receive():
                        self._listeners.add(listener)
                        poller.register(listener, select.POLLIN)
                    continue
                if events & select.POLLIN:
                    self._answer_one(fd)
                elif events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    poller.unregister(fd)
                    self._listeners.discard(fd)
                    os.close(fd)

    def _receive(self) -> list[int]:
        """Listeners from vphone-exec (only root reaches the socket): 'L' + the descriptor, or
        'N' + why this kernel refused the filter."""
        assert self._sock is not None
        try:
            data, fds, _flags, _addr = socket.recv_fds(self._sock, 128, 4, socket.MSG_CMSG_CLOEXEC)
        except OSError:
            return []
        kept = []
        for fd in fds:
            try:
                ok = data[:1] == b"L" and os.readlink(f"/proc/self/fd/{fd}") == LISTENER_LINK
            except OSError:
                ok = False
            if ok:
                kept.append(fd)
            else:
                os.close(fd)
        if data[:1] == b"N" and not self._warned:
            self._warned = True
            reason = data[1:].decode("utf-8", errors="replace")
            log.info("%s: affinity syscalls see the host's CPUs: filter refused (%s)", self.name, reason)
        return kept

    def _answer_one(self, listener: int) -> None:
        raw = bytearray(NOTIF.size)
        try:
            fcntl.ioctl(listener, IOCTL_NOTIF_RECV, raw, True)
        except OSError:
            return  # ENOENT: the caller was killed meanwhile
        note = parse_notification(bytes(raw))
        try:
            answer = self._judge(listener, note)
        except Exception:
            log.exception("%s: cannot answer %s of tid %d", self.name, note.call, note.host_tid)
            answer = Answer(errno=errno.EAGAIN)
        if answer is None:
            return  # the caller is gone: nobody to answer
        with contextlib.suppress(OSError):  # ENOENT: killed meanwhile
            fcntl.ioctl(listener, IOCTL_NOTIF_SEND, response(note.id, answer))
        self.served += 1

    def _valid(self, listener: int, nid: int) -> bool:
        try:
            fcntl.ioctl(listener, IOCTL_NOTIF_ID_VALID, struct.pack("=Q", nid))
        except OSError:
            return False
        return True

    def _judge(self, listener: int, note: Notification) -> Answer | None:
        if note.call is None:
            return Answer(carry_on=True)
        found = _caller(note.host_tid)
        if found is None:
            return None
        ns, caller = found
        if ns != self.calls.pidns():
            # Not a phone thread (bwrap's own monitor): the kernel's answer, as without us.
            return Answer(carry_on=True)
        ncpu = self.calls.ncpu
        if note.call is Call.SET:
            data = read_memory(note.host_tid, note.mask_addr, set_read_bytes(note.len_bytes, ncpu))
            if not self._valid(listener, note.id):
                return None
            if data is None:
                return Answer(errno=errno.EFAULT)
            verdict = self.calls.set_affinity(caller, note.pid, mask_from_bytes(data))
            return Answer(errno=verdict.errno)
        size = get_size(note.len_bytes, ncpu)
        if size is None:
            return Answer(errno=errno.EINVAL)
        verdict = self.calls.get_affinity(caller, note.pid)
        if verdict.errno:
            return Answer(errno=verdict.errno)
        mask = sum(1 << c for c in verdict.cpus)
        if not self._valid(listener, note.id):
            return None
        if not write_memory(note.host_tid, note.mask_addr, mask_to_bytes(mask, size)):
            return Answer(errno=errno.EFAULT)
        return Answer(val=size)


__all__ = [
    "AffinityCalls",
    "Answer",
    "Call",
    "Listeners",
    "Notification",
    "cpumask_bytes",
    "get_size",
    "mask_from_bytes",
    "mask_to_bytes",
    "parse_notification",
    "response",
    "set_read_bytes",
]
