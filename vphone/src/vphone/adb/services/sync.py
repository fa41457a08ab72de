"""`sync:` file transfer: STAT, STA2, LST2, LIST, LIS2, SEND, RECV, QUIT (reference 2.5).

Requests are parsed as a byte stream (adb 29 packs SEND+DATA+DONE into one WRTE and splits DATA
across WRTEs). Every reply is a full-size record. A FAIL ends the service, like adbd. Files are
reached through the world's PhoneFiles (a file server inside the phone, as adbd's user), which
checks permissions, owns what it creates and hands back descriptors; no phone path is resolved
here.

Every file operation runs on the session's own thread, never on the daemon's event loop, which
serves every phone: a RECV of a FIFO the phone made waits for its writer there (as adbd's
service thread would), and a LIST of 100k names takes its time there, while the other streams
and phones go on. A read waits at most POLL_S at a time, so a session that ended is not kept
alive by a FIFO nobody writes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import functools
import os
import select
import stat
import struct
from collections.abc import Callable
from typing import TypeVar

from vphone import daemoncpu
from vphone.adb.services.base import ByteReader, ServiceContext
from vphone.adb.transport import Stream
from vphone.phonefiles import FileStat, PhoneFiles

MAX_PATH_BYTES = 1024
SYNC_DATA_MAX_BYTES = 64 * 1024
DIR_MODE = 0o775
POLL_S = 1.0
T = TypeVar("T")

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


def stat_v1(st: FileStat | None) -> bytes:
    if st is None:
        return STAT_V1.pack(b"STAT", 0, 0, 0)
    return STAT_V1.pack(b"STAT", _u32(st.mode), _u32(st.size), _u32(st.mtime))


def _v2_fields(st: FileStat) -> tuple[int, ...]:
    return (
        st.dev,
        st.ino,
        _u32(st.mode),
        _u32(st.nlink),
        _u32(st.uid),
        _u32(st.gid),
        st.size,
        st.atime,
        st.mtime,
        st.ctime,
    )


def stat_v2(reply_id: bytes, st: FileStat | None, error: int = 0) -> bytes:
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
    """adbd keeps the permission bits the host sent (mode & 0777): 0644 stays 0644."""
    return mode & 0o777


def _join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name if directory.rstrip("/") else "/" + name


class SyncSession:
    def __init__(self, stream: Stream, files: PhoneFiles, worker: concurrent.futures.Executor) -> None:
        self._stream = stream
        self._files = files
        self._reader = ByteReader(stream)
        self._worker = worker
        self.ended = False  # set when the session is over: a waiting read gives up

    async def _io(self, call: Callable[..., T], *args: object, **kwargs: object) -> T:
        """call(*args) on the session's thread (file work never blocks the event loop)."""
        loop = asyncio.get_running_loop()
        work = functools.partial(call, *args, **kwargs)
        # The thread's CPU is the phone's too (the executor does not carry the task's context).
        charged = functools.partial(daemoncpu.charge_thread, daemoncpu.current(), work)
        return await loop.run_in_executor(self._worker, charged)

    def _close(self, fd: int) -> None:
        """Close fd on the session's thread, after the read or write it may be in the middle of
        (a task cancelled meanwhile): closed here, the number could be reused by another file
        before that read or write ends."""
        self._worker.submit(os.close, fd)

    def _read_chunk(self, fd: int) -> bytes:
        """Up to a DATA record's bytes from fd, waiting for them (a FIFO) until the session ends."""
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while not self.ended:
            if poller.poll(POLL_S * 1000):
                return os.read(fd, SYNC_DATA_MAX_BYTES)
        raise OSError(errno.EINTR, "the sync session ended")

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

    async def _handle(self, request: bytes, path: str) -> None:
        if request == b"STAT":
            await self._stream.write(stat_v1(await self._io(self._stat, path, follow=False)))
        elif request in (b"STA2", b"LST2"):
            try:
                st = await self._io(self._files.stat, path, follow=request == b"STA2")
                await self._stream.write(stat_v2(request, st))
            except OSError as error:
                await self._stream.write(stat_v2(request, None, error.errno or errno.EIO))
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

    def _stat(self, path: str, *, follow: bool) -> FileStat | None:
        try:
            return self._files.stat(path, follow=follow)
        except OSError:
            return None

    def _mkdirs(self, path: str) -> None:
        """mkdir -p of `path`'s parents (0775), as adbd's user; existing ones are fine."""
        parts = [part for part in path.split("/") if part]
        for depth in range(1, len(parts)):
            try:
                self._files.mkdir("/" + "/".join(parts[:depth]), DIR_MODE)
            except FileExistsError:
                continue
            except PermissionError:
                continue  # exists but is not ours to create in (like /data for shell): try on

    def _entries(self, path: str) -> list[tuple[str, FileStat | None, int]]:
        try:
            names = [".", "..", *self._files.list_dir(path)]
        except OSError:
            return []
        entries: list[tuple[str, FileStat | None, int]] = []
        for name in names:
            try:
                entries.append((name, self._files.stat(_join(path, name), follow=False), 0))
            except OSError as error:
                entries.append((name, None, error.errno or errno.EIO))
        return entries

    async def _list_v1(self, path: str) -> None:
        out = bytearray()
        for name, st, _error in await self._io(self._entries, path):
            if st is None:
                continue  # adbd skips entries it cannot lstat
            raw = name.encode("utf-8", errors="surrogateescape")
            out += DENT_V1.pack(b"DENT", _u32(st.mode), _u32(st.size), _u32(st.mtime), len(raw))
            out += raw
        out += DENT_V1.pack(b"DONE", 0, 0, 0, 0)
        await self._stream.write(out)

    async def _list_v2(self, path: str) -> None:
        out = bytearray()
        for name, st, error in await self._io(self._entries, path):
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

    async def _give_up(self, message: str, error: OSError) -> None:
        await self._fail(f"{message}: {os.strerror(error.errno or errno.EIO)}")
        await self._discard_until_done()
        raise SyncEnded from error

    async def _send(self, spec: str) -> None:
        path, comma, mode_text = spec.rpartition(",")
        if not comma:
            path, mode_text = spec, "0644"
        try:
            mode = parse_mode(mode_text)
        except ValueError:
            mode = 0o100644
        if stat.S_ISLNK(mode):
            await self._send_symlink(path)
        else:
            await self._send_file(path, file_mode(mode))
        await self._stream.write(REQUEST.pack(b"OKAY", 0))

    async def _send_symlink(self, path: str) -> None:
        chunks, _mtime = await self._read_data_records()
        target = b"".join(chunks or []).rstrip(b"\0").decode("utf-8", errors="surrogateescape")
        try:
            await self._io(self._symlink, target, path)
        except OSError as error:
            raise SyncFailed(f"symlink failed: {os.strerror(error.errno or errno.EIO)}") from error

    def _symlink(self, target: str, path: str) -> None:
        try:
            self._files.symlink(target, path)
        except FileNotFoundError:
            self._mkdirs(path)
            self._files.symlink(target, path)

    def _create(self, path: str, mode: int) -> int:
        try:
            return self._files.create(path, mode)
        except FileNotFoundError:
            self._mkdirs(path)
            return self._files.create(path, mode)

    async def _send_file(self, path: str, mode: int) -> None:
        try:
            fd = await self._io(self._create, path, mode)
        except (FileNotFoundError, NotADirectoryError) as error:
            await self._give_up("secure_mkdirs failed", error)
            return
        except OSError as error:
            await self._give_up("couldn't create file", error)
            return
        complete = False
        try:
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
                await self._io(_write_all, fd, await self._reader.read_exactly(value))
        except OSError as error:
            raise SyncFailed(f"write failed: {os.strerror(error.errno or errno.EIO)}") from error
        finally:
            self._close(fd)
            if not complete:
                with contextlib.suppress(OSError):
                    await self._io(self._files.unlink, path)

    async def _recv(self, path: str) -> None:
        try:
            fd = await self._io(self._files.open_read, path)
        except OSError as error:
            raise SyncFailed(f"open failed: {os.strerror(error.errno or errno.EIO)}") from error
        try:
            batch_limit = max(self._stream.max_payload, SYNC_DATA_MAX_BYTES + REQUEST.size)
            batch = bytearray()
            while True:
                try:
                    data = await self._io(self._read_chunk, fd)
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
            self._close(fd)


async def sync_service(stream: Stream, ctx: ServiceContext) -> None:
    try:
        files = await ctx.world.open_files()
    except OSError as error:
        data = f"the phone's files are not reachable: {error}".encode()
        await stream.write(REQUEST.pack(b"FAIL", len(data)) + data)
        return
    worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sync")
    session = SyncSession(stream, files, worker)
    try:
        await session.run()
    finally:
        session.ended = True
        files.close()
        worker.shutdown(wait=False)  # what is queued (a close) still runs


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
