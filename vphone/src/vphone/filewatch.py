"""Know within a millisecond that a program in the phone wrote one of its control files.

Linux inotify through libc (the stdlib has no binding): /dev/cpuset, the control dir and (where
FUSE cannot serve them, fusenodes.py) the phone's clock nodes are plain files on the host, so a
write by phone code is an IN_CLOSE_WRITE on them. The physics then judges the write as the kernel
would and answers by rewriting the node (read-back) or reverting it; the write itself has
succeeded by then, which is why the clock nodes are served over FUSE where the host allows.
Event-driven, so idle phones cost nothing and a pinned clock takes effect before the next
physics tick. Directory watches report the files written inside them (ctl/ flag files replaced
by rename show as IN_MOVED_TO).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import errno
import os
import struct
from collections.abc import Callable
from pathlib import Path

IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then the name, NUL padded)

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


class FileWatch:
    """One inotify instance. `watch(path)`, then `start(callback)` on a running loop; the callback
    gets the written file's path. `close()` ends it. No I/O in the constructor."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._paths: dict[int, Path] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_write: Callable[[Path], None] | None = None

    def _open(self) -> int:
        if self._fd is None:
            fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd < 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
            self._fd = fd
        return self._fd

    def watch(self, path: Path, mask: int = IN_CLOSE_WRITE) -> None:
        wd = _libc.inotify_add_watch(self._open(), os.fsencode(path), mask)
        if wd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(path))
        self._paths[wd] = path

    def start(self, on_write: Callable[[Path], None]) -> None:
        self._loop = asyncio.get_running_loop()
        fd = self._open()
        self._on_write = on_write
        self._loop.add_reader(fd, self._drain, on_write)

    def settle(self) -> None:
        """Handle the events queued so far now, on the caller's thread (the loop's): whoever
        saw a writer finish knows its events are handled when this returns."""
        if self._fd is not None and self._on_write is not None:
            self._drain(self._on_write)

    def _drain(self, on_write: Callable[[Path], None]) -> None:
        assert self._fd is not None
        written: list[Path] = []
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            offset = 0
            while offset < len(data):
                wd, _mask, _cookie, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                base = self._paths.get(wd)
                if base is not None:
                    path = base / os.fsdecode(name) if name else base
                    if path not in written:
                        written.append(path)
        for path in written:  # one callback per file per wake-up, in order of first write
            on_write(path)

    def close(self) -> None:
        if self._fd is None:
            return
        if self._loop is not None:
            self._loop.remove_reader(self._fd)
            self._loop = None
        self._on_write = None
        os.close(self._fd)
        self._fd = None
        self._paths = {}
