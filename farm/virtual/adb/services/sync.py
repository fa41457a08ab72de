"""`sync:` file transfer: STAT, STA2, LST2, LIST, LIS2, SEND, RECV, QUIT (reference 2.5).

Requests are parsed as a byte stream (adb 29 packs SEND+DATA+DONE into one WRTE and splits DATA
across WRTEs). Every reply is a full-size record. A FAIL ends the service, like adbd.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
from collections.abc import Callable
from pathlib import Path

from farm.virtual.adb.services.base import ByteReader, ServiceContext
from farm.virtual.adb.transport import Stream

MAX_PATH_BYTES = 1024
SYNC_DATA_MAX_BYTES = 64 * 1024
DIR_MODE = 0o775

REQUEST = struct.Struct("<4sI")
STAT_V1 = struct.Struct("<4sIII")
STAT_V2 = struct.Struct("<4sIQQIIIIQqqq")
DENT_V1 = struct.Struct("<4sIIII")
DENT_V2 = struct.Struct("<4sIQQIIIIQqqqI")


class SyncFailed(Exception):
    """Send FAIL with this message and end the service."""


class SyncEnded(Exception):
    """FAIL was already sent (and the request's data drained): end the service quietly."""


def _u32(value: int) -> int:
    return value & 0xFFFFFFFF


def stat_v1(st: os.stat_result | None) -> bytes:
    if st is None:
        return STAT_V1.pack(b"STAT", 0, 0, 0)
    return STAT_V1.pack(b"STAT", _u32(st.st_mode), _u32(st.st_size), _u32(int(st.st_mtime)))


def _v2_fields(st: os.stat_result) -> tuple[int, ...]:
    return (
        st.st_dev,
        st.st_ino,
        _u32(st.st_mode),
        _u32(st.st_nlink),
        _u32(st.st_uid),
        _u32(st.st_gid),
        st.st_size,
        int(st.st_atime),
        int(st.st_mtime),
        int(st.st_ctime),
    )


def stat_v2(reply_id: bytes, st: os.stat_result | None, error: int = 0) -> bytes:
    if st is None:
        return STAT_V2.pack(reply_id, _u32(error), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    return STAT_V2.pack(reply_id, 0, *_v2_fields(st))


def parse_mode(text: str) -> int:
    """strtoul(text, 0) as adbd parses the SEND mode: 0x.. hex, 0.. octal, else decimal."""
    text = text.strip()
    if text.lower().startswith("0x"):
        return int(text, 16)
    if text.startswith("0") and len(text) > 1:
        return int(text, 8)
    return int(text or "0", 10)


def file_mode(mode: int) -> int:
    """adbd keeps mode & 0777 and copies the user bits into group and other."""
    user = mode & 0o700
    return user | (user >> 3) | (user >> 6)


class SyncSession:
    def __init__(self, stream: Stream, ctx: ServiceContext) -> None:
        self._stream = stream
        self._world = ctx.world
        self._reader = ByteReader(stream)
        self._owner: Callable[[], tuple[int, int] | None] | None = getattr(ctx.world, "sync_owner", None)

    async def run(self) -> None:
        try:
            while True:
                try:
                    request, length = REQUEST.unpack(await self._reader.read_exactly(REQUEST.size))
                except EOFError:
                    return  # CLSE without QUIT is normal
                if request == b"QUIT":
                    return
                if length > MAX_PATH_BYTES:
                    raise SyncFailed("path too long")
                path = (await self._reader.read_exactly(length)).decode("utf-8", errors="surrogateescape")
                await self._handle(request, path)
        except SyncFailed as failure:
            await self._fail(str(failure))
        except (SyncEnded, EOFError):
            return

    async def _fail(self, message: str) -> None:
        data = message.encode()
        await self._stream.write(REQUEST.pack(b"FAIL", len(data)) + data)

    def _resolve(self, path: str, *, for_write: bool) -> Path:
        return self._world.resolve(path, for_write=for_write)

    async def _handle(self, request: bytes, path: str) -> None:
        if request == b"STAT":
            await self._stream.write(stat_v1(self._lstat(path)))
        elif request in (b"STA2", b"LST2"):
            await self._stream.write(self._stat_v2(request, path))
        elif request == b"LIST":
            await self._list_v1(path)
        elif request == b"LIS2":
            await self._list_v2(path)
        elif request == b"SEND":
            await self._send(path)
        elif request == b"RECV":
            await self._recv(path)
        else:
            raise SyncFailed(f"unknown command {int.from_bytes(request, 'little'):08x}")

    def _owner_for(self, host: Path) -> tuple[int, int] | None:
        """Who owns what we create: the world says (PhoneWorld.sync_owner), else, for worlds
        without it, adbd as shell inherits the owner of the directory it writes into."""
        if self._owner is not None:
            return self._owner()
        if self._world.adbd_root or os.geteuid() != 0:
            return None
        try:
            parent = os.stat(host.parent)
        except OSError:
            return None
        return parent.st_uid, parent.st_gid

    def _chown(self, host: Path) -> None:
        owner = self._owner_for(host)
        if owner is not None:
            os.lchown(host, *owner)

    def _resolve_creating_parents(self, path: str) -> Path:
        """Host path for writing `path`, creating missing parent directories (0775) on the way,
        each checked by the world as the phone would (mkdir -p as adbd's user)."""
        try:
            host = self._resolve(path, for_write=True)
            if host.parent.is_dir():
                return host
        except FileNotFoundError:
            pass
        parts = [part for part in path.split("/") if part]
        for depth in range(1, len(parts)):
            ancestor = "/" + "/".join(parts[:depth])
            try:
                if self._resolve(ancestor, for_write=False).exists():
                    continue
            except PermissionError:
                continue  # exists, but only traversable for adbd's user (like /data for shell)
            except FileNotFoundError:
                pass
            directory = self._resolve(ancestor, for_write=True)
            os.mkdir(directory, DIR_MODE)
            os.chmod(directory, DIR_MODE)
            self._chown(directory)
        return self._resolve(path, for_write=True)

    def _lstat(self, path: str) -> os.stat_result | None:
        try:
            return os.lstat(self._resolve(path, for_write=False))
        except OSError:
            return None

    def _stat_v2(self, request: bytes, path: str) -> bytes:
        try:
            host = self._resolve(path, for_write=False)
            st = os.stat(host) if request == b"STA2" else os.lstat(host)
        except OSError as error:
            return stat_v2(request, None, error.errno or errno.EIO)
        return stat_v2(request, st)

    def _entries(self, path: str) -> list[tuple[str, os.stat_result | None, int]]:
        try:
            host = self._resolve(path, for_write=False)
            names = [".", "..", *sorted(os.listdir(host))]
        except OSError:
            return []
        entries: list[tuple[str, os.stat_result | None, int]] = []
        for name in names:
            try:
                entries.append((name, os.lstat(os.path.join(host, name)), 0))
            except OSError as error:
                entries.append((name, None, error.errno or errno.EIO))
        return entries

    async def _list_v1(self, path: str) -> None:
        out = bytearray()
        for name, st, _error in self._entries(path):
            if st is None:
                continue  # adbd skips entries it cannot lstat
            raw = name.encode("utf-8", errors="surrogateescape")
            out += DENT_V1.pack(b"DENT", _u32(st.st_mode), _u32(st.st_size), _u32(int(st.st_mtime)), len(raw))
            out += raw
        out += DENT_V1.pack(b"DONE", 0, 0, 0, 0)
        await self._stream.write(out)

    async def _list_v2(self, path: str) -> None:
        out = bytearray()
        for name, st, error in self._entries(path):
            raw = name.encode("utf-8", errors="surrogateescape")
            if st is None:
                out += DENT_V2.pack(b"DNT2", _u32(error), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, len(raw))
            else:
                out += DENT_V2.pack(b"DNT2", 0, *_v2_fields(st), len(raw))
            out += raw
        out += DENT_V2.pack(b"DONE", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        await self._stream.write(out)

    async def _read_data_records(self) -> tuple[list[bytes] | None, int]:
        """For symlinks: all DATA payloads then the DONE mtime."""
        chunks: list[bytes] = []
        while True:
            record, value = REQUEST.unpack(await self._reader.read_exactly(REQUEST.size))
            if record == b"DONE":
                return chunks, value
            if record != b"DATA":
                raise SyncFailed("invalid data message")
            if value > SYNC_DATA_MAX_BYTES:
                raise SyncFailed("oversize data message")
            chunks.append(await self._reader.read_exactly(value))

    async def _discard_until_done(self) -> None:
        with contextlib.suppress(SyncFailed):
            await self._read_data_records()

    async def _send(self, spec: str) -> None:
        path, comma, mode_text = spec.rpartition(",")
        if not comma:
            path, mode_text = spec, "0644"
        try:
            mode = parse_mode(mode_text)
        except ValueError:
            mode = 0o100644
        try:
            host = self._resolve_creating_parents(path)
        except OSError as error:
            await self._fail(f"secure_mkdirs failed: {os.strerror(error.errno or errno.EIO)}")
            await self._discard_until_done()
            raise SyncEnded from error
        if stat.S_ISLNK(mode):
            await self._send_symlink(host)
        else:
            await self._send_file(host, file_mode(mode))
        await self._stream.write(REQUEST.pack(b"OKAY", 0))

    async def _send_symlink(self, host: Path) -> None:
        chunks, _mtime = await self._read_data_records()
        target = b"".join(chunks or []).rstrip(b"\0")
        try:
            with contextlib.suppress(FileNotFoundError):
                if not host.is_dir() or host.is_symlink():
                    host.unlink()
            os.symlink(target, host)
            self._chown(host)
        except OSError as error:
            raise SyncFailed(f"symlink failed: {os.strerror(error.errno or errno.EIO)}") from error

    async def _send_file(self, host: Path, mode: int) -> None:
        try:
            if host.is_symlink() or host.is_file():
                host.unlink()
            fd = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        except OSError as error:
            await self._fail(f"couldn't create file: {os.strerror(error.errno or errno.EIO)}")
            await self._discard_until_done()
            raise SyncEnded from error
        complete = False
        try:
            os.fchmod(fd, mode)
            owner = self._owner_for(host)
            if owner is not None:
                os.fchown(fd, *owner)
            while True:
                record, value = REQUEST.unpack(await self._reader.read_exactly(REQUEST.size))
                if record == b"DONE":
                    os.utime(fd, (value, value))
                    complete = True
                    return
                if record != b"DATA":
                    raise SyncFailed("invalid data message")
                if value > SYNC_DATA_MAX_BYTES:
                    raise SyncFailed("oversize data message")
                data = memoryview(await self._reader.read_exactly(value))
                while data:
                    data = data[os.write(fd, data) :]
        except OSError as error:
            raise SyncFailed(f"write failed: {os.strerror(error.errno or errno.EIO)}") from error
        finally:
            os.close(fd)
            if not complete:
                with contextlib.suppress(OSError):
                    host.unlink()

    async def _recv(self, path: str) -> None:
        try:
            host = self._resolve(path, for_write=False)
            fd = os.open(host, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as error:
            raise SyncFailed(f"open failed: {os.strerror(error.errno or errno.EIO)}") from error
        try:
            batch_limit = max(self._stream.max_payload, SYNC_DATA_MAX_BYTES + REQUEST.size)
            batch = bytearray()
            while True:
                try:
                    data = os.read(fd, SYNC_DATA_MAX_BYTES)
                except OSError as error:
                    raise SyncFailed(f"read failed: {os.strerror(error.errno or errno.EIO)}") from error
                if not data:
                    break
                batch += REQUEST.pack(b"DATA", len(data))
                batch += data
                if len(batch) >= batch_limit - (SYNC_DATA_MAX_BYTES + REQUEST.size):
                    await self._stream.write(batch)
                    batch = bytearray()
            batch += REQUEST.pack(b"DONE", 0)
            await self._stream.write(batch)
        finally:
            os.close(fd)


async def sync_service(stream: Stream, ctx: ServiceContext) -> None:
    await SyncSession(stream, ctx).run()
