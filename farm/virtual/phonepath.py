"""Phone paths -> host paths for the sync service, with the phone's errors for its user.

Paths go through /proc/<init>/root (the phone's own mount namespace, so every bind and read-only
mount is the phone's), but symlinks are resolved by hand: through /proc/PID/root an absolute link
target would otherwise be looked up on the host. Mode bits are checked for shell (uid/gid 2000)
because the daemon itself runs as host root.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def resolve_phone_path(
    init_pid: int, phone_path: str, *, for_write: bool, ids: tuple[int, int] | None
) -> Path:
    """Host path of `phone_path`; `ids` = (uid, gid) to check permissions for, None for root.
    Raises OSError(ENOENT/EACCES/EROFS/ENOTDIR/ELOOP) like the phone would."""
    if not phone_path.startswith("/"):
        raise OSError(errno.ENOENT, "not an absolute path", phone_path)
    base = f"/proc/{init_pid}/root"
    parts = _canonical(Path(base), phone_path)
    _check_access(Path(base), parts, for_write=for_write, ids=ids)
    return Path(base, *parts) if parts else Path(base + "/")


def _canonical(base: Path, phone_path: str) -> list[str]:
    """Resolve `..` and symlinks by hand: through /proc/PID/root an absolute link target would
    otherwise be looked up on the host."""
    todo = [p for p in phone_path.split("/") if p and p != "."]
    done: list[str] = []
    hops = 0
    while todo:
        name = todo.pop(0)
        if name == "..":
            if done:
                done.pop()
            continue
        host = Path(base, *done, name)
        if host.is_symlink():
            hops += 1
            if hops > 40:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), phone_path)
            target = os.readlink(host)
            if target.startswith("/"):
                done = []
            todo = [p for p in target.split("/") if p and p != "."] + todo
            continue
        done.append(name)
    return done


def _allowed(st: os.stat_result, ids: tuple[int, int] | None, want: int) -> bool:
    """Mode-bit check for uid/gid `ids` (None: root, which only needs x somewhere for exec)."""
    if ids is None:
        return True
    uid, gid = ids
    if st.st_uid == uid:
        bits = (st.st_mode >> 6) & 7
    elif st.st_gid == gid:
        bits = (st.st_mode >> 3) & 7
    else:
        bits = st.st_mode & 7
    return bits & want == want


def _check_access(base: Path, parts: list[str], *, for_write: bool, ids: tuple[int, int] | None) -> None:
    cur = base
    phone = ""
    for i, name in enumerate(parts):
        st = os.stat(cur)
        if not stat.S_ISDIR(st.st_mode):
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), phone or "/")
        if not _allowed(st, ids, 1):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), phone or "/")
        nxt = cur / name
        phone = f"{phone}/{name}"
        last = i == len(parts) - 1
        try:
            nst = os.stat(nxt)
        except FileNotFoundError:
            if last and for_write:
                if os.statvfs(cur).f_flag & os.ST_RDONLY:
                    raise OSError(errno.EROFS, os.strerror(errno.EROFS), phone) from None
                if not _allowed(st, ids, 3):
                    raise OSError(errno.EACCES, os.strerror(errno.EACCES), phone) from None
                return
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), phone) from None
        if last:
            if for_write and not stat.S_ISDIR(nst.st_mode):
                if os.statvfs(nxt).f_flag & os.ST_RDONLY:
                    raise OSError(errno.EROFS, os.strerror(errno.EROFS), phone)
                if not _allowed(nst, ids, 2):
                    raise OSError(errno.EACCES, os.strerror(errno.EACCES), phone)
            elif for_write and os.statvfs(nxt).f_flag & os.ST_RDONLY:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), phone)
            elif not for_write and not _allowed(nst, ids, 5 if stat.S_ISDIR(nst.st_mode) else 4):
                raise OSError(errno.EACCES, os.strerror(errno.EACCES), phone)
        cur = nxt
    if not parts and for_write:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), "/")
