"""A stub adb-server host and a stub phone over loopback TCP, for the transport's tests."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from vphone.adb import packets as p
from vphone.adb.auth import AdbKey
from vphone.adb.transport import Connection, Handler

HOST_BANNER = b"host::features=shell_v2\0"
TIMEOUT_S = 2.0


class Host:
    """The adb-server side of one connection, packet by packet."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def send(self, command: int, arg0: int, arg1: int, payload: bytes = b"") -> None:
        self.writer.write(p.encode(command, arg0, arg1, payload))

    async def recv(self) -> tuple[int, int, int, bytes, int]:
        raw = await asyncio.wait_for(self.reader.readexactly(24), TIMEOUT_S)
        command, arg0, arg1, length, check, _magic = struct.unpack("<6I", raw)
        payload = await asyncio.wait_for(self.reader.readexactly(length), TIMEOUT_S) if length else b""
        return command, arg0, arg1, payload, check

    async def connect(self, version: int = p.A_VERSION, maxdata: int = p.MAX_PAYLOAD_BYTES) -> bytes:
        self.send(p.A_CNXN, version, maxdata, HOST_BANNER)
        command, arg0, arg1, payload, _ = await self.recv()
        assert (command, arg0, arg1) == (p.A_CNXN, p.A_VERSION, min(maxdata, p.MAX_PAYLOAD_BYTES))
        return payload


@asynccontextmanager
async def phone(
    services: dict[str, Handler], trusted_keys: tuple[AdbKey, ...] | None = None
) -> AsyncIterator[Callable[[], Awaitable[Host]]]:
    answering = asyncio.Event()
    answering.set()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(
            reader,
            writer,
            banner=lambda: b"device::features=shell_v2",
            open_service=services.get,
            answering=answering,
            trusted_keys=trusted_keys,
        )
        await connection.serve()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    hosts: list[Host] = []

    async def open_host() -> Host:
        host = Host(*await asyncio.open_connection("127.0.0.1", port))
        hosts.append(host)
        return host

    try:
        yield open_host
    finally:
        for host in hosts:
            host.writer.close()
        server.close()
