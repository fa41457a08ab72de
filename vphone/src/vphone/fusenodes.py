"""The phone's writable clock nodes as a real kernel has them: a write the kernel would refuse
fails in the write(2) itself (EINVAL), a valid one is in force when write(2) returns.

Plain files cannot do that (the write always succeeds; inotify tells the daemon only after the
writer closed the file). So the daemon (host root) serves these nodes over FUSE: one flat
filesystem per phone boot whose files are the nodes, each bound over its plain file inside the
phone's mount namespace (native/vphone-exec `bind --host-file`), so the phone sees them at the
node paths. Every read asks the daemon for the node's current text; every write is judged by the
daemon's handler before the call returns, and its errno is the write's.

Why the kernel protocol by hand and not a library: the filesystem is a flat directory of a few
dozen small files, served by one thread that answers about ten opcodes; pyfuse3 would bring trio
(a second event loop beside the daemon's asyncio) and libfuse3 built from source, and fusepy /
mfusepy use libfuse2/3's high-level API with its own threads and path cache. The protocol
(<linux/fuse.h>, stable since 7.9 and extended only compatibly) is answered here in ~200 lines
and tested against the real kernel (vphone/tests/integration/test_fusenodes.py).

Confinement: the filesystem serves only its nodes (lookups of anything else fail ENOENT, nothing
here opens a host path, links/creation/renames are refused EPERM, chmod/chown EPERM), and the
kernel checks the modes and owners this server reports (default_permissions): the phone's shell
gets EACCES writing a node, as before. The host mount exists only while the nodes are bound into
the phone; it is detached at once after that (the phone's binds keep the filesystem alive).

One thread serves the connection, not the daemon's event loop: the daemon itself may read a node
through a descriptor the phone handed it (adb pull), which must not wait for its own loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import select
import stat
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

log = logging.getLogger(__name__)

FUSE_DEVICE = "/dev/fuse"
FUSE_KERNEL_MAJOR = 7
FUSE_MINOR_MAX = 31  # the newest protocol minor whose replies this server writes
MAX_WRITE = 4096  # a sysfs node takes one page per write
READ_BUFFER = 64 * 1024 + 4096
NODE_SIZE = 4096  # what stat shows for a sysfs attribute
ATTR_VALID_S = 3600  # names, modes and owners never change while mounted
ROOT_ID = 1
BIND_TIMEOUT_S = 30.0

# opcodes (<linux/fuse.h>)
LOOKUP, FORGET, GETATTR, SETATTR, READLINK = 1, 2, 3, 4, 5
OPEN, READ, WRITE, STATFS, RELEASE, FSYNC = 14, 15, 16, 17, 18, 20
FLUSH, INIT, OPENDIR, READDIR, RELEASEDIR, FSYNCDIR = 25, 26, 27, 28, 29, 30
INTERRUPT, DESTROY, BATCH_FORGET = 36, 38, 42
NO_REPLY = (FORGET, BATCH_FORGET, INTERRUPT)
# What would create, remove, rename or link a name: never (the phone sees only bound files).
NAME_CHANGES = (
    6,
    8,
    9,
    10,
    11,
    12,
    13,
    35,
    45,
    51,
)  # symlink mknod mkdir unlink rmdir rename link create rename2 tmpfile
FUSE_ATOMIC_O_TRUNC = 1 << 3  # O_TRUNC comes with OPEN (sysfs ignores it) instead of a SETATTR
FOPEN_DIRECT_IO = 1 << 0  # no page cache: every read asks for the node's current text
FATTR_MODE, FATTR_UID, FATTR_GID = 1 << 0, 1 << 1, 1 << 2

IN_HEADER = struct.Struct("<IIQQIIIHH")  # len opcode unique nodeid uid gid pid total_extlen pad
OUT_HEADER = struct.Struct("<IiQ")  # len error unique
INIT_IN = struct.Struct("<IIII")  # major minor max_readahead flags
INIT_OUT = struct.Struct("<IIIIHHIIHHIIH11H")  # 64 bytes (7.23+ layout)
ATTR = struct.Struct(
    "<QQQQQQIIIIIIIIII"
)  # ino size blocks a/m/ctime nsecs mode nlink uid gid rdev blksize flags
ENTRY_OUT = struct.Struct("<QQQQII")  # nodeid generation entry_valid attr_valid (nsecs)
ATTR_OUT = struct.Struct("<QII")  # attr_valid attr_valid_nsec dummy
OPEN_OUT = struct.Struct("<QIi")  # fh open_flags backing_id
IO_IN = struct.Struct("<QQIIQII")  # READ/WRITE: fh offset size flags lock_owner flags padding
OPEN_IN = struct.Struct("<II")  # flags open_flags
RELEASE_IN = struct.Struct("<Q")  # fh (then flags, release_flags, lock_owner)
WRITE_OUT = struct.Struct("<II")
SETATTR_VALID = struct.Struct("<I")
STATFS_OUT = struct.Struct("<QQQQQIIII6I")

MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
MNT_DETACH = 2
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)

ReadNode = Callable[[str], bytes]  # the node's current text
WriteNode = Callable[[str, bytes], int | None]  # None: accepted; else the errno write(2) returns


@dataclass(frozen=True)
class ServedNode:
    rel: str  # the node's path below /sys (what the handlers get)
    mode: int  # permission bits, e.g. 0o644
    uid: int  # host ids of its owner (the phone's root)
    gid: int


class FuseUnavailable(Exception):
    """FUSE cannot be used here (no /dev/fuse, no right to mount): plain files and inotify then."""


def node_name(index: int) -> str:
    return f"n{index}"


@dataclass(frozen=True)
class Caller:
    """Who made a request, as the kernel names it to the daemon: host ids and host thread id."""

    uid: int
    gid: int
    pid: int


class FuseServer:
    """One FUSE connection: the kernel protocol (INIT, framing, errors, the serving thread) and
    the mount's lifecycle. `mount(dir)` mounts it at a host directory (the daemon's, not the
    phone's) and starts the serving thread; after its files are bound into the phone, `detach()`
    removes the host mount; `close()` ends the connection. Subclasses answer the filesystem's
    opcodes in `serve_op`. No I/O in the constructor."""

    FS_NAME = "farm-fuse"  # what /proc/mounts shows as the source, and the type's subtype

    def __init__(self) -> None:
        self._fd: int | None = None
        self._wake: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self._mountpoint: Path | None = None
        self._born_s = 0  # the files' times: when they were mounted, as sysfs shows its boot
        self.requests = 0  # answered so far (for tests and benches)

    @property
    def mountpoint(self) -> Path:
        assert self._mountpoint is not None
        return self._mountpoint

    # -- lifecycle -------------------------------------------------------------------------------

    def mount(self, mountpoint: Path) -> None:
        try:
            fd = os.open(FUSE_DEVICE, os.O_RDWR | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as error:
            raise FuseUnavailable(f"cannot open {FUSE_DEVICE}: {error.strerror}") from None
        options = f"fd={fd},rootmode=40500,user_id=0,group_id=0,allow_other,default_permissions"
        options += f",max_read={MAX_WRITE}"
        mountpoint.mkdir(mode=0o700, exist_ok=True)
        flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
        name = self.FS_NAME.encode()
        if _libc.mount(name, os.fsencode(mountpoint), b"fuse." + name, flags, options.encode()) != 0:
            err = ctypes.get_errno()
            os.close(fd)
            raise FuseUnavailable(f"cannot mount FUSE at {mountpoint}: {os.strerror(err)}")
        self._fd, self._mountpoint = fd, mountpoint
        self._born_s = int(time.time())
        self._start_serving()

    def _start_serving(self) -> None:
        """Answer the connection's requests from now on: a thread of this process."""
        assert self._mountpoint is not None
        self._wake = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread = threading.Thread(
            target=self._serve, name=f"fuse-{self._mountpoint.parent.name}", daemon=True
        )
        self._thread.start()

    def detach(self) -> None:
        """Remove the host mount (lazily); binds of its files elsewhere keep serving."""
        if self._mountpoint is not None:
            unmount_stale(self._mountpoint)

    def close(self) -> None:
        self.detach()
        if self._wake is not None:
            os.write(self._wake[1], b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        for fd in (self._fd, *(self._wake or ())):
            if fd is not None:
                os.close(fd)
        self._fd = self._wake = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the protocol ----------------------------------------------------------------------------

    def _serve(self) -> None:
        assert self._fd is not None and self._wake is not None
        fd, wake = self._fd, self._wake[0]
        while True:
            ready, _, _ = select.select([fd, wake], [], [])
            if wake in ready:
                return
            try:
                request = os.read(fd, READ_BUFFER)
            except BlockingIOError:
                continue
            except OSError as error:
                if error.errno in (errno.EINTR, errno.ENOENT):  # ENOENT: the request was aborted
                    continue
                if error.errno != errno.ENODEV:  # ENODEV: unmounted everywhere
                    log.warning("FUSE %s: reading requests failed: %s", self.FS_NAME, error)
                return
            reply = self.answer(request)
            if reply is not None:
                with contextlib.suppress(FileNotFoundError):  # the caller was interrupted meanwhile
                    os.write(fd, reply)

    def answer(self, request: bytes) -> bytes | None:
        """The reply to one request (None for those that take none)."""
        _len, opcode, unique, nodeid, uid, gid, pid, _ext, _pad = IN_HEADER.unpack_from(request)
        body = memoryview(request)[IN_HEADER.size :]
        self.requests += 1
        if opcode in NO_REPLY:
            return None
        try:
            out = self._dispatch(opcode, nodeid, body, Caller(uid, gid, pid))
        except OSError as error:
            return OUT_HEADER.pack(OUT_HEADER.size, -(error.errno or errno.EIO), unique)
        return OUT_HEADER.pack(OUT_HEADER.size + len(out), 0, unique) + out

    def _dispatch(self, opcode: int, nodeid: int, body: memoryview, caller: Caller) -> bytes:
        if opcode == INIT:
            major, minor, readahead, flags = INIT_IN.unpack_from(body)
            if major != FUSE_KERNEL_MAJOR:
                raise OSError(errno.EPROTO, "FUSE major version")
            return INIT_OUT.pack(
                major, min(minor, FUSE_MINOR_MAX), readahead, flags & FUSE_ATOMIC_O_TRUNC,
                1, 1, MAX_WRITE, 1, 1, 0, 0, 0, 0, *([0] * 11),
            )  # fmt: skip
        if opcode == SETATTR and SETATTR_VALID.unpack_from(body)[0] & (FATTR_MODE | FATTR_UID | FATTR_GID):
            raise OSError(errno.EPERM, "modes and owners are fixed")
        if opcode == RELEASE:
            self.release(RELEASE_IN.unpack_from(body)[0])
            return b""
        if opcode in (RELEASEDIR, FSYNC, FSYNCDIR, DESTROY):
            return b""
        if opcode == STATFS:
            return STATFS_OUT.pack(0, 0, 0, 0, 0, NODE_SIZE, 255, NODE_SIZE, 0, *([0] * 6))
        if opcode == READLINK:
            raise OSError(errno.EINVAL, "no links here")
        return self.serve_op(opcode, nodeid, body, caller)

    def serve_op(self, opcode: int, nodeid: int, body: memoryview, caller: Caller) -> bytes:
        """The filesystem's answer to LOOKUP, GETATTR, SETATTR (size only), OPEN(DIR), READ(DIR),
        WRITE and the name changes; raise OSError(errno) to fail the call."""
        raise OSError(errno.ENOSYS, "not served")

    def release(self, fh: int) -> None:
        """The last descriptor of an open file handle `fh` was closed."""

    def born_at(self, born_s: int) -> None:
        """The files' times (the serving process of a connection mounted by another)."""
        self._born_s = born_s

    def attr(self, nodeid: int, mode: int, nlink: int, uid: int, gid: int, size: int) -> bytes:
        """A fuse_attr of this filesystem (times: when it was mounted)."""
        t = self._born_s
        return ATTR.pack(nodeid, size, 0, t, t, t, 0, 0, 0, mode, nlink, uid, gid, 0, NODE_SIZE, 0)


class NodeServer(FuseServer):
    """One FUSE connection serving `nodes` as a flat directory (the clock nodes, or the nodes
    whose values change by themselves).

    A read is a snapshot, as sysfs's: kernfs fills a page with the attribute's show() at a read at
    offset 0 of an open file and serves the reads that continue it from that page (seq_read_iter),
    so a reader never sees two values mixed however the value changes meanwhile, and a reader that
    keeps the file open and reads at offset 0 again gets the new value. Here the snapshot is kept
    per open file handle (OPEN hands each its own). A node without write bits cannot be opened for
    writing (EACCES), as kernfs_fop_open refuses an attribute without a store."""

    FS_NAME = "farm-clocknodes"

    def __init__(
        self, nodes: tuple[ServedNode, ...], read: ReadNode, write: WriteNode, *, name: str | None = None
    ) -> None:
        super().__init__()
        if name is not None:
            self.FS_NAME = name
        self.nodes = nodes
        self._read = read
        self._write = write
        self._by_name = {node_name(i): i for i in range(len(nodes))}
        self._snapshots: dict[int, bytes] = {}  # open file handle -> the text its reads continue
        self._next_fh = 1

    def path_of(self, index: int) -> Path:
        return self.mountpoint / node_name(index)

    def serve_op(self, opcode: int, nodeid: int, body: memoryview, caller: Caller) -> bytes:
        if opcode == LOOKUP:
            if nodeid != ROOT_ID:
                raise OSError(errno.ENOTDIR, "not a directory")
            index = self._by_name.get(bytes(body).split(b"\0", 1)[0].decode("utf-8", "replace"))
            if index is None:
                raise OSError(errno.ENOENT, "no such node")
            return ENTRY_OUT.pack(index + 2, 0, ATTR_VALID_S, ATTR_VALID_S, 0, 0) + self._attr(index + 2)
        if opcode in (GETATTR, SETATTR):
            return ATTR_OUT.pack(ATTR_VALID_S, 0, 0) + self._attr(nodeid)  # size changes: sysfs ignores them
        if opcode == OPENDIR:
            self._index(nodeid, directory=True)
            return OPEN_OUT.pack(0, 0, 0)
        if opcode == OPEN:
            node = self.nodes[self._index(nodeid)]
            if OPEN_IN.unpack_from(body)[0] & os.O_ACCMODE != os.O_RDONLY and not node.mode & 0o222:
                raise OSError(errno.EACCES, "the node has no store")
            fh, self._next_fh = self._next_fh, self._next_fh + 1
            return OPEN_OUT.pack(fh, FOPEN_DIRECT_IO, 0)
        if opcode == READ:
            fh, offset, size, *_ = IO_IN.unpack_from(body)
            text = self._snapshots.get(fh)
            if offset == 0 or text is None:
                text = self._snapshots[fh] = self._read(self.nodes[self._index(nodeid)].rel)
            return text[offset : offset + size]
        if opcode == WRITE:
            _fh, _offset, size, *_ = IO_IN.unpack_from(body)
            data = bytes(body[IO_IN.size : IO_IN.size + size])
            failed = self._write(self.nodes[self._index(nodeid)].rel, data)
            if failed is not None:
                raise OSError(failed, os.strerror(failed))
            return WRITE_OUT.pack(size, 0)
        if opcode == READDIR:
            return b""  # the phone sees no directory of this filesystem, only its bound files
        if opcode in NAME_CHANGES:
            raise OSError(errno.EPERM, "the nodes are fixed")
        raise OSError(errno.ENOSYS, "not served")  # FLUSH, ACCESS, xattrs, locks...: the kernel stops asking

    def release(self, fh: int) -> None:
        self._snapshots.pop(fh, None)

    def _index(self, nodeid: int, *, directory: bool = False) -> int:
        if directory:
            if nodeid != ROOT_ID:
                raise OSError(errno.ENOTDIR, "not a directory")
            return -1
        if not 2 <= nodeid < len(self.nodes) + 2:
            raise OSError(errno.EISDIR if nodeid == ROOT_ID else errno.ENOENT, "no such node")
        return nodeid - 2

    def _attr(self, nodeid: int) -> bytes:
        if nodeid == ROOT_ID:
            return self.attr(nodeid, stat.S_IFDIR | 0o500, 2, 0, 0, 0)
        node = self.nodes[self._index(nodeid)]
        return self.attr(nodeid, stat.S_IFREG | node.mode, 1, node.uid, node.gid, NODE_SIZE)


def phone_path(rel: str) -> str:
    """Where a served node is in the phone: `rel` below /sys, or itself when absolute."""
    return rel if rel.startswith("/") else f"/sys/{rel}"


def unmount_stale(mountpoint: Path) -> None:
    """Detach whatever is mounted at `mountpoint` (a daemon that died left it) and remove it."""
    if _libc.umount2(os.fsencode(mountpoint), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOENT):
            log.warning("cannot detach %s: %s", mountpoint, os.strerror(err))
    with contextlib.suppress(FileNotFoundError, OSError):
        os.rmdir(mountpoint)


async def serve_in_phone(
    nodes: tuple[ServedNode, ...],
    read: ReadNode,
    write: WriteNode,
    *,
    mountpoint: Path,
    init_pid: int,
) -> NodeServer:
    """Serve `nodes` over FUSE and bind each over its phone path (/sys/<rel>, or <rel> when it
    is absolute, as /proc/meminfo) in the phone whose init is host pid `init_pid` (one
    vphone-exec call); the host mount is detached once they are bound. Raises FuseUnavailable
    (with the reason) when any step fails; nothing is left mounted then."""
    server = NodeServer(nodes, read, write)
    binds = [(node_name(i), phone_path(node.rel)) for i, node in enumerate(nodes)]
    await mount_in_phone(server, binds, mountpoint=mountpoint, init_pid=init_pid)
    return server


async def mount_in_phone(
    server: FuseServer, binds: list[tuple[str, str]], *, mountpoint: Path, init_pid: int
) -> None:
    """Mount `server` at the host's `mountpoint`, bind each (path below the mount, phone path)
    into the phone whose init is host pid `init_pid` (one vphone-exec call, files or
    directories), then detach the host mount. Raises FuseUnavailable (with the reason) when any
    step fails; nothing is left mounted then."""
    # Here, not at the top: the node mirror's serving process imports this module, and
    # vphone.layout imports the profile model (pydantic: ~0.3 s of CPU it would add to each
    # phone's start).
    from vphone.layout import native_binary

    unmount_stale(mountpoint)
    server.mount(mountpoint)
    try:
        argv = [str(native_binary("vphone-exec")), "bind", "--pid", str(init_pid)]
        for below, phone_path in binds:
            argv += ["--host-file", str(mountpoint / below), phone_path]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            _out, err = await asyncio.wait_for(proc.communicate(), BIND_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise FuseUnavailable(f"binding {server.FS_NAME} into the phone timed out") from None
        if proc.returncode != 0:
            raise FuseUnavailable(f"cannot bind {server.FS_NAME} into the phone: {err.decode().strip()}")
    except BaseException:
        server.close()
        raise
    server.detach()
