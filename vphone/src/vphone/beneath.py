"""File access below a tree the phone may change, for the daemon (host root).

The phone's root owns its /sys and cgroup trees, and its shell the control dir /dev/.farm: either
may plant symlinks there, which the daemon would resolve in the HOST's filesystem (a link at
/dev/cpuset/background/effective_cpus to any host file made the daemon rewrite that file). So
every access walks from the tree's root one directory at a time, each opened from the last
one's descriptor with O_NOFOLLOW: a link anywhere below the root, or a directory swapped for one
meanwhile, fails (ELOOP / ENOTDIR) instead of being followed.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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
    """Open root/rel (a file) without following a link anywhere below root."""
    parent, _, name = rel.strip("/").rpartition("/")
    if name in ("", ".", ".."):
        raise OSError(errno.EINVAL, f"not a file below {root}", rel)
    dfd = open_dir(root, parent)
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
    finally:
        os.close(dfd)


def read_text(root: Path, rel: str) -> str:
    with open(open_file(root, rel, os.O_RDONLY), encoding="utf-8", errors="replace") as f:
        return f.read()


def replace_text(root: Path, rel: str, text: str, mode: int) -> None:
    """Atomic replace of root/rel: a fresh temporary file (O_EXCL, a random name, so nothing the
    phone made in advance is written through) renamed over it in the same directory."""
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
