"""The transport (stream table, flow control, CNXN rules) over loopback TCP with stub services."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Awaitable

import pytest
from vphone.adb import packets as p
from vphone.adb import transport
from vphone.adb.transport import MAX_STREAMS_PER_CONNECTION, Stream
from vphone.testing.adb_host import TIMEOUT_S, phone


async def chatty(stream: Stream) -> None:
    for chunk in (b"one", b"two", b"three"):
        await stream.write(chunk)


async def echo(stream: Stream) -> None:
    while data := await stream.read():
        await stream.write(data)


def run(coro: Awaitable[None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 20))  # type: ignore[arg-type]


def test_one_wrte_in_flight_until_okay_then_clse() -> None:
    about_to_write_two = asyncio.Event()
    wrote_two = asyncio.Event()

    async def traced(stream: Stream) -> None:
        await stream.write(b"one")
        about_to_write_two.set()
        await stream.write(b"two")
        wrote_two.set()
        await stream.write(b"three")

    async def scenario() -> None:
        async with phone({"chatty:": traced}) as open_host:
            host = await open_host()
            assert (await host.connect()).startswith(b"device::")
            host.send(p.A_OPEN, 5, 0, b"chatty:\0")
            command, local_id, remote_id, _, _ = await host.recv()
            assert (command, remote_id) == (p.A_OKAY, 5) and local_id != 0
            assert (await host.recv())[::3] == (p.A_WRTE, b"one")
            await asyncio.wait_for(about_to_write_two.wait(), TIMEOUT_S)
            for _ in range(20):  # let the service run as far as it can without our OKAY
                await asyncio.sleep(0)
            assert not wrote_two.is_set()  # its second WRTE waits for our OKAY
            host.send(p.A_OKAY, 5, local_id)
            assert (await host.recv())[3] == b"two"
            host.send(p.A_OKAY, 5, local_id)
            assert (await host.recv())[3] == b"three"
            # CLSE may follow the last WRTE without waiting for its OKAY
            assert (await host.recv())[:3] == (p.A_CLSE, local_id, 5)
            host.send(p.A_CLSE, 5, local_id)  # the host echoes it; twice even
            host.send(p.A_CLSE, 5, local_id)
            host.send(p.A_OPEN, 6, 0, b"chatty:\0")
            assert (await host.recv())[0] == p.A_OKAY

    run(scenario())


def test_a_host_clse_is_answered_with_the_devices_clse() -> None:
    """adbd's handle_packet(A_CLSE) closes the local socket, and local_socket_close first calls
    its remote peer's shutdown, remote_socket_shutdown, which sends A_CLSE(local id, remote id)
    (packages/modules/adb/sockets.cpp): adb-shell waits for that CLSE after every sync push."""

    async def scenario() -> None:
        async with phone({"echo:": echo}) as open_host:
            host = await open_host()
            await host.connect()
            host.send(p.A_OPEN, 9, 0, b"echo:\0")
            command, local_id, _remote, _, _ = await host.recv()
            assert command == p.A_OKAY
            host.send(p.A_CLSE, 9, local_id)
            assert (await host.recv())[:3] == (p.A_CLSE, local_id, 9)
            host.send(p.A_OPEN, 10, 0, b"echo:\0")  # and the connection goes on
            assert (await host.recv())[0] == p.A_OKAY

    run(scenario())


def test_host_wrte_is_acknowledged_when_the_service_takes_it() -> None:
    taken: asyncio.Queue[bytes] = asyncio.Queue()
    release = asyncio.Event()

    async def slow(stream: Stream) -> None:
        await release.wait()
        while data := await stream.read():
            await taken.put(data)

    async def scenario() -> None:
        async with phone({"slow:": slow}) as open_host:
            host = await open_host()
            await host.connect()
            host.send(p.A_OPEN, 9, 0, b"slow:\0")
            _, local_id, _, _, _ = await host.recv()
            host.send(p.A_WRTE, 9, local_id, b"data")
            # Packets are handled in order: the OPEN's OKAY comes back only after the WRTE was
            # handled, so an OKAY for the WRTE (sent before the service took it) would come first.
            host.send(p.A_OPEN, 10, 0, b"slow:\0")
            command, _probe_id, remote_id, _, _ = await host.recv()
            assert (command, remote_id) == (p.A_OKAY, 10)  # no OKAY for stream 9: backpressure
            release.set()
            assert (await host.recv())[:3] == (p.A_OKAY, local_id, 9)
            assert await asyncio.wait_for(taken.get(), TIMEOUT_S) == b"data"

    run(scenario())


def test_second_wrte_before_okay_closes_the_connection() -> None:
    async def never_reads(stream: Stream) -> None:
        await asyncio.Event().wait()

    async def scenario() -> None:
        async with phone({"hold:": never_reads}) as open_host:
            host = await open_host()
            await host.connect()
            host.send(p.A_OPEN, 3, 0, b"hold:\0")
            _, local_id, _, _, _ = await host.recv()
            for _ in range(400):  # a flood that ignores flow control: 400 x 64 KiB
                host.send(p.A_WRTE, 3, local_id, bytes(65536))
            with contextlib.suppress(ConnectionError):
                await host.writer.drain()
            # closed after the second WRTE (reset: the flood was still unread)
            with pytest.raises((asyncio.IncompleteReadError, ConnectionResetError)):
                while True:
                    await host.recv()

    run(scenario())


def test_open_beyond_the_stream_cap_is_refused() -> None:
    async def hold(stream: Stream) -> None:
        await asyncio.Event().wait()

    async def scenario() -> None:
        async with phone({"hold:": hold}) as open_host:
            host = await open_host()
            await host.connect()
            for remote in range(1, MAX_STREAMS_PER_CONNECTION + 2):
                host.send(p.A_OPEN, remote, 0, b"hold:\0")
            replies = [await host.recv() for _ in range(MAX_STREAMS_PER_CONNECTION + 1)]
            assert [r[0] for r in replies[:-1]] == [p.A_OKAY] * MAX_STREAMS_PER_CONNECTION
            assert replies[-1][:3] == (p.A_CLSE, 0, MAX_STREAMS_PER_CONNECTION + 1)

    run(scenario())


def test_connection_without_cnxn_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport, "CNXN_TIMEOUT_S", 0.5)

    async def scenario() -> None:
        async with phone({}) as open_host:
            host = await open_host()
            host.send(p.A_OPEN, 1, 0, b"shell:\0")  # ignored: no CNXN yet
            with pytest.raises(asyncio.IncompleteReadError):
                await asyncio.wait_for(host.reader.readexactly(1), TIMEOUT_S)

    run(scenario())


def test_unknown_service_and_unknown_ids() -> None:
    async def scenario() -> None:
        async with phone({"echo:": echo}) as open_host:
            host = await open_host()
            host.send(p.A_OPEN, 1, 0, b"echo:\0")  # before CNXN: ignored
            await host.connect()
            host.send(p.A_OPEN, 3, 0, b"nope:\0")
            assert (await host.recv())[:3] == (p.A_CLSE, 0, 3)
            host.send(p.A_WRTE, 3, 77, b"x")  # unknown ids are ignored
            host.send(p.A_OKAY, 3, 77)
            host.send(p.A_CLSE, 3, 77)
            host.send(p.A_OPEN, 4, 0, b"echo:\0")
            _, local_id, _, _, _ = await host.recv()
            host.send(p.A_WRTE, 4, local_id, b"ping")
            replies = {(await host.recv())[0], (await host.recv())[0]}
            assert replies == {p.A_OKAY, p.A_WRTE}

    run(scenario())


def test_old_version_gets_checksums_and_small_payloads() -> None:
    async def scenario() -> None:
        async with phone({"chatty:": chatty}) as open_host:
            host = await open_host()
            await host.connect(version=p.A_VERSION_MIN, maxdata=4096)
            host.send(p.A_OPEN, 2, 0, b"chatty:\0")
            await host.recv()
            command, _, _, payload, check = await host.recv()
            assert (command, payload, check) == (p.A_WRTE, b"one", sum(b"one"))

    run(scenario())


def test_malformed_packet_closes_only_that_connection() -> None:
    async def scenario() -> None:
        async with phone({"echo:": echo}) as open_host:
            bad, good = await open_host(), await open_host()
            await bad.connect()
            await good.connect()
            bad.writer.write(struct.pack("<6I", p.A_OKAY, 0, 0, 0, 0, 0))  # bad magic
            assert await asyncio.wait_for(bad.reader.read(), TIMEOUT_S) == b""  # EOF
            good.send(p.A_OPEN, 1, 0, b"echo:\0")
            assert (await good.recv())[0] == p.A_OKAY

    run(scenario())


@pytest.mark.parametrize("size", [1, 4096, 100_000])
def test_large_writes_are_split_at_max_payload(size: int) -> None:
    blob = bytes(range(256)) * (size // 256 + 1)
    blob = blob[:size]

    async def big(stream: Stream) -> None:
        await stream.write(blob)

    async def scenario() -> None:
        async with phone({"big:": big}) as open_host:
            host = await open_host()
            await host.connect(maxdata=4096)
            host.send(p.A_OPEN, 1, 0, b"big:\0")
            _, local_id, _, _, _ = await host.recv()
            received = b""
            while len(received) < size:
                command, _, _, payload, _ = await host.recv()
                assert command == p.A_WRTE and len(payload) <= 4096
                received += payload
                host.send(p.A_OKAY, 1, local_id)
            assert received == blob

    run(scenario())
