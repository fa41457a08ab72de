"""One virtual phone on a TCP port: its listener, its connections and its online state.

Fault injection (vphone.faults) and the reboot/restart services act through this
object: drop connections, refuse them for a while, stop answering (hang), reboot.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import socket
from collections.abc import Callable
from functools import partial

from vphone import daemoncpu
from vphone.adb import dispatch, packets
from vphone.adb.auth import AdbKey
from vphone.adb.link import LinkModel
from vphone.adb.services.base import ServiceContext
from vphone.adb.transport import READ_LIMIT_BYTES, Connection
from vphone.phone_api import PhoneWorld

log = logging.getLogger(__name__)

REBOOT_OFFLINE_S = 3.0
# adb keeps one connection per phone and server; a few servers (tests, tools) may share a phone.
MAX_CONNECTIONS = 16
RESTART_DELAY_S = 0.2
STOP_TIMEOUT_S = 5.0


class PhoneState(enum.StrEnum):
    STOPPED = "stopped"
    ONLINE = "online"
    OFFLINE = "offline"  # connections refused / dropped
    HUNG = "hung"  # connections accepted but nothing is read or answered
    REBOOTING = "rebooting"


class PhoneServer:
    """Serves the ADB device protocol for one PhoneWorld on an already-bound listening socket."""

    def __init__(
        self,
        world: PhoneWorld,
        listener: socket.socket,
        profile: str,
        on_state: Callable[[PhoneServer], None] | None = None,
        link: LinkModel | None = None,
        trusted_keys: tuple[AdbKey, ...] = (),
        cpu_share_cores: float = daemoncpu.DAEMON_CORES,
    ) -> None:
        self.world = world
        # What the daemon spends on this phone, charged to it (vphone.daemoncpu).
        self.cpu = daemoncpu.CpuAccount(world.serial, cpu_share_cores)
        # The cable's model: the daemon's --link, else the world's own (its profile's `link:`).
        self.link: LinkModel | None = link if link is not None else getattr(world, "link", None)
        self.profile = profile
        # The phone's adb_keys: asked for only where the profile has ro.adb.secure=1, as adbd does.
        secure = bool(getattr(world, "adb_secure", False))
        self.trusted_keys: tuple[AdbKey, ...] | None = trusted_keys if secure else None
        self._listener = listener
        self.port: int = listener.getsockname()[1]
        self.on_state = on_state
        self.state = PhoneState.STOPPED
        self._answering = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()
        self._connection_tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.Task[None] | None = None
        self._context = ServiceContext(world=world, control=self)

    @property
    def serial(self) -> str:
        return self.world.serial

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def _set_state(self, state: PhoneState) -> None:
        self.state = state
        if state is PhoneState.HUNG:
            self._answering.clear()
        else:
            self._answering.set()
        if self.on_state is not None:
            self.on_state(self)

    def _banner(self) -> bytes:
        return packets.device_banner(self.world.banner_props())

    # Lifecycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        # Optional world hook: `reboot` run inside the phone must drop adb like `adb reboot`.
        set_reboot_handler = getattr(self.world, "set_reboot_handler", None)
        if set_reboot_handler is not None:
            set_reboot_handler(self.begin_reboot)
        # The world's tasks (its physics) run as this phone's work: the daemon's CPU is charged.
        await daemoncpu.create_task(self.cpu, self.world.start())
        self._server = await asyncio.start_server(self._accept, sock=self._listener, limit=READ_LIMIT_BYTES)
        self._set_state(PhoneState.ONLINE)

    async def stop(self) -> None:
        self._cancel_timer()
        if self._server is not None:
            self._server.close()
        self.drop_connections()
        if self._connection_tasks:
            _done, pending = await asyncio.wait(list(self._connection_tasks), timeout=STOP_TIMEOUT_S)
            for task in pending:
                stack = task.get_stack()
                log.warning("%s: connection still open after %.0f s: %s", self.serial, STOP_TIMEOUT_S, stack)
        await self.world.stop()
        self._set_state(PhoneState.STOPPED)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A host connected: served as this phone's work (its CPU charged, vphone.daemoncpu)."""
        await daemoncpu.create_task(self.cpu, self._serve(reader, writer))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.state in (PhoneState.OFFLINE, PhoneState.REBOOTING, PhoneState.STOPPED):
            writer.close()
            return
        if len(self._connections) >= MAX_CONNECTIONS:
            log.warning("%s: refusing a connection: %d already open", self.serial, len(self._connections))
            writer.close()
            return
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # Small packets (OKAY, CLSE) must not wait for the host's delayed ACK: without this a
            # round trip costs ~40 ms (asyncio sets it only for sockets created with IPPROTO_TCP).
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = Connection(
            reader,
            writer,
            banner=self._banner,
            open_service=partial(dispatch.open_service, self._context),
            answering=self._answering,
            link=self.link,
            trusted_keys=self.trusted_keys,
            throttle=self.cpu.pay,
        )
        self._connections.add(connection)
        task = asyncio.current_task()
        if task is not None:
            self._connection_tasks.add(task)
        try:
            await connection.serve()
        finally:
            self._connections.discard(connection)
            if task is not None:
                self._connection_tasks.discard(task)

    # Faults and adbd restarts ----------------------------------------------------------------------
    def drop_connections(self) -> None:
        for connection in list(self._connections):
            connection.drop()

    def _cancel_timer(self) -> None:
        if self._timer is not None and not self._timer.done():
            self._timer.cancel()
        self._timer = None

    def _after(self, delay_s: float, action: Callable[[], None]) -> None:
        async def later() -> None:
            await asyncio.sleep(delay_s)
            action()

        self._timer = asyncio.get_running_loop().create_task(later())

    def recover(self) -> None:
        """Back online now (ends a hang or an offline period)."""
        self._cancel_timer()
        if self.state is not PhoneState.STOPPED:
            self._set_state(PhoneState.ONLINE)

    def go_offline(self, seconds: float) -> None:
        self._cancel_timer()
        self._set_state(PhoneState.OFFLINE)
        self.drop_connections()
        self._after(seconds, self.recover)

    def hang(self, seconds: float | None) -> None:
        self._cancel_timer()
        self._set_state(PhoneState.HUNG)
        if seconds is not None:
            self._after(seconds, self.recover)

    def restart_adbd(self) -> None:
        asyncio.get_running_loop().call_later(RESTART_DELAY_S, self.drop_connections)

    def begin_reboot(self) -> None:
        self._cancel_timer()
        # The phone's work whoever asked (its shell, or a fault from the control socket): the
        # physics it starts again is charged to it and lowers its quota (vphone.daemoncpu).
        self._timer = daemoncpu.create_task(self.cpu, self._reboot())

    async def _reboot(self) -> None:
        await asyncio.sleep(RESTART_DELAY_S)  # let the reboot stream's OKAY reach the host
        self._set_state(PhoneState.REBOOTING)
        self.drop_connections()
        try:
            await asyncio.gather(self.world.reboot(), asyncio.sleep(REBOOT_OFFLINE_S))
        except Exception:
            log.exception("%s: reboot failed", self.serial)
        self._set_state(PhoneState.ONLINE)

    async def close_listener(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
