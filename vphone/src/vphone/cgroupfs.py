"""A rooted phone's cgroup trees (/dev/cpuset, /dev/stune|cpuctl) with the kernel's cgroupfs
semantics, served by the daemon over FUSE (the protocol is fusenodes.py's) and bound over the
plain trees (cpusets.py) inside the phone:

* mkdir makes a group with the kernel's files at once (cpuset: empty `cpus`/`mems`, as the
  kernel without clone_children; its parent's with `cgroup.clone_children` 1) and, for cpuset,
  its host cgroup cpu/<group> under the phone's own; rmdir removes a group without tasks and
  child groups (EBUSY otherwise); files cannot be created (EACCES), unlinked, renamed, linked
  (EPERM), nor chmod'ed or chown'ed (EPERM).
* `tasks` / `cgroup.procs` list members in the phone's pid numbers; a write of a phone pid moves
  the thread / its whole process as the kernel does: EINVAL for a non-number, ESRCH for a pid
  that is not a process of this phone's PID namespace, EPERM when the writer is neither the
  phone's root nor the target's uid, ENOSPC for a cpuset group without cpus or mems. Pid 0 is
  the writer itself.
* cpuset `cpus`/`mems`: EINVAL in write(2) for a malformed list or one outside the parent's,
  EBUSY when a child group's list would fall outside, ENOSPC when a group with tasks would be
  left without any, EACCES for the top group's (the kernel's top cpuset follows the online
  CPUs). The group's speed follows its cpus (the physics' quota, `on_cpus`).
* /dev/stune and /dev/cpuctl: the same tree semantics; their values are bookkeeping (numbers
  checked as numbers) and so is membership: a write moves the task in the daemon's books only
  (validated like cpuset's), reading lists the phone's live tasks that were moved there, the
  top group every other one. There is no host meaning to give them (no schedtune on the host;
  the phone's CPU budget is the cpu hierarchy's quota, which cpuset already drives).

Confinement: the server opens no path the phone names (every name is looked up in its own
tables); it moves only threads it found in the phone's PID namespace (via /proc/PID/ns/pid and
NSpid, never the phone's number as a host pid), and only into cpu/<group> under the phone's
own host cgroup; group names are checked (`group_name_error`); at most MAX_GROUPS groups.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import re
import stat
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from vphone.affinity import PhoneThread, nspid, phone_threads, status_uids
from vphone.cgroup import CPU_GROUP, PhoneCgroups
from vphone.cpusets import (
    MEMBERSHIP_FILES,
    CgroupTrees,
    CpusetGroup,
    cpuset_files,
    format_cpulist,
    parse_cpulist,
)
from vphone.fusenodes import (
    ATTR_OUT,
    ATTR_VALID_S,
    ENTRY_OUT,
    FOPEN_DIRECT_IO,
    GETATTR,
    IO_IN,
    LOOKUP,
    OPEN,
    OPEN_OUT,
    OPENDIR,
    READ,
    READDIR,
    ROOT_ID,
    SETATTR,
    WRITE,
    WRITE_OUT,
    Caller,
    FuseServer,
    mount_in_phone,
)

log = logging.getLogger(__name__)

MAX_NAME_BYTES = 255  # NAME_MAX
MAX_GROUPS = 256  # groups the phone may make per hierarchy (each cpuset one is a host cgroup)
RESERVED_PREFIX = "affinity-"  # taskset's host groups are cpu/affinity-<mask> (affinity.py)
READ_ONLY_FILES = frozenset({"effective_cpus", "effective_mems", "memory_pressure", "cgroup.sane_behavior"})
CPUSET_LISTS = ("cpus", "mems")
MAX_MEMS = 1  # one memory node (0), as a phone has

# opcodes that change names (<linux/fuse.h>) and what cgroupfs answers for each
SYMLINK, MKNOD, MKDIR, UNLINK, RMDIR, RENAME, LINK = 6, 8, 9, 10, 11, 12, 13
CREATE, RENAME2, TMPFILE = 35, 45, 51
REFUSED_NAME_CHANGES = {
    SYMLINK: errno.EPERM,
    MKNOD: errno.EPERM,
    UNLINK: errno.EPERM,
    RENAME: errno.EPERM,
    LINK: errno.EPERM,
    CREATE: errno.EACCES,  # kernfs directories have no create: open(O_CREAT) is EACCES
    RENAME2: errno.EPERM,
    TMPFILE: errno.EOPNOTSUPP,
}
MKDIR_IN = struct.Struct("<II")  # mode umask
DIRENT = struct.Struct("<QQII")  # ino off namelen type
DT_DIR, DT_REG = 4, 8


class TreeKind(enum.Enum):
    CPUSET = "cpuset"
    SCHED = "sched"  # /dev/stune or /dev/cpuctl


@dataclass(frozen=True)
class TreeSpec:
    """One hierarchy to serve: its directory name below the mount and its groups' files."""

    kind: TreeKind
    dirname: str  # "cpuset", "stune" or "cpuctl" (bound at /dev/<dirname>)
    groups: dict[str, dict[str, str]]  # group ("" top) -> file -> text, as laid out at boot
    new_group: dict[str, str]  # the files of a group made with mkdir


@dataclass(frozen=True)
class Owners:
    """Host ids the tree shows: files root's with group system (Android's init.rc chowns)."""

    uid: int
    gid: int


def group_name_error(name: str) -> int | None:
    """The errno mkdir answers for a group name (None: acceptable)."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        return errno.EINVAL
    if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        return errno.ENAMETOOLONG
    return None


def parse_pid(data: bytes) -> int | None:
    """What the kernel's cgroup_procs_write takes: one decimal number (whitespace around it)."""
    text = data.decode("ascii", "replace").strip()
    return int(text) if text.isdigit() and len(text) < 12 else None


def may_move(caller_uid: int, root_uid: int, target_uids: tuple[int, ...]) -> bool:
    """cgroup v1's rule for writing tasks: root, or the writer's euid is the target's real or
    saved uid (status Uid: real, effective, saved, fs)."""
    return caller_uid == root_uid or (
        len(target_uids) >= 3 and caller_uid in (target_uids[0], target_uids[2])
    )


def list_change_error(
    new: tuple[int, ...] | None, parent: tuple[int, ...], children: Iterable[tuple[int, ...]], populated: bool
) -> int | None:
    """cpuset's validate_change for a cpus/mems write (None: accepted). `new` None: malformed."""
    if new is None or not set(new) <= set(parent):
        return errno.EINVAL
    if any(not set(child) <= set(new) for child in children):
        return errno.EBUSY
    if not new and populated:
        return errno.ENOSPC
    return None


def bookkeeping_value(old: str, data: bytes) -> str | None:
    """A stune/cpuctl value or cpuset flag write (None: EINVAL): numbers stay integers, uclamp's
    percentages (`max` or 0..100, shown with two decimals) stay percentages, text stays text."""
    text = data.decode("utf-8", "replace").strip()
    current = old.strip()
    if current == "max" or re.fullmatch(r"\d+\.\d\d", current):
        if text == "max":
            return "max\n"
        try:
            value = float(text)
        except ValueError:
            return None
        return f"{value:.2f}\n" if 0 <= value <= 100 else None
    if re.fullmatch(r"-?\d+", current):
        return f"{int(text)}\n" if re.fullmatch(r"-?\d{1,18}", text) else None
    return text + "\n"


class Membership(Protocol):
    """Who is in a group of one hierarchy, and moving tasks there."""

    def listed(self, group: str, *, threads: bool) -> list[int]: ...  # phone ids, sorted

    def move(self, group: str, thread: PhoneThread, *, whole_process: bool) -> int | None: ...

    def populated(self, group: str) -> bool: ...

    def added(self, group: str) -> int | None: ...

    def removed(self, group: str) -> int | None: ...


@dataclass(frozen=True)
class PhoneTasks:
    """The phone's threads as the host sees them, strictly through its PID namespace.
    `candidates`: host pids that may be the phone's (its cgroup's; None: all of /proc)."""

    pidns: str
    candidates: Callable[[], Iterable[int] | None]

    def _in_phone(self, host_id: int) -> bool:
        try:
            return os.readlink(f"/proc/{host_id}/ns/pid") == self.pidns
        except OSError:
            return False

    def processes(self) -> list[int]:
        try:
            pids = self.candidates()
        except OSError:
            pids = None
        if pids is None:
            pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
        return [p for p in pids if self._in_phone(p)]

    def threads(self) -> dict[int, PhoneThread]:
        """Every thread of the phone, by its phone tid."""
        return phone_threads(self.processes())

    def thread(self, phone_tid: int) -> PhoneThread | None:
        return self.threads().get(phone_tid)

    def of_host(self, host_tid: int) -> PhoneThread | None:
        """The phone thread behind a host tid (None: not the phone's, or gone)."""
        if not self._in_phone(host_tid):
            return None
        try:
            text = Path(f"/proc/{host_tid}/status").read_text(encoding="utf-8")
        except OSError:
            return None
        tid = nspid(text)
        return None if tid is None else PhoneThread(host_tid, tid, status_uids(text))

    def still_phone(self, thread: PhoneThread) -> bool:
        """Right before a move: the host tid is still that phone thread (not a reused number)."""
        again = self.of_host(thread.host_tid)
        return again is not None and again.phone_tid == thread.phone_tid


def _read_ids(path: Path) -> list[int]:
    with open(path, "rb") as f:
        return [int(x) for x in f.read().split()]


class HostMembership:
    """cpuset membership that is real: group g is the host cgroup cpu/g of the phone."""

    def __init__(self, cgroups: PhoneCgroups, tasks: PhoneTasks) -> None:
        self.cgroups = cgroups
        self.tasks = tasks

    @staticmethod
    def host_group(group: str) -> str:
        return f"{CPU_GROUP}/{group}" if group else CPU_GROUP

    def listed(self, group: str, *, threads: bool) -> list[int]:
        hg = self.host_group(group)
        f = self.cgroups.threads_file(hg) if threads else self.cgroups.procs_file(hg)
        phone = (self.tasks.of_host(h) for h in _read_ids(f))
        return sorted({t.phone_tid for t in phone if t is not None})

    def move(self, group: str, thread: PhoneThread, *, whole_process: bool) -> int | None:
        hg = self.host_group(group)
        target = self.cgroups.procs_file(hg) if whole_process else self.cgroups.threads_file(hg)
        if not self.tasks.still_phone(thread):
            return errno.ESRCH
        try:
            with open(target, "w", encoding="ascii") as f:
                f.write(str(thread.host_tid))
        except OSError as exc:
            return exc.errno or errno.EIO
        return None

    def populated(self, group: str) -> bool:
        return bool(_read_ids(self.cgroups.threads_file(self.host_group(group))))

    def added(self, group: str) -> int | None:
        try:
            self.cgroups.add_group(self.host_group(group))
        except OSError as exc:
            return exc.errno or errno.EIO
        return None

    def removed(self, group: str) -> int | None:
        try:
            self.cgroups.remove_group(self.host_group(group))
        except OSError as exc:
            return exc.errno or errno.EIO
        return None


class BookMembership:
    """Membership in the daemon's books only (stune/cpuctl; cpuset without host cgroups):
    host tid -> group; a task never moved is in the top group."""

    def __init__(self, tasks: PhoneTasks) -> None:
        self.tasks = tasks
        self._group_of: dict[int, str] = {}
        self._lock = threading.Lock()

    def _live(self) -> dict[int, PhoneThread]:
        threads = self.tasks.threads()
        alive = {t.host_tid for t in threads.values()}
        with self._lock:
            for gone in [h for h in self._group_of if h not in alive]:
                del self._group_of[gone]  # an exited task leaves its group (and its number)
        return threads

    def _members(self, group: str) -> list[PhoneThread]:
        threads = self._live()
        with self._lock:
            return [t for t in threads.values() if self._group_of.get(t.host_tid, "") == group]

    def listed(self, group: str, *, threads: bool) -> list[int]:
        members = self._members(group)
        if threads:
            return sorted(t.phone_tid for t in members)
        return sorted({self._tgid(t) for t in members} - {0})

    def _tgid(self, thread: PhoneThread) -> int:
        try:
            text = Path(f"/proc/{thread.host_tid}/status").read_text(encoding="utf-8")
        except OSError:
            return 0
        for line in text.splitlines():
            if line.startswith("Tgid:"):
                leader = self.tasks.of_host(int(line.split()[1]))
                return 0 if leader is None else leader.phone_tid
        return 0

    def move(self, group: str, thread: PhoneThread, *, whole_process: bool) -> int | None:
        moving = [thread]
        if whole_process:
            leader = self._tgid(thread)
            moving = [t for t in self.tasks.threads().values() if self._tgid(t) == leader]
        with self._lock:
            for t in moving:
                self._group_of[t.host_tid] = group
        return None

    def populated(self, group: str) -> bool:
        return bool(self._members(group))

    def added(self, group: str) -> int | None:
        return None

    def removed(self, group: str) -> int | None:
        return None


@dataclass
class _Group:
    """One group's state on the server (mutable, private to it)."""

    files: dict[str, str]
    children: list[str] = field(default_factory=list)
    lists: dict[str, tuple[int, ...]] = field(default_factory=dict)  # cpuset: cpus, mems


@dataclass(frozen=True)
class _Key:
    tree: int  # index into the server's trees; -1 for the mount's root
    group: str
    file: str | None  # None: the group's directory


OnCpus = Callable[[str, tuple[int, ...] | None], None]  # cpuset group -> its cpus (None: removed)


class CgroupFs(FuseServer):
    """The phone's cgroup hierarchies below one mount: <mount>/<dirname>/<group>/<file>."""

    FS_NAME = "farm-cgroupfs"

    def __init__(
        self,
        trees: tuple[TreeSpec, ...],
        memberships: tuple[Membership, ...],
        *,
        ncpu: int,
        owners: Owners,
        tasks: PhoneTasks,
        root_uid: int,
        on_cpus: OnCpus,
        lock: threading.RLock,
    ) -> None:
        super().__init__()
        self.specs = trees
        self.memberships = memberships
        self.ncpu = ncpu
        self.owners = owners
        self.tasks = tasks
        self.root_uid = root_uid
        self.on_cpus = on_cpus
        self.lock = lock  # the physics' (quotas, and cpuset state they read)
        self._groups: list[dict[str, _Group]] = []
        self._ids: dict[_Key, int] = {}
        self._keys: dict[int, _Key] = {ROOT_ID: _Key(-1, "", None)}
        self._next_id = ROOT_ID + 1
        for i, spec in enumerate(trees):
            groups: dict[str, _Group] = {}
            self._groups.append(groups)
            for name in sorted(spec.groups, key=lambda g: g.count("/") + bool(g)):
                self._add(i, name, dict(spec.groups[name]))

    # -- the tables ---------------------------------------------------------------------------

    def _add(self, tree: int, name: str, files: dict[str, str]) -> None:
        group = _Group(files)
        if self.specs[tree].kind is TreeKind.CPUSET:
            for f in CPUSET_LISTS:
                group.lists[f] = parse_cpulist(files.get(f, ""), self.ncpu if f == "cpus" else MAX_MEMS) or ()
        self._groups[tree][name] = group
        if name:
            self._groups[tree][name.rpartition("/")[0]].children.append(name.rpartition("/")[2])
        names: list[str | None] = [None, *files]
        for file in names:
            self._ids[_Key(tree, name, file)] = self._next_id
            self._keys[self._next_id] = _Key(tree, name, file)
            self._next_id += 1

    def _drop(self, tree: int, name: str) -> None:
        group = self._groups[tree].pop(name)
        parent, _, leaf = name.rpartition("/")
        self._groups[tree][parent].children.remove(leaf)
        names: list[str | None] = [None, *group.files]
        for file in names:
            self._keys.pop(self._ids.pop(_Key(tree, name, file)), None)

    def _key(self, nodeid: int) -> _Key:
        key = self._keys.get(nodeid)
        if key is None:
            raise OSError(errno.ENOENT, "gone")
        return key

    def _dir_key(self, nodeid: int) -> _Key:
        key = self._key(nodeid)
        if key.file is not None:
            raise OSError(errno.ENOTDIR, "not a directory")
        return key

    def _child(self, parent: _Key, name: str) -> _Key | None:
        if parent.tree < 0:
            for i, spec in enumerate(self.specs):
                if spec.dirname == name:
                    return _Key(i, "", None)
            return None
        group = self._groups[parent.tree][parent.group]
        if name in group.files:
            return _Key(parent.tree, parent.group, name)
        if name in group.children:
            return _Key(parent.tree, f"{parent.group}/{name}".lstrip("/"), None)
        return None

    def _entries(self, key: _Key) -> list[tuple[str, _Key]]:
        if key.tree < 0:
            return [(spec.dirname, _Key(i, "", None)) for i, spec in enumerate(self.specs)]
        group = self._groups[key.tree][key.group]
        rows = [(f, _Key(key.tree, key.group, f)) for f in group.files]
        rows += [(c, _Key(key.tree, f"{key.group}/{c}".lstrip("/"), None)) for c in group.children]
        return rows

    def _attr_of(self, key: _Key) -> bytes:
        nodeid = self._ids.get(key, ROOT_ID) if key.tree >= 0 else ROOT_ID
        if key.file is None:
            subdirs = 0 if key.tree < 0 else len(self._groups[key.tree][key.group].children)
            return self.attr(nodeid, stat.S_IFDIR | 0o755, 2 + subdirs, self.owners.uid, self.owners.gid, 0)
        if key.file in READ_ONLY_FILES:
            mode = 0o444
        elif key.file in MEMBERSHIP_FILES:
            mode = 0o664  # Android's init.rc: chmod 0664 .../tasks (system may write)
        else:
            mode = 0o644
        return self.attr(nodeid, stat.S_IFREG | mode, 1, self.owners.uid, self.owners.gid, 0)

    # -- the protocol's filesystem part ---------------------------------------------------------

    def serve_op(self, opcode: int, nodeid: int, body: memoryview, caller: Caller) -> bytes:
        if opcode == LOOKUP:
            child = self._child(self._dir_key(nodeid), _name(body))
            if child is None:
                raise OSError(errno.ENOENT, "no such file")
            return ENTRY_OUT.pack(self._ids[child], 0, ATTR_VALID_S, 0, 0, 0) + self._attr_of(child)
        if opcode in (GETATTR, SETATTR):  # SETATTR: only sizes get here (O_TRUNC), ignored
            return ATTR_OUT.pack(ATTR_VALID_S, 0, 0) + self._attr_of(self._key(nodeid))
        if opcode == OPENDIR:
            self._dir_key(nodeid)
            return OPEN_OUT.pack(0, 0, 0)
        if opcode == OPEN:
            if self._key(nodeid).file is None:
                raise OSError(errno.EISDIR, "a directory")
            return OPEN_OUT.pack(0, FOPEN_DIRECT_IO, 0)
        if opcode == READDIR:
            _fh, offset, size, *_ = IO_IN.unpack_from(body)
            return self._readdir(self._dir_key(nodeid), nodeid, offset, size)
        if opcode == READ:
            _fh, offset, size, *_ = IO_IN.unpack_from(body)
            return self._read(self._key(nodeid)).encode()[offset : offset + size]
        if opcode == WRITE:
            _fh, _offset, size, *_ = IO_IN.unpack_from(body)
            failed = self._write(self._key(nodeid), bytes(body[IO_IN.size : IO_IN.size + size]), caller)
            if failed is not None:
                raise OSError(failed, os.strerror(failed))
            return WRITE_OUT.pack(size, 0)
        if opcode == MKDIR:
            name = _name(body[MKDIR_IN.size :])
            return self._mkdir(self._dir_key(nodeid), name)
        if opcode == RMDIR:
            failed = self._rmdir(self._dir_key(nodeid), _name(body))
            if failed is not None:
                raise OSError(failed, os.strerror(failed))
            return b""
        if opcode in REFUSED_NAME_CHANGES:
            raise OSError(REFUSED_NAME_CHANGES[opcode], "cgroupfs")
        raise OSError(errno.ENOSYS, "not served")  # FLUSH, ACCESS, xattrs, locks: the kernel stops asking

    def _readdir(self, key: _Key, nodeid: int, offset: int, size: int) -> bytes:
        rows = [(".", nodeid, DT_DIR), ("..", nodeid, DT_DIR)]
        rows += [
            (n, self._ids.get(k, ROOT_ID), DT_DIR if k.file is None else DT_REG)
            for n, k in self._entries(key)
        ]
        out = bytearray()
        for index in range(offset, len(rows)):
            name, ino, kind = rows[index]
            raw = name.encode()
            entry = DIRENT.pack(ino, index + 1, len(raw), kind) + raw
            entry += b"\0" * (-len(entry) % 8)
            if len(out) + len(entry) > size:
                break
            out += entry
        return bytes(out)

    # -- reads and writes -----------------------------------------------------------------------

    def _read(self, key: _Key) -> str:
        spec = self.specs[key.tree]
        group = self._groups[key.tree].get(key.group)
        if group is None or key.file is None:
            raise OSError(errno.ENOENT, "gone")
        if key.file in MEMBERSHIP_FILES:
            try:
                ids = self.memberships[key.tree].listed(key.group, threads=key.file == "tasks")
            except OSError as exc:
                raise OSError(exc.errno or errno.EIO, "membership") from None
            return "".join(f"{i}\n" for i in ids)
        if spec.kind is TreeKind.CPUSET and key.file.removeprefix("effective_") in CPUSET_LISTS:
            return format_cpulist(group.lists[key.file.removeprefix("effective_")]) + "\n"
        return group.files[key.file]

    def _write(self, key: _Key, data: bytes, caller: Caller) -> int | None:
        group = self._groups[key.tree].get(key.group)
        if group is None or key.file is None:
            return errno.ENOENT
        if key.file in MEMBERSHIP_FILES:
            return self._move(key, data, caller)
        if key.file in READ_ONLY_FILES:
            return errno.EINVAL  # kernfs: a file without a write handler
        if self.specs[key.tree].kind is TreeKind.CPUSET and key.file in CPUSET_LISTS:
            with self.lock:
                return self._set_list(key, group, data)
        value = bookkeeping_value(group.files[key.file], data)
        if value is None:
            return errno.EINVAL
        group.files[key.file] = value
        return None

    def _set_list(self, key: _Key, group: _Group, data: bytes) -> int | None:
        assert key.file is not None
        if not key.group:
            return errno.EACCES  # the top cpuset's lists are the system's (read-only)
        limit = self.ncpu if key.file == "cpus" else MAX_MEMS
        new = parse_cpulist(data.decode("ascii", "replace"), limit)
        groups = self._groups[key.tree]
        parent = groups[key.group.rpartition("/")[0]].lists[key.file]
        children = [groups[f"{key.group}/{c}"].lists[key.file] for c in group.children]
        membership = self.memberships[key.tree]
        failed = list_change_error(
            new, parent, children, populated=bool(new == ()) and membership.populated(key.group)
        )
        if failed is not None:
            log.info("cpuset: %s: %s %r refused (%s)", key.group, key.file, data, errno.errorcode[failed])
            return failed
        assert new is not None
        group.lists[key.file] = new
        if key.file == "cpus":
            self.on_cpus(key.group, new)
        return None

    def _move(self, key: _Key, data: bytes, caller: Caller) -> int | None:
        pid = parse_pid(data)
        if pid is None:
            return errno.EINVAL
        # pid 0: the writer itself
        thread = self.tasks.of_host(caller.pid) if pid == 0 else self.tasks.thread(pid)
        if thread is None:
            return errno.ESRCH
        if not may_move(caller.uid, self.root_uid, thread.uids):
            return errno.EPERM
        group = self._groups[key.tree][key.group]
        if self.specs[key.tree].kind is TreeKind.CPUSET and not all(group.lists.values()):
            return errno.ENOSPC
        return self.memberships[key.tree].move(key.group, thread, whole_process=key.file == "cgroup.procs")

    # -- mkdir and rmdir ------------------------------------------------------------------------

    def _mkdir(self, parent: _Key, name: str) -> bytes:
        if parent.tree < 0:
            raise OSError(errno.EPERM, "the hierarchies are fixed")
        failed = group_name_error(name)
        if failed is None and self._child(parent, name) is not None:
            failed = errno.EEXIST
        if failed is None and not parent.group and name.startswith(RESERVED_PREFIX):
            failed = errno.EINVAL  # the host name of taskset's groups (documented limit)
        if failed is None and len(self._groups[parent.tree]) > MAX_GROUPS:
            failed = errno.EAGAIN  # as cgroup.max.descendants answers
        if failed is not None:
            raise OSError(failed, os.strerror(failed))
        spec = self.specs[parent.tree]
        name_path = f"{parent.group}/{name}".lstrip("/")
        files = dict(spec.new_group)
        up = self._groups[parent.tree][parent.group]
        clone = up.files.get("cgroup.clone_children", "0\n").strip() == "1"
        with self.lock:
            failed = self.memberships[parent.tree].added(name_path)
            if failed is not None:
                raise OSError(failed, os.strerror(failed))
            if spec.kind is TreeKind.CPUSET and clone:
                for f in CPUSET_LISTS:
                    files[f] = format_cpulist(up.lists[f]) + "\n"
            self._add(parent.tree, name_path, files)
            if spec.kind is TreeKind.CPUSET:
                self.on_cpus(name_path, self._groups[parent.tree][name_path].lists["cpus"])
        return ENTRY_OUT.pack(self._ids[_Key(parent.tree, name_path, None)], 0, ATTR_VALID_S, 0, 0, 0) + (
            self._attr_of(_Key(parent.tree, name_path, None))
        )

    def _rmdir(self, parent: _Key, name: str) -> int | None:
        if parent.tree < 0:
            return errno.EPERM
        child = self._child(parent, name)
        if child is None:
            return errno.ENOENT
        if child.file is not None:
            return errno.ENOTDIR
        group = self._groups[child.tree][child.group]
        membership = self.memberships[child.tree]
        with self.lock:
            if group.children or membership.populated(child.group):
                return errno.EBUSY
            failed = membership.removed(child.group)
            if failed is not None:
                return failed
            self._drop(child.tree, child.group)
            if self.specs[child.tree].kind is TreeKind.CPUSET:
                self.on_cpus(child.group, None)
        return None


def _name(body: memoryview | bytes) -> str:
    return bytes(body).split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def phone_dirs(trees: tuple[TreeSpec, ...]) -> list[tuple[str, str]]:
    """(path below the mount, phone path) of each hierarchy: /dev/<dirname>."""
    return [(spec.dirname, f"/dev/{spec.dirname}") for spec in trees]


SYSTEM_GID = 1000  # Android's `system` group, which init.rc gives the cgroup trees
CGROUP_FUSE_ENV = "FARM_VIRTUAL_CGROUP_FUSE"  # "0": keep the plain trees (to compare, or test them)


def tree_specs(trees: CgroupTrees) -> tuple[TreeSpec, ...]:
    """The phone's two hierarchies as laid out at boot (cpusets.py's files)."""
    cpuset = {
        g.name: cpuset_files(g, root=not g.name) for g in trees.groups()
    }  # the lists themselves are served from the server's state
    new_cpuset = cpuset_files(CpusetGroup("", ()), root=False, mems="")
    sched = trees.sched_phone_dir.removeprefix("/dev/")
    return (
        TreeSpec(TreeKind.CPUSET, "cpuset", cpuset, new_cpuset),
        TreeSpec(TreeKind.SCHED, sched, trees.sched_groups(), trees.sched_new_group()),
    )


async def serve_in_phone(
    trees: CgroupTrees,
    cgroups: PhoneCgroups | None,
    *,
    pidns: str,
    init_pid: int,
    owners: Owners,
    root_uid: int,
    on_cpus: OnCpus,
    lock: threading.RLock,
    mountpoint: Path,
) -> CgroupFs:
    """Serve the phone's trees over FUSE and bind them over /dev/cpuset and /dev/stune|cpuctl in
    the phone (the plain trees stay beneath, unreachable); raises FuseUnavailable."""
    candidates = (lambda: None) if cgroups is None else cgroups.member_pids
    tasks = PhoneTasks(pidns, candidates)
    specs = tree_specs(trees)
    cpuset_members: Membership = BookMembership(tasks) if cgroups is None else HostMembership(cgroups, tasks)
    server = CgroupFs(
        specs,
        (cpuset_members, BookMembership(tasks)),
        ncpu=trees.profile.cpu.ncpu,
        owners=owners,
        tasks=tasks,
        root_uid=root_uid,
        on_cpus=on_cpus,
        lock=lock,
    )
    await mount_in_phone(server, phone_dirs(specs), mountpoint=mountpoint, init_pid=init_pid)
    return server
