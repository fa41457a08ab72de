"""File access for the sync service (`adb push/pull/ls`), done by the phone's own user.

PhoneFileServer talks to `vphone-exec enter ... --serve-files`, a process inside the phone running
as shell (or root after `adb root`) with the phone's confinement: every path is looked up by the
kernel in the phone's mount namespace with that user's rights, files it creates are that user's,
and open files come back as descriptors (SCM_RIGHTS) that the daemon then reads or writes. No path
of the phone is ever resolved on the host (a symlink swapped in by phone code cannot redirect the
daemon). HostDirFiles does the same on a plain host directory, for test worlds without a sandbox.
Protocol: see the file-service comment in native/vphone-exec.c.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import errno
import os
import socket
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

REQUEST_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 2.0
MAX_PATH_BYTES = 4096
_STAT = struct.Struct("<10Q")
_ERRNO = struct.Struct("<i")


@dataclass(frozen=True)
class FileStat:
    """What sync's STAT/LIST replies carry, with the phone's uid/gid."""

    dev: int
    ino: int
    mode: int
    nlink: int
    uid: int
    gid: int
    size: int
    atime: int
    mtime: int
    ctime: int

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @staticmethod
    def of(st: os.stat_result) -> FileStat:
        return FileStat(
            st.st_dev,
            st.st_ino,
            st.st_mode,
            st.st_nlink,
            st.st_uid,
            st.st_gid,
            st.st_size,
            int(st.st_atime),
            int(st.st_mtime),
            int(st.st_ctime),
        )


class PhoneFiles(Protocol):
    """The file operations sync needs; each raises OSError with the phone's errno."""

    def open_read(self, path: str) -> int: ...
    def create(self, path: str, mode: int) -> int:
        """Replace `path` by a new file with exactly `mode`; a descriptor open for writing."""

    def list_dir(self, path: str) -> list[str]: ...
    def stat(self, path: str, *, follow: bool) -> FileStat: ...
    def mkdir(self, path: str, mode: int) -> None: ...
    def symlink(self, target: str, path: str) -> None: ...
    def unlink(self, path: str) -> None: ...
    def close(self) -> None: ...


def _encode(op: bytes, arg: int, *paths: str) -> bytes:
    raw = [p.encode("utf-8", errors="surrogateescape") for p in paths]
    if any(b"\0" in r or len(r) > MAX_PATH_BYTES for r in raw):
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), paths[-1])
    return op + struct.pack("<I", arg & 0xFFFFFFFF) + b"".join(r + b"\0" for r in raw)


class PhoneFileServer:
    """Client of one file-server process inside a phone; `close` ends it."""

    def __init__(self, sock: socket.socket, process: asyncio.subprocess.Process) -> None:
        self._sock = sock
        self._process = process

    @staticmethod
    async def start(argv: list[str]) -> PhoneFileServer:
        """`argv` ends with `--serve-files`; the socket's descriptor number is appended."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                str(theirs.fileno()),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.settimeout(REQUEST_TIMEOUT_S)
        return PhoneFileServer(ours, process)

    def _call(self, request: bytes, *, want_fd: bool = False) -> tuple[int, bytes]:
        try:
            self._sock.send(request)
            fds = array.array("i")
            data, ancdata, _flags, _addr = self._sock.recvmsg(256, socket.CMSG_SPACE(fds.itemsize))
        except (OSError, TimeoutError) as error:
            raise OSError(errno.EIO, f"the phone's file service failed: {error}") from error
        fd = -1
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
                fd = fds[0]
        if len(data) < _ERRNO.size:
            raise OSError(errno.EIO, "the phone's file service stopped")
        (code,) = _ERRNO.unpack_from(data)
        if code != 0:
            if fd >= 0:
                os.close(fd)
            raise OSError(code, os.strerror(code))
        if want_fd and fd < 0:
            raise OSError(errno.EIO, "the phone's file service sent no descriptor")
        return fd, data[_ERRNO.size :]

    def _path_error(self, error: OSError, path: str) -> OSError:
        return OSError(error.errno, error.strerror, path)

    def open_read(self, path: str) -> int:
        try:
            return self._call(_encode(b"O", 0, path), want_fd=True)[0]
        except OSError as error:
            raise self._path_error(error, path) from None

    def create(self, path: str, mode: int) -> int:
        try:
            return self._call(_encode(b"C", mode, path), want_fd=True)[0]
        except OSError as error:
            raise self._path_error(error, path) from None

    def list_dir(self, path: str) -> list[str]:
        try:
            fd = self._call(_encode(b"D", 0, path), want_fd=True)[0]
        except OSError as error:
            raise self._path_error(error, path) from None
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def stat(self, path: str, *, follow: bool) -> FileStat:
        try:
            _fd, rest = self._call(_encode(b"S" if follow else b"L", 0, path))
        except OSError as error:
            raise self._path_error(error, path) from None
        return FileStat(*_STAT.unpack_from(rest))

    def mkdir(self, path: str, mode: int) -> None:
        try:
            self._call(_encode(b"M", mode, path))
        except OSError as error:
            raise self._path_error(error, path) from None

    def symlink(self, target: str, path: str) -> None:
        try:
            self._call(_encode(b"Y", 0, target, path))
        except OSError as error:
            raise self._path_error(error, path) from None

    def unlink(self, path: str) -> None:
        try:
            self._call(_encode(b"U", 0, path))
        except OSError as error:
            raise self._path_error(error, path) from None

    def close(self) -> None:
        """Closing our end ends the server; a stuck one is killed (it is in its own session).
        shutdown wakes a request waiting on the session's thread (close alone would not)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        if self._process.returncode is None:
            # Without a loop here (a test's thread) it ends on EOF and its own loop reaps it.
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        try:
            await asyncio.wait_for(self._process.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            await self._process.wait()


class HostDirFiles:
    """PhoneFiles on a host directory standing for the phone's `/` (no users, no sandbox)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _host(self, path: str) -> str:
        parts = [p for p in path.split("/") if p and p not in (".", "..")]
        return os.path.join(self.root, *parts)

    def open_read(self, path: str) -> int:
        return os.open(self._host(path), os.O_RDONLY | os.O_CLOEXEC)

    def create(self, path: str, mode: int) -> int:
        host = self._host(path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(host)
        fd = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode & 0o7777)
        os.fchmod(fd, mode & 0o7777)
        return fd

    def list_dir(self, path: str) -> list[str]:
        return sorted(os.listdir(self._host(path)))

    def stat(self, path: str, *, follow: bool) -> FileStat:
        host = self._host(path)
        return FileStat.of(os.stat(host) if follow else os.lstat(host))

    def mkdir(self, path: str, mode: int) -> None:
        os.mkdir(self._host(path), mode)
        os.chmod(self._host(path), mode)

    def symlink(self, target: str, path: str) -> None:
        host = self._host(path)
        if os.path.lexists(host) and not os.path.isdir(host):
            os.unlink(host)
        os.symlink(target, host)

    def unlink(self, path: str) -> None:
        os.unlink(self._host(path))

    def close(self) -> None:
        pass
