"""File access below a tree the phone may change, for the daemon (host root).

The phone's root owns its /sys and cgroup trees and the control dir /dev/.farm, its shell the
tools' folders in it (shared/, settings/, logcat/, props/set): either may plant symlinks there,
which the daemon would resolve in the HOST's filesystem (a link at
/dev/cpuset/background/effective_cpus to any host file made the daemon rewrite that file). So
every access walks from the tree's root one directory at a time, each opened from the last
one's descriptor with O_NOFOLLOW: a link anywhere below the root, or a directory swapped for one
meanwhile, fails (ELOOP / ENOTDIR) instead of being followed.

Nor does the daemon block on what the phone put there: files open with O_NONBLOCK (a FIFO
planted where a file belongs would otherwise hold the open, and the daemon's one event loop,
until someone writes it), anything but a regular file is refused (EINVAL: FIFOs, sockets, device
nodes) before a byte moves, and reads stop at a bound (EFBIG past it), so a file the phone grew
(or a sparse one) cannot fill the daemon's memory.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# What the daemon reads from a phone's trees is a few lines of text (props, requests, clock
# nodes); the largest, kmsg and thermalservice.txt, stay under 64 KiB.
MAX_READ_BYTES = 1 << 20
MAX_LIST_ENTRIES = 4096  # props/set and props/persist hold a few dozen names


def open_dir(root: Path, rel_dir: str) -> int:
    """A descriptor of root/rel_dir ("" is root itself), no link followed below root."""
    parts = [p for p in rel_dir.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise OSError(errno.EINVAL, f"not a path below {root}", rel_dir)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            below = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(root: Path, rel: str, flags: int, mode: int = 0o444) -> int:
    """Open root/rel, a regular file, without following a link anywhere below root and without
    blocking (O_NONBLOCK: a FIFO's open returns at once, then is refused with EINVAL)."""
    parent, _, name = rel.strip("/").rpartition("/")
    if name in ("", ".", ".."):
        raise OSError(errno.EINVAL, f"not a file below {root}", rel)
    dfd = open_dir(root, parent)
    try:
        fd = os.open(name, flags | _FILE_FLAGS, mode, dir_fd=dfd)
    except OSError as error:
        if error.errno == errno.ENXIO:  # a FIFO without a reader, opened for writing
            raise OSError(errno.EINVAL, "not a regular file", f"{root}/{rel}") from None
        raise
    finally:
        os.close(dfd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", f"{root}/{rel}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_fd(fd: int, max_bytes: int = MAX_READ_BYTES) -> bytes:
    """The content of an open regular file, at most max_bytes (EFBIG beyond)."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(65536, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise OSError(errno.EFBIG, f"more than {max_bytes} bytes")


def read_text(root: Path, rel: str, max_bytes: int = MAX_READ_BYTES) -> str:
    fd = open_file(root, rel, os.O_RDONLY)
    try:
        return read_fd(fd, max_bytes).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


def exists(root: Path, rel: str) -> bool:
    """Whether root/rel is there (any kind of file; a link is not followed)."""
    parent, _, name = rel.strip("/").rpartition("/")
    try:
        dfd = open_dir(root, parent)
    except OSError:
        return False
    try:
        os.stat(name, dir_fd=dfd, follow_symlinks=False)
        return True
    except OSError:
        return False
    finally:
        os.close(dfd)


def list_dir(root: Path, rel: str, max_entries: int = MAX_LIST_ENTRIES) -> list[str]:
    """The names in root/rel (a directory reached without links), at most max_entries (E2BIG
    beyond: a phone that made 100k names there gets none of them read)."""
    fd = open_dir(root, rel)
    try:
        with os.scandir(fd) as entries:
            names = []
            for entry in entries:
                names.append(entry.name)
                if len(names) > max_entries:
                    raise OSError(errno.E2BIG, f"more than {max_entries} entries", f"{root}/{rel}")
            return names
    finally:
        os.close(fd)


def replace_text(root: Path, rel: str, text: str, mode: int, owner_uid: int | None = None) -> None:
    """Atomic replace of root/rel: a fresh temporary file (O_EXCL, a random name, so nothing the
    phone made in advance is written through) renamed over it in the same directory; owned by
    owner_uid when given (an answer its asker removes from the sticky shared/ folder)."""
    parent, _, name = rel.strip("/").rpartition("/")
    dfd = open_dir(root, parent)
    try:
        tmp = f".{name}.host.{secrets.token_hex(6)}.tmp"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd
        )
        try:
            os.write(fd, text.encode("utf-8"))
            os.fchmod(fd, mode)
            if owner_uid is not None:
                os.fchown(fd, owner_uid, -1)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    finally:
        os.close(dfd)


def append_text(root: Path, rel: str, text: str, mode: int = 0o644) -> int:
    """Append to root/rel (created if missing); returns the file's size after."""
    fd = open_file(root, rel, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
    try:
        os.write(fd, text.encode("utf-8"))
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def ensure_dir(root: Path, rel: str, mode: int, owner: tuple[int, int] | None) -> None:
    """Make root/rel a directory with `mode` (and `owner` when given), walking below root without
    following links. Whatever else the phone left at rel (a link, a file) is removed first: a link
    there would make the daemon chmod/chown the host directory it names."""
    parent, _, name = rel.strip("/").rpartition("/")
    if name in ("", ".", ".."):
        raise OSError(errno.EINVAL, f"not a directory below {root}", rel)
    dfd = open_dir(root, parent)
    try:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=dfd)
            st = None
        if st is None:
            os.mkdir(name, mode, dir_fd=dfd)
        fd = os.open(name, _DIR_FLAGS, dir_fd=dfd)
    finally:
        os.close(dfd)
    try:
        os.fchmod(fd, mode)
        if owner is not None:
            os.fchown(fd, *owner)
    finally:
        os.close(fd)


def chown_tree(root: Path, rel: str, owner: tuple[int, int]) -> None:
    """Give everything in root/rel (itself included) to `owner`, following no link: the walk goes
    by descriptors (os.fwalk) from a directory reached without links, and links are lchown'ed."""
    try:
        top = open_dir(root, rel)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            return  # nothing to hand back; ensure_dir replaces a link or file
        raise
    try:
        os.fchown(top, *owner)
        for _dirpath, dirnames, filenames, dirfd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            for name in (*dirnames, *filenames):
                os.chown(name, *owner, dir_fd=dirfd, follow_symlinks=False)
    finally:
        os.close(top)
