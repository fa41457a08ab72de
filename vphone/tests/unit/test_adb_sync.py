"""The sync service as a byte stream: records split and merged across WRTEs, full-size replies,
SEND/RECV semantics, FAIL ends the service. A tmp dir stands in for the phone's filesystem."""

from __future__ import annotations

import asyncio
import errno
import os
import struct
from pathlib import Path

import pytest
from vphone.adb import packets as p
from vphone.adb.services.base import ServiceContext
from vphone.adb.services.sync import sync_service
from vphone.adb.transport import Stream
from vphone.phonefiles import HostDirFiles
from vphone.testing.adb_host import Host, phone


class DirWorld:
    """Just enough PhoneWorld for sync: phone paths map into `root` (HostDirFiles)."""

    serial = "T1"
    adbd_root = True

    def __init__(self, root: Path) -> None:
        self.root = root

    async def open_files(self) -> HostDirFiles:
        return HostDirFiles(self.root)


def request(kind: bytes, data: bytes) -> bytes:
    return kind + struct.pack("<I", len(data)) + data


async def open_sync(host: Host) -> int:
    await host.connect()
    host.send(p.A_OPEN, 1, 0, b"sync:\0")
    _, local_id, _, _, _ = await host.recv()
    return local_id


class Replies:
    """The device side of the stream as bytes: WRTEs acknowledged, boundaries ignored."""

    def __init__(self, host: Host, local_id: int) -> None:
        self.host = host
        self.local_id = local_id
        self.buffer = b""

    async def take(self, size: int) -> bytes:
        while len(self.buffer) < size:
            command, _, _, payload, _ = await self.host.recv()
            if command == p.A_OKAY:
                continue
            assert command == p.A_WRTE, p.command_name(command)
            self.buffer += payload
            self.host.send(p.A_OKAY, 1, self.local_id)
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    async def write(self, data: bytes) -> None:
        """One WRTE, then wait for the device's OKAY as adb does (one WRTE in flight)."""
        self.host.send(p.A_WRTE, 1, self.local_id, data)
        while True:
            command, _, _, payload, _ = await self.host.recv()
            if command == p.A_OKAY:
                return
            assert command == p.A_WRTE, p.command_name(command)
            self.buffer += payload
            self.host.send(p.A_OKAY, 1, self.local_id)


def run_with(tmp_path: Path, scenario) -> None:  # type: ignore[no-untyped-def]
    world = DirWorld(tmp_path)

    async def handler(stream: Stream) -> None:
        await sync_service(stream, ServiceContext(world=world, control=None))  # type: ignore[arg-type]

    async def main() -> None:
        async with phone({"sync:": handler}) as open_host:
            await scenario(await open_host())

    asyncio.run(asyncio.wait_for(main(), 20))


def test_send_split_across_writes_then_recv_and_stat(tmp_path: Path) -> None:
    blob = os.urandom(200_000)

    async def scenario(host: Host) -> None:
        local_id = await open_sync(host)
        replies = Replies(host, local_id)
        stream = request(b"SEND", b"/data/local/tmp/new/dir/f.bin,33188")
        for offset in range(0, len(blob), 65536):
            chunk = blob[offset : offset + 65536]
            stream += b"DATA" + struct.pack("<I", len(chunk)) + chunk
        stream += b"DONE" + struct.pack("<I", 1_600_000_000)
        # cut at odd places: records straddle WRTEs
        for start in range(0, len(stream), 7777):
            await replies.write(stream[start : start + 7777])
        assert await replies.take(8) == b"OKAY" + bytes(4)

        host.send(
            p.A_WRTE,
            1,
            local_id,
            request(b"STAT", b"/data/local/tmp/new/dir/f.bin")
            + request(b"RECV", b"/data/local/tmp/new/dir/f.bin"),
        )
        stat_reply = await replies.take(16)
        _, mode, size, mtime = struct.unpack("<4sIII", stat_reply)
        assert (mode & 0o777, size, mtime) == (0o644, len(blob), 1_600_000_000)  # as sent
        received = b""
        while True:
            header = await replies.take(8)
            kind, length = struct.unpack("<4sI", header)
            if kind == b"DONE":
                break
            assert kind == b"DATA" and length <= 65536
            received += await replies.take(length)
        assert received == blob

    run_with(tmp_path, scenario)
    assert oct((tmp_path / "data/local/tmp/new").stat().st_mode & 0o777) == oct(0o775)


def test_lis2_and_list_end_with_full_size_done(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("x")

    async def scenario(host: Host) -> None:
        local_id = await open_sync(host)
        replies = Replies(host, local_id)
        host.send(p.A_WRTE, 1, local_id, request(b"LIST", b"/d"))
        names = []
        while True:
            kind, _mode, _size, _mtime, namelen = struct.unpack("<4sIIII", await replies.take(20))
            if kind == b"DONE":
                break
            names.append((await replies.take(namelen)).decode())
        assert sorted(names) == [".", "..", "x"]
        host.send(p.A_WRTE, 1, local_id, request(b"LIS2", b"/d"))
        count = 0
        while True:
            record = await replies.take(76)
            if record[:4] == b"DONE":
                assert record[4:] == bytes(72)
                break
            count += 1
            await replies.take(struct.unpack("<I", record[72:76])[0])
        assert count == 3

    run_with(tmp_path, scenario)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (request(b"STAT", b"/" + b"a" * 1100), b"path too long"),
        (request(b"RECV", b"/missing"), b"open failed: No such file or directory"),
        (request(b"WHAT", b"/"), b"unknown command"),
    ],
)
def test_fail_ends_the_service(tmp_path: Path, payload: bytes, message: bytes) -> None:
    async def scenario(host: Host) -> None:
        local_id = await open_sync(host)
        replies = Replies(host, local_id)
        host.send(p.A_WRTE, 1, local_id, payload)
        kind, length = struct.unpack("<4sI", await replies.take(8))
        assert kind == b"FAIL"
        assert message in await replies.take(length)
        while (reply := await host.recv())[0] == p.A_OKAY:
            pass
        assert reply[0] == p.A_CLSE

    run_with(tmp_path, scenario)


def test_sta2_reports_errno_for_missing_paths(tmp_path: Path) -> None:
    async def scenario(host: Host) -> None:
        local_id = await open_sync(host)
        replies = Replies(host, local_id)
        host.send(p.A_WRTE, 1, local_id, request(b"STA2", b"/nope") + request(b"QUIT", b""))
        reply = await replies.take(72)
        assert reply[:4] == b"STA2" and struct.unpack("<I", reply[4:8])[0] == errno.ENOENT

    run_with(tmp_path, scenario)
