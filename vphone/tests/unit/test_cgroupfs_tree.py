"""The cgroupfs tree server's rules and its answers to kernel requests (pure: no mount; the
phone has no process here, its PID namespace matches none of /proc). The same server against
the real kernel in a phone: vphone/tests/integration/test_world_cgroupfs.py."""

from __future__ import annotations

import errno
import stat
import threading
from pathlib import Path

from vphone.cpusets import CgroupTrees
from vphone.profiles import load_profile

from vphone import cgroupfs as c
from vphone import fusenodes as f

ROOT_HOST_UID = 1 << 27


def _server() -> tuple[c.CgroupFs, list[tuple[str, tuple[int, ...] | None]]]:
    trees = CgroupTrees(Path("/nonexistent"), load_profile("adreno-sd865"))  # no I/O: specs only
    tasks = c.PhoneTasks("pid:[0]", lambda: [])  # matches no /proc/PID/ns/pid: a phone with no task
    calls: list[tuple[str, tuple[int, ...] | None]] = []
    server = c.CgroupFs(
        c.tree_specs(trees),
        (c.BookMembership(tasks), c.BookMembership(tasks)),
        ncpu=8,
        owners=c.Owners(ROOT_HOST_UID, ROOT_HOST_UID + 1000),
        tasks=tasks,
        root_uid=ROOT_HOST_UID,
        on_cpus=lambda name, cpus: calls.append((name, cpus)),
        lock=threading.RLock(),
    )
    return server, calls


def _ask(s: c.CgroupFs, opcode: int, nodeid: int, body: bytes = b"") -> tuple[int, bytes]:
    head = f.IN_HEADER.pack(f.IN_HEADER.size + len(body), opcode, 7, nodeid, ROOT_HOST_UID, 0, 1, 0, 0)
    raw = s.answer(head + body)
    assert raw is not None
    length, error, unique = f.OUT_HEADER.unpack_from(raw)
    assert length == len(raw) and unique == 7
    return error, raw[f.OUT_HEADER.size :]


def _lookup(s: c.CgroupFs, parent: int, name: str) -> tuple[int, int]:
    """(errno, nodeid) of a name."""
    error, out = _ask(s, f.LOOKUP, parent, name.encode() + b"\0")
    return error, (f.ENTRY_OUT.unpack_from(out)[0] if error == 0 else 0)


def _path(s: c.CgroupFs, *names: str) -> int:
    nodeid = f.ROOT_ID
    for name in names:
        error, nodeid = _lookup(s, nodeid, name)
        assert error == 0, (names, name, error)
    return nodeid


def _write(s: c.CgroupFs, nodeid: int, data: bytes) -> int:
    return _ask(s, f.WRITE, nodeid, f.IO_IN.pack(0, 0, len(data), 0, 0, 0, 0) + data)[0]


def _read(s: c.CgroupFs, nodeid: int) -> bytes:
    error, out = _ask(s, f.READ, nodeid, f.IO_IN.pack(0, 0, 4096, 0, 0, 0, 0))
    assert error == 0
    return out


def _names(s: c.CgroupFs, nodeid: int) -> list[str]:
    error, out = _ask(s, f.READDIR, nodeid, f.IO_IN.pack(0, 0, 65536, 0, 0, 0, 0))
    assert error == 0
    names, at = [], 0
    while at < len(out):
        _ino, _off, namelen, _type = c.DIRENT.unpack_from(out, at)
        start = at + c.DIRENT.size
        names.append(out[start : start + namelen].decode())
        at = start + namelen + (-(c.DIRENT.size + namelen) % 8)
    return names


def test_group_names_pids_and_the_move_rule() -> None:
    assert c.group_name_error("big") is None
    for bad in ("", ".", "..", "a/b", "a\0b"):
        assert c.group_name_error(bad) == errno.EINVAL
    assert c.group_name_error("x" * 256) == errno.ENAMETOOLONG
    assert c.parse_pid(b" 123\n") == 123 and c.parse_pid(b"0") == 0
    assert c.parse_pid(b"-1") is None and c.parse_pid(b"12x") is None and c.parse_pid(b"") is None
    assert c.may_move(5, 5, (9, 9, 9, 9))  # root moves anyone
    assert c.may_move(9, 5, (9, 1, 1, 1)) and c.may_move(9, 5, (1, 1, 9, 1))  # real or saved uid
    assert not c.may_move(9, 5, (1, 9, 1, 9))  # only effective: the kernel refuses


def test_list_changes_are_judged_as_cpusets_validate_change() -> None:
    assert c.list_change_error((0, 1), (0, 1, 2), [(1,)], populated=True) is None
    assert c.list_change_error(None, (0, 1), [], populated=False) == errno.EINVAL
    assert c.list_change_error((3,), (0, 1), [], populated=False) == errno.EINVAL
    assert c.list_change_error((0,), (0, 1), [(1,)], populated=False) == errno.EBUSY
    assert c.list_change_error((), (0, 1), [], populated=True) == errno.ENOSPC
    assert c.list_change_error((), (0, 1), [], populated=False) is None


def test_bookkeeping_values_stay_of_their_kind() -> None:
    assert c.bookkeeping_value("1024\n", b"512\n") == "512\n"
    assert c.bookkeeping_value("1024\n", b"lots") is None
    assert c.bookkeeping_value("-1\n", b"-1") == "-1\n"
    assert c.bookkeeping_value("max\n", b"20") == "20.00\n"
    assert c.bookkeeping_value("0.00\n", b"max") == "max\n"
    assert c.bookkeeping_value("0.00\n", b"101") is None
    assert c.bookkeeping_value("\n", b"/sbin/agent\n") == "/sbin/agent\n"


def test_tree_lists_androids_groups_and_the_kernels_files() -> None:
    s, _ = _server()
    assert _names(s, f.ROOT_ID)[2:] == ["cpuset", "cpuctl"]  # sd865: Android 12
    top = _path(s, "cpuset")
    assert {"top-app", "background", "tasks", "cpus"} <= set(_names(s, top))
    assert _read(s, _path(s, "cpuset", "top-app", "cpus")) == b"0-7\n"
    error, out = _ask(s, f.GETATTR, _path(s, "cpuset", "top-app", "tasks"))
    attr = f.ATTR.unpack_from(out, f.ATTR_OUT.size)
    assert error == 0 and attr[9] == stat.S_IFREG | 0o664
    assert attr[11:13] == (ROOT_HOST_UID, ROOT_HOST_UID + 1000)  # root's, group system
    assert _lookup(s, top, "../etc")[0] == -errno.ENOENT


def test_mkdir_rmdir_and_writes_answer_as_cgroupfs() -> None:
    s, calls = _server()
    top = _path(s, "cpuset")
    error, _ = _ask(s, c.MKDIR, top, c.MKDIR_IN.pack(0o755, 0) + b"g\0")
    assert error == 0 and calls == [("g", ())]
    g = _path(s, "cpuset", "g")
    assert _read(s, _path(s, "cpuset", "g", "cpus")) == b"\n"  # no clone_children: empty
    assert _write(s, _path(s, "cpuset", "g", "cpus"), b"0-9\n") == -errno.EINVAL
    assert _write(s, _path(s, "cpuset", "g", "cpus"), b"4-6\n") == 0 and calls[-1] == ("g", (4, 5, 6))
    assert _read(s, _path(s, "cpuset", "g", "effective_cpus")) == b"4-6\n"
    assert _write(s, _path(s, "cpuset", "cpus"), b"0-3\n") == -errno.EACCES  # the top's
    assert _write(s, _path(s, "cpuset", "g", "tasks"), b"x\n") == -errno.EINVAL
    assert _write(s, _path(s, "cpuset", "top-app", "tasks"), b"424242\n") == -errno.ESRCH
    # A child keeps its parent's list from shrinking below it.
    assert _ask(s, c.MKDIR, g, c.MKDIR_IN.pack(0o755, 0) + b"inner\0")[0] == 0
    assert _write(s, _path(s, "cpuset", "g", "inner", "cpus"), b"5\n") == 0
    assert _write(s, _path(s, "cpuset", "g", "cpus"), b"4\n") == -errno.EBUSY
    for opcode, name, error in (
        (c.MKDIR, "..", errno.EINVAL),
        (c.MKDIR, "g", errno.EEXIST),
        (c.MKDIR, "affinity-3", errno.EINVAL),
        (c.RMDIR, "g", errno.EBUSY),  # a child group
        (c.UNLINK, "cpus", errno.EPERM),
        (c.CREATE, "new", errno.EACCES),
    ):
        body = (c.MKDIR_IN.pack(0o755, 0) if opcode == c.MKDIR else b"") + name.encode() + b"\0"
        assert _ask(s, opcode, top, body)[0] == -error, (opcode, name)
    assert _ask(s, c.RMDIR, g, b"inner\0")[0] == 0
    assert _ask(s, c.RMDIR, top, b"g\0")[0] == 0 and calls[-1] == ("g", None)
    assert _lookup(s, top, "g")[0] == -errno.ENOENT
    assert _ask(s, f.GETATTR, g)[0] == -errno.ENOENT  # a stale nodeid
    assert _ask(s, c.MKDIR, f.ROOT_ID, c.MKDIR_IN.pack(0o755, 0) + b"memory\0")[0] == -errno.EPERM
    # chmod and chown: refused by the protocol layer for every FUSE filesystem of the daemon.
    setattr_mode = f.SETATTR_VALID.pack(f.FATTR_MODE) + b"\0" * 84
    assert _ask(s, f.SETATTR, top, setattr_mode)[0] == -errno.EPERM


def test_sched_groups_made_with_mkdir_have_default_values() -> None:
    s, calls = _server()
    top = _path(s, "cpuctl")
    assert _ask(s, c.MKDIR, top, c.MKDIR_IN.pack(0o755, 0) + b"mine\0")[0] == 0
    assert calls == []  # not a cpuset: no speed
    assert _read(s, _path(s, "cpuctl", "mine", "cpu.shares")) == b"1024\n"
    assert _write(s, _path(s, "cpuctl", "mine", "cpu.shares"), b"512") == 0
    assert _read(s, _path(s, "cpuctl", "mine", "cpu.shares")) == b"512\n"
    assert _write(s, _path(s, "cpuctl", "mine", "cpu.uclamp.min"), b"lots") == -errno.EINVAL
    assert _ask(s, c.RMDIR, top, b"mine\0")[0] == 0
