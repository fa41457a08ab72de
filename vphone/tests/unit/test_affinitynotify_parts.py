"""The pure parts of the affinity syscalls' answers (affinitynotify.py, affinity.py): the
notification and response layouts, the kernel's length rules (checked against this host's own
kernel where it can be asked), mask bytes, and the mask in force read from a thread's cgroup."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from pathlib import Path

import pytest
from vphone.affinity import cgroup_path, cpus_of_group, relative_group
from vphone.affinitynotify import (
    IOCTL_NOTIF_ID_VALID,
    IOCTL_NOTIF_RECV,
    IOCTL_NOTIF_SEND,
    NOTIF,
    NOTIF_RESP,
    Answer,
    Call,
    cpumask_bytes,
    get_size,
    mask_from_bytes,
    mask_to_bytes,
    parse_notification,
    response,
    set_read_bytes,
)

X86_64 = 0xC000003E
AARCH64 = 0xC00000B7


def _notif(nr: int, arch: int, *args: int) -> bytes:
    full = (*args, *([0] * (6 - len(args))))
    return struct.pack("=QII iIQ6Q", 77, 4321, 0, nr, arch, 0x400000, *full)


def test_the_layouts_are_the_kernels() -> None:
    # <linux/seccomp.h>: seccomp_notif is 80 bytes, seccomp_notif_resp 24; the ioctl numbers
    # are _IOWR('!', 0/1, ...) and _IOW('!', 2, __u64), as the uapi header spells them.
    assert (NOTIF.size, NOTIF_RESP.size) == (80, 24)
    assert IOCTL_NOTIF_RECV == 0xC0502100
    assert IOCTL_NOTIF_SEND == 0xC0182101
    assert IOCTL_NOTIF_ID_VALID == 0x40082102


def test_a_notification_reads_as_the_syscall_takes_its_arguments() -> None:
    # pid_t is 32-bit signed, len an unsigned int: the upper halves of the registers are junk.
    note = parse_notification(_notif(204, X86_64, 0xFFFFFFFF_FFFFFFFB, 0xDEAD_00000080, 0x7FFD_0000_1000))
    assert (note.id, note.host_tid, note.call) == (77, 4321, Call.GET)
    assert (note.pid, note.len_bytes, note.mask_addr) == (-5, 0x80, 0x7FFD_0000_1000)
    assert parse_notification(_notif(122, AARCH64, 7, 8, 9)).call is Call.SET
    assert parse_notification(_notif(203, X86_64)).call is Call.SET
    assert parse_notification(_notif(122, X86_64)).call is None  # x86_64's 122 is setfsuid


def test_a_response_carries_the_negative_errno_or_the_continue_flag() -> None:
    assert NOTIF_RESP.unpack(response(9, Answer(val=8))) == (9, 8, 0, 0)
    assert NOTIF_RESP.unpack(response(9, Answer(errno=errno.ESRCH))) == (9, 0, -errno.ESRCH, 0)
    assert NOTIF_RESP.unpack(response(9, Answer(carry_on=True))) == (9, 0, 0, 1)


def test_the_phone_kernels_length_rules() -> None:
    assert [cpumask_bytes(n) for n in (1, 8, 64, 65, 128)] == [8, 8, 8, 16, 16]
    # setaffinity: a short mask is read as far as it goes, a long one only to the mask size.
    assert [set_read_bytes(n, 8) for n in (0, 4, 8, 128)] == [0, 4, 8, 8]
    # getaffinity: EINVAL (None) for a length not of whole longs or short of the CPUs.
    assert [get_size(n, 8) for n in (0, 4, 8, 12, 16, 128)] == [None, None, 8, None, 8, 8]
    assert [get_size(n, 72) for n in (8, 16, 24)] == [None, 16, 16]


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86_64 syscall numbers")
def test_the_getaffinity_rule_agrees_with_this_hosts_kernel() -> None:
    """The independent truth: this host's sched_getaffinity for every length up to 1 KiB, with
    its own nr_cpu_ids (possible CPUs) and cpumask size (its answer to a large buffer)."""
    libc = ctypes.CDLL(None, use_errno=True)
    possible = Path("/sys/devices/system/cpu/possible").read_text(encoding="ascii").strip()
    nr_cpu_ids = int(possible.replace("-", ",").split(",")[-1]) + 1
    buf = ctypes.create_string_buffer(4096)

    def host(len_bytes: int) -> int | None:
        rc = libc.syscall(204, 0, len_bytes, buf)
        if rc < 0:
            assert ctypes.get_errno() == errno.EINVAL
            return None
        return int(rc)

    mask_bytes = host(4096)
    assert mask_bytes is not None
    for n in range(0, 1025):
        assert get_size(n, nr_cpu_ids, mask_bytes) == host(n), n
    assert mask_from_bytes(buf.raw[:mask_bytes]) == sum(1 << c for c in os.sched_getaffinity(0))


def test_masks_are_little_endian_longs() -> None:
    assert mask_from_bytes(bytes([0x80, 0, 0, 0, 0, 0, 0, 0])) == 0x80
    assert mask_from_bytes(bytes([0, 1])) == 0x100
    assert mask_to_bytes(0x78, 8) == bytes([0x78, 0, 0, 0, 0, 0, 0, 0])
    assert mask_to_bytes(1 << 70 | 1, 8) == bytes([1, 0, 0, 0, 0, 0, 0, 0])  # never more than asked


def test_the_mask_in_force_comes_from_the_threads_host_cgroup() -> None:
    v1 = "12:pids:/farm-virtual/p\n3:cpu,cpuacct:/farm-virtual/p/cpu/affinity-80\n0::/\n"
    v2 = "0::/farm-virtual/p/cpu/top-app\n"
    assert cgroup_path(v1) == "/farm-virtual/p/cpu/affinity-80"  # not the hybrid's unified line
    assert cgroup_path(v2) == "/farm-virtual/p/cpu/top-app"
    assert cgroup_path("1:name=systemd:/\n") is None
    group = "/farm-virtual/p/cpu"
    assert relative_group("/farm-virtual/p/cpu", group) == ""
    assert relative_group("/farm-virtual/p/cpu/affinity-80", group) == "affinity-80"
    assert relative_group("/farm-virtual/p/cpuset", group) is None  # a prefix is no parent
    assert relative_group(None, group) is None
    online = tuple(range(8))
    cpusets = {"": online, "background": (0, 1, 2, 3)}
    assert cpus_of_group("affinity-80", cpusets, online) == (7,)
    assert cpus_of_group("background", cpusets, online) == (0, 1, 2, 3)
    assert cpus_of_group("affinity-80", cpusets, (0, 1, 2)) == (0, 1, 2)  # CPU 7 went offline
    assert cpus_of_group("affinity-zz", cpusets, online) == online
    assert cpus_of_group(None, cpusets, online) == online
