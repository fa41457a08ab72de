"""One host connection: handshake, the stream table and per-stream flow control.

Rules (reference section 1.7/1.8): exactly one device WRTE in flight per stream until the host's
OKAY; every host WRTE is answered with OKAY, but only once the service has taken the data, which
is what applies backpressure to a push. The host must obey the same rule: a second WRTE on a
stream before our OKAY ends the connection (so a stream never buffers more than one payload).
CLSE/OKAY/WRTE for unknown ids are ignored, so duplicate CLSEs are harmless; a malformed packet
ends this connection only. Limits against hostile clients: MAX_STREAMS_PER_CONNECTION open streams
(more OPENs are refused with CLSE), and a connection that sends no CNXN within CNXN_TIMEOUT_S is
closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial

from vphone.adb import auth
from vphone.adb import packets as p
from vphone.adb.link import LinkModel, Pacer, cross_inbound

log = logging.getLogger(__name__)

Handler = Callable[["Stream"], Awaitable[None]]
OpenService = Callable[[str], Handler | None]

READ_LIMIT_BYTES = 2 * p.MAX_PAYLOAD_BYTES
CLOSE_TIMEOUT_S = 1.0
CNXN_TIMEOUT_S = 10.0
MAX_STREAMS_PER_CONNECTION = 64
AUTH_FAILURES_BEFORE_DELAY = 256  # adbd's failed_auth_attempts threshold (adb.cpp handle_packet)
AUTH_RETRY_DELAY_S = 1.0
LOGGED_NAME_CHARS = 120  # of a service name in the log: the rest is the client's to choose


class StreamClosed(Exception):
    """The stream (or its connection) is gone; the service should stop."""


class Stream:
    """One ADB stream as a service sees it: read() host bytes, write() device bytes, close()."""

    def __init__(self, connection: Connection, local_id: int, remote_id: int) -> None:
        self._connection = connection
        self.local_id = local_id
        self.remote_id = remote_id
        self._inbox: deque[bytes] = deque()
        self._inbox_ready = asyncio.Event()
        # The host's OPEN counts as its first READY, so one WRTE may follow our OKAY at once.
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._write_lock = asyncio.Lock()
        self.closed = False

    @property
    def max_payload(self) -> int:
        return self._connection.max_payload

    async def read(self) -> bytes:
        """Next chunk the host wrote, acknowledged now; b"" once the stream is closed."""
        while not self._inbox:
            if self.closed:
                return b""
            self._inbox_ready.clear()
            await self._inbox_ready.wait()
        data = self._inbox.popleft()
        if not self.closed:
            self._connection.send(p.A_OKAY, self.local_id, self.remote_id)
        return data

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        """Send `data` as WRTEs of at most max_payload bytes, each after the previous OKAY.

        Concurrent writers are serialised whole, so a shell-v2 packet is never interleaved."""
        view = memoryview(data)
        async with self._write_lock:
            step = self.max_payload
            for offset in range(0, len(view), step):
                while not self._can_write.is_set():
                    if self.closed:
                        raise StreamClosed
                    await self._can_write.wait()
                if self.closed:
                    raise StreamClosed
                self._can_write.clear()
                await self._connection.send_data(self.local_id, self.remote_id, view[offset : offset + step])

    def close(self) -> None:
        """Close from the device side: CLSE without waiting for the last OKAY (allowed)."""
        if self.closed:
            return
        self._mark_closed()
        self._connection.send(p.A_CLSE, self.local_id, self.remote_id)
        self._connection.forget(self)

    # Called by the connection's packet loop.
    def on_write(self, data: bytes) -> None:
        if self._inbox:
            raise p.ProtocolError(f"second WRTE on stream {self.local_id} before our OKAY")
        self._inbox.append(data)
        self._inbox_ready.set()

    def on_okay(self) -> None:
        self._can_write.set()

    def _mark_closed(self) -> None:
        self.closed = True
        self._inbox_ready.set()
        self._can_write.set()

    def on_host_close(self) -> None:
        self._mark_closed()


class Connection:
    """Serves one TCP connection from an adb server until EOF, a protocol error or drop()."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        banner: Callable[[], bytes],
        open_service: OpenService,
        answering: asyncio.Event,
        link: LinkModel | None = None,
        trusted_keys: tuple[auth.AdbKey, ...] | None = None,
        throttle: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._reader = reader
        self._throttle = throttle
        self._writer = writer
        self._link = link
        self._pacer = Pacer(link, self._write_now) if link is not None else None
        self._banner = banner
        self._open_service = open_service
        self._answering = answering
        self.version = p.A_VERSION_MIN
        self.max_payload = p.MAX_PAYLOAD_V1_BYTES
        self._connected = False  # the host's CNXN came
        # ro.adb.secure=1: None means no authentication (eng/userdebug builds, adb_keys ignored).
        self._trusted_keys = trusted_keys
        self._online = False  # CNXN answered: streams may open
        self._token: bytes | None = None
        self.failed_auth_attempts = 0
        self._hold_before_token = False
        self.offered_keys: list[str] = []
        self._streams: dict[int, Stream] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._next_id = 1
        self._closing = False
        self.refused_streams = 0
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    # Sending --------------------------------------------------------------------------------------
    def _write_now(self, data: bytes) -> None:
        if not self._writer.is_closing():
            self._writer.write(data)

    def send(self, command: int, arg0: int, arg1: int, payload: bytes = b"") -> None:
        if self._writer.is_closing():
            return
        packet = p.encode(command, arg0, arg1, payload, version=self.version)
        if self._pacer is not None:
            self._pacer.send(packet)
        else:
            self._writer.write(packet)

    async def send_data(self, local_id: int, remote_id: int, payload: memoryview) -> None:
        if self._writer.is_closing():
            raise StreamClosed
        header = p.encode_header(p.A_WRTE, local_id, remote_id, payload, version=self.version)
        if self._pacer is not None:
            self._pacer.send(header + bytes(payload))
            await self._pacer.sent()
        else:
            self._writer.writelines((header, payload))
        try:
            await self._writer.drain()
        except ConnectionError as error:
            raise StreamClosed from error

    def forget(self, stream: Stream) -> None:
        if self._streams.get(stream.local_id) is stream:
            del self._streams[stream.local_id]

    # Lifecycle --------------------------------------------------------------------------------------
    async def serve(self) -> None:
        try:
            await self._packet_loop()
        except p.ProtocolError as error:
            log.info("%s: dropping connection: %s", self.peer, error)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            await self._teardown()

    def drop(self) -> None:
        """Close TCP now (fault injection, reboot, adbd restart); serve() then tears down."""
        self._closing = True
        self._writer.transport.abort()  # now, even with unsent data queued for a host that stalls
        # Wake a packet loop that is blocked in a read or on the hang gate.
        self._reader.feed_eof()

    async def _teardown(self) -> None:
        self._closing = True
        if self._pacer is not None:
            self._pacer.close()
        self._reset_streams()
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._writer.close()
        try:
            await asyncio.wait_for(self._writer.wait_closed(), CLOSE_TIMEOUT_S)
        except TimeoutError:
            self._writer.transport.abort()  # the host stopped reading: do not wait for the flush
        except (ConnectionError, OSError):
            pass

    def _reset_streams(self) -> None:
        for stream in list(self._streams.values()):
            stream.on_host_close()
        self._streams.clear()
        for task in self._tasks.values():
            task.cancel()

    # Receiving --------------------------------------------------------------------------------------
    async def _packet_loop(self) -> None:
        deadline = asyncio.get_running_loop().time() + CNXN_TIMEOUT_S
        while not self._closing:
            if not self._answering.is_set():
                await self._wait_answering()
                continue
            if self._throttle is not None:
                await self._throttle()  # the phone is over its share of the daemon's CPU: it waits
            if self._connected:
                raw = await self._reader.readexactly(p.HEADER_BYTES)
            else:
                raw = await self._read_before_cnxn(p.HEADER_BYTES, deadline)
            limit = self.max_payload if self._connected else p.MAX_PAYLOAD_BYTES
            header = p.parse_header(raw, max_payload=limit)
            if not header.length:
                payload = b""
            elif self._connected:
                payload = await self._reader.readexactly(header.length)
            else:
                payload = await self._read_before_cnxn(header.length, deadline)
            await cross_inbound(self._link, p.HEADER_BYTES + header.length)
            if not self._answering.is_set():
                await self._wait_answering()  # hung while this packet was on its way: hold it
                if self._closing:
                    return
            self._handle(header, payload)
            if self._hold_before_token:
                self._hold_before_token = False
                await asyncio.sleep(AUTH_RETRY_DELAY_S)
                self._send_token()

    async def _read_before_cnxn(self, count: int, deadline: float) -> bytes:
        remaining = deadline - asyncio.get_running_loop().time()
        try:
            return await asyncio.wait_for(self._reader.readexactly(count), max(remaining, 0.0))
        except TimeoutError:
            raise p.ProtocolError(f"no CNXN within {CNXN_TIMEOUT_S:.0f} s") from None

    async def _wait_answering(self) -> None:
        # A hung phone neither reads nor answers; drop() must still be able to end us, so poll.
        while not self._answering.is_set() and not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._answering.wait(), timeout=0.2)

    def _handle(self, header: p.Header, payload: bytes) -> None:
        command = header.command
        if command == p.A_CNXN:
            self._on_connect(header)
        elif command == p.A_AUTH:
            self._on_auth(header.arg0, payload)
        elif not self._online:
            return  # adbd ignores streams before the transport is online (connected and authorized)
        elif command == p.A_OPEN:
            self._on_open(header.arg0, payload)
        elif command == p.A_WRTE:
            stream = self._streams.get(header.arg1)
            if stream is not None and stream.remote_id == header.arg0:
                stream.on_write(payload)
        elif command == p.A_OKAY:
            stream = self._streams.get(header.arg1)
            if stream is not None and stream.remote_id == header.arg0:
                stream.on_okay()
        elif command == p.A_CLSE:
            stream = self._streams.get(header.arg1)
            if stream is not None and header.arg0 in (0, stream.remote_id):
                del self._streams[header.arg1]
                stream.on_host_close()
                # adbd answers with its own CLSE: local_socket_close shuts its remote peer down
                # first (remote_socket_shutdown sends A_CLSE), and clients such as adb-shell wait
                # for it before the stream counts as closed.
                self.send(p.A_CLSE, stream.local_id, stream.remote_id)
                task = self._tasks.get(stream.local_id)
                if task is not None:
                    task.cancel()

    def _on_connect(self, header: p.Header) -> None:
        if self._connected:
            self._reset_streams()  # a second CNXN restarts the transport, as on adbd
        self.version = min(header.arg0, p.A_VERSION) or p.A_VERSION_MIN
        host_max = header.arg1 if header.arg1 >= p.MAX_PAYLOAD_V1_BYTES else p.MAX_PAYLOAD_V1_BYTES
        self.max_payload = min(host_max, p.MAX_PAYLOAD_BYTES)
        self._connected = True
        if self._trusted_keys is None:
            self._go_online()
        else:
            self._online = False
            self._send_token()

    def _go_online(self) -> None:
        self._online = True
        self._token = None
        self.send(p.A_CNXN, p.A_VERSION, self.max_payload, self._banner())

    def _send_token(self) -> None:
        self._token = auth.new_token()
        self.send(p.A_AUTH, auth.AuthType.TOKEN, 0, self._token)

    def _on_auth(self, kind: int, payload: bytes) -> None:
        """adb.cpp handle_packet's A_AUTH on the device: a signature is checked against every
        trusted key; a miss sends a fresh token; an offered public key would ask the phone's user,
        and nobody answers a virtual phone's dialog, so the host stays `unauthorized`."""
        if self._trusted_keys is None or self._token is None or self._online:
            return  # not asked for, or before CNXN: adbd drops it too
        if kind == auth.AuthType.SIGNATURE:
            key = auth.verify(self._token, payload, self._trusted_keys)
            if key is not None:
                log.info("%s: authorized by key %s", self.peer, key.comment[:LOGGED_NAME_CHARS] or "?")
                self.failed_auth_attempts = 0
                self._go_online()
                return
            # adbd: `if (t->failed_auth_attempts++ > 256) sleep_for(1s)` before the next token,
            # which holds the whole transport: a key cannot be guessed at full speed.
            self._hold_before_token = self.failed_auth_attempts > AUTH_FAILURES_BEFORE_DELAY
            self.failed_auth_attempts += 1
            if not self._hold_before_token:
                self._send_token()
        elif kind == auth.AuthType.RSAPUBLICKEY:
            offered = auth.offered_key(payload)
            self.offered_keys.append(offered)
            comment = offered.partition(" ")[2]
            log.warning(
                "%s: unknown adb key %s offered; a phone would ask its user to allow USB debugging. "
                "Bring the phone up with this host's key (vphone up --adb-key PATH) to trust it",
                self.peer,
                comment[:LOGGED_NAME_CHARS] or "(no comment)",
            )

    def _on_open(self, remote_id: int, payload: bytes) -> None:
        if remote_id == 0:
            return
        name = p.service_name(payload)
        if len(self._streams) >= MAX_STREAMS_PER_CONNECTION:
            self.refused_streams += 1
            log.warning(
                "%s: refusing %r: %d streams already open",
                self.peer,
                name[:LOGGED_NAME_CHARS],
                len(self._streams),
            )
            self.send(p.A_CLSE, 0, remote_id)
            return
        handler = self._open_service(name)
        if handler is None:
            log.info("%s: no service for %r", self.peer, name[:LOGGED_NAME_CHARS])
            self.send(p.A_CLSE, 0, remote_id)
            return
        local_id = self._next_id
        self._next_id = self._next_id % 0x7FFFFFFF + 1
        stream = Stream(self, local_id, remote_id)
        self._streams[local_id] = stream
        self.send(p.A_OKAY, local_id, remote_id)
        task = asyncio.create_task(self._run_service(stream, handler, name))
        self._tasks[local_id] = task
        task.add_done_callback(partial(self._task_done, local_id))

    def _task_done(self, local_id: int, _task: asyncio.Task[None]) -> None:
        self._tasks.pop(local_id, None)

    async def _run_service(self, stream: Stream, handler: Handler, name: str) -> None:
        try:
            await handler(stream)
        except (StreamClosed, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("%s: service %r failed", self.peer, name[:LOGGED_NAME_CHARS])
        finally:
            stream.close()
