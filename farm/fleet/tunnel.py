"""A local port forwarded over SSH to a lab host's adb server, kept up with reconnects.

    with SshTunnel(target, policy, adb_port=5037) as tunnel:
        adbutils.AdbClient("127.0.0.1", tunnel.local_port)   # talks to the lab host's adb server

The local listening port is bound once in `open()` and stays the same across reconnects, so adb
clients built on it keep working after the host comes back. Every accepted local connection
becomes one `direct-tcpip` channel to 127.0.0.1:adb_port as the lab host sees it, pumped by one
thread. While the SSH connection is down, local connections are accepted and closed at once, so
adb calls fail fast (and the fleet marks the host's phones offline) instead of hanging.

A supervisor thread checks the connection every keepalive period by opening a channel (an
answered open, even "connect refused" from a stopped adb server, proves SSH is alive); a
connection that does not answer is dropped and re-established with exponential backoff.
"""

from __future__ import annotations

import contextlib
import enum
import select
import shlex
import socket
import threading
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import paramiko

from farm.errors import FarmError, HostError
from farm.fleet.hostkeys import HostKeyPolicy
from farm.fleet.powercycle import CommandResult
from farm.fleet.ssh import SshTarget, connect

BACKOFF_START_S = 0.5
BACKOFF_MAX_S = 10.0
CHANNEL_OPEN_TIMEOUT_S = 10.0
PUMP_CHUNK_BYTES = 64 * 1024
ADB_VERSION_TIMEOUT_S = 5.0
ADB_START_TIMEOUT_S = 30.0


class AdbServerRefused(HostError):
    """SSH is up but nothing accepts connections on the host's adb port."""


class TunnelState(enum.StrEnum):
    CONNECTING = "connecting"
    UP = "up"
    DOWN = "down"
    CLOSED = "closed"


def adb_version_over(channel: paramiko.Channel, timeout_s: float = ADB_VERSION_TIMEOUT_S) -> int:
    """Ask an adb server `host:version` on an open channel; the protocol version number."""
    channel.settimeout(timeout_s)
    request = b"host:version"
    channel.sendall(b"%04x" % len(request) + request)
    reply = _read_exact(channel, 4)
    if reply != b"OKAY":
        raise OSError(f"adb server answered {reply!r} to host:version")
    length = int(_read_exact(channel, 4), 16)
    return int(_read_exact(channel, length), 16)


def _read_exact(channel: paramiko.Channel, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = channel.recv(count - len(data))
        if not chunk:
            raise OSError("adb server closed the connection")
        data += chunk
    return data


class SshTunnel:
    """Local port -> SSH -> the lab host's adb server; reconnects until closed."""

    def __init__(
        self,
        target: SshTarget,
        policy: HostKeyPolicy,
        *,
        adb_port: int,
        keepalive_s: float = 5.0,
        connect_timeout_s: float = 10.0,
        start_adb: bool = False,
    ) -> None:
        self.target = target
        self.policy = policy
        self.adb_port = adb_port
        self.keepalive_s = keepalive_s
        self.connect_timeout_s = connect_timeout_s
        self.start_adb = start_adb
        self.adb_started = False
        self._state = TunnelState.CLOSED
        self.last_error: FarmError | None = None
        self.local_port = 0
        self.reconnects = 0
        self._transport: paramiko.Transport | None = None
        self._listener: socket.socket | None = None
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._threads: list[threading.Thread] = []

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def is_up(self) -> bool:
        transport = self._transport
        return self._state is TunnelState.UP and transport is not None and transport.is_active()

    @property
    def state(self) -> TunnelState:
        """UP only while the SSH transport is really alive (it can die between supervisor checks)."""
        if self._state is TunnelState.UP and not self.is_up:
            return TunnelState.DOWN
        return self._state

    # -- lifecycle ------------------------------------------------------------------------------

    def open(self) -> SshTunnel:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        listener.settimeout(0.5)
        self._listener = listener
        self.local_port = listener.getsockname()[1]
        self._stop.clear()
        self._set_state(TunnelState.CONNECTING)
        for target, label in ((self._supervise, "ssh"), (self._accept_loop, "accept")):
            thread = threading.Thread(target=target, name=f"tunnel-{label}-{self.name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def close(self) -> None:
        self._stop.set()
        if self._listener is not None:
            self._listener.close()
        self._drop()
        for thread in self._threads:
            thread.join(timeout=5.0)
        self._threads.clear()
        self._set_state(TunnelState.CLOSED)

    def __enter__(self) -> SshTunnel:
        return self.open()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def wait_settled(self, timeout_s: float) -> TunnelState:
        """Wait until the first connection attempt has ended (up or down)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self.state is TunnelState.CONNECTING and time.monotonic() < deadline:
                self._changed.wait(max(0.0, deadline - time.monotonic()))
            return self.state

    def wait_up(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self.is_up and time.monotonic() < deadline and not self._stop.is_set():
                self._changed.wait(min(0.5, max(0.0, deadline - time.monotonic())))
            return self.is_up

    # -- health ---------------------------------------------------------------------------------

    def open_channel(self, timeout_s: float = CHANNEL_OPEN_TIMEOUT_S) -> paramiko.Channel:
        """A channel to the lab host's adb server; HostError when SSH is down or adb refuses."""
        transport = self._transport
        if transport is None or not transport.is_active():
            raise self.down_error()
        try:
            return transport.open_channel(
                "direct-tcpip", ("127.0.0.1", self.adb_port), ("127.0.0.1", 0), timeout=timeout_s
            )
        except paramiko.ChannelException as error:
            raise AdbServerRefused(
                self.name,
                f"adb server on 127.0.0.1:{self.adb_port} of the host refused ({error.text})",
                retryable=True,
                hint=f"start it on the host: `adb -P {self.adb_port} start-server`",
            ) from None
        except (paramiko.SSHException, OSError, EOFError) as error:
            raise HostError(self.name, f"SSH channel failed ({error})", retryable=True) from None

    def adb_round_trip_s(self) -> tuple[int, float]:
        """adb server protocol version and the round trip of one `host:version` through the tunnel."""
        started = time.perf_counter()
        channel = self.open_channel()
        try:
            version = adb_version_over(channel)
        except (OSError, paramiko.SSHException) as error:
            raise HostError(self.name, f"adb server did not answer ({error})", retryable=True) from None
        finally:
            channel.close()
        return version, time.perf_counter() - started

    def run(self, argv: Sequence[str], timeout_s: float) -> CommandResult:
        """Run a command on the lab host over this SSH connection (a power-cycle line), its words
        quoted for the remote shell; bounded by timeout_s (the channel is closed then)."""
        shown = shlex.join(argv)
        transport = self._transport
        if transport is None or not transport.is_active():
            raise self.down_error()
        started = time.monotonic()
        output = b""
        try:
            session = transport.open_session(timeout=CHANNEL_OPEN_TIMEOUT_S)
            with contextlib.closing(session):
                session.set_combine_stderr(True)
                session.exec_command(shown)
                deadline = started + timeout_s
                while not session.exit_status_ready() or session.recv_ready():
                    if time.monotonic() > deadline:
                        text = output.decode(errors="replace") + f"\n(stopped after {timeout_s:g} s)"
                        return CommandResult(shown, None, text, time.monotonic() - started)
                    if session.recv_ready():
                        output += session.recv(PUMP_CHUNK_BYTES)
                    else:
                        time.sleep(0.05)
                code = session.recv_exit_status()
        except (paramiko.SSHException, OSError, EOFError) as error:
            raise HostError(
                self.name, f"power-cycle command failed over SSH ({error})", retryable=True
            ) from None
        return CommandResult(shown, code, output.decode(errors="replace"), time.monotonic() - started)

    def down_error(self) -> HostError:
        if self.last_error is not None:
            reason = self.last_error.message.removeprefix(f"{self.name}: ")
            return HostError(self.name, f"not connected: {reason}", retryable=True, hint=self.last_error.hint)
        return HostError(self.name, f"not connected ({self.state})", retryable=True)

    # -- threads --------------------------------------------------------------------------------

    def _set_state(self, state: TunnelState) -> None:
        with self._changed:
            self._state = state
            self._changed.notify_all()

    def _drop(self) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()

    def _supervise(self) -> None:
        backoff_s = BACKOFF_START_S
        while not self._stop.is_set():
            if not self.is_up:
                self._drop()
                try:
                    transport = connect(
                        self.target,
                        self.policy,
                        keepalive_s=self.keepalive_s,
                        timeout_s=self.connect_timeout_s,
                    )
                except FarmError as error:
                    self.last_error = error
                    self._set_state(TunnelState.DOWN)
                    self._stop.wait(backoff_s)
                    backoff_s = min(BACKOFF_MAX_S, backoff_s * 2)
                    continue
                if self._stop.is_set():
                    transport.close()
                    return
                if self.state is TunnelState.DOWN:
                    self.reconnects += 1
                self._transport = transport
                self.last_error = None
                backoff_s = BACKOFF_START_S
                if self.start_adb:
                    self._ensure_adb_server(transport)
                self._set_state(TunnelState.UP)
            if self._stop.wait(self.keepalive_s):
                return
            self._probe()

    def _ensure_adb_server(self, transport: paramiko.Transport) -> None:
        """Start the host's adb server over SSH when nothing answers on its port (start_adb: true).

        Only here, on connect, and only when configured: a client that starts servers behind the
        user's back is hidden I/O. A failure is left to the adb step of `farm hosts check`.
        """
        try:
            transport.open_channel(
                "direct-tcpip", ("127.0.0.1", self.adb_port), ("127.0.0.1", 0), timeout=CHANNEL_OPEN_TIMEOUT_S
            ).close()
            return
        except paramiko.ChannelException:
            pass  # refused: no server there yet
        except (paramiko.SSHException, OSError, EOFError):
            return
        try:
            session = transport.open_session(timeout=CHANNEL_OPEN_TIMEOUT_S)
            session.settimeout(ADB_START_TIMEOUT_S)
            session.exec_command(f"adb -P {int(self.adb_port)} start-server")
            session.recv_exit_status()
            self.adb_started = session.exit_status == 0
            session.close()
        except (paramiko.SSHException, OSError, EOFError):
            return

    def _probe(self) -> None:
        """Drop a connection that no longer answers (keepalive writes alone do not notice that)."""
        try:
            self.open_channel(timeout_s=max(2.0, self.keepalive_s)).close()
        except AdbServerRefused:
            return  # SSH answered; only the adb server is down
        except HostError as error:
            self.last_error = error
            self._drop()
            self._set_state(TunnelState.DOWN)

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # listener closed
            thread = threading.Thread(
                target=self._serve, args=(client,), name=f"tunnel-pump-{self.name}", daemon=True
            )
            thread.start()

    def _serve(self, client: socket.socket) -> None:
        try:
            channel = self.open_channel()
        except HostError:
            client.close()  # the adb client sees the connection closed: the host is unreachable
            return
        _pump(client, channel, self._stop)


def _pump(client: socket.socket, channel: paramiko.Channel, stop: threading.Event) -> None:
    """Copy bytes both ways until either side closes (adb connections are one request each)."""
    client.setblocking(True)
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while not stop.is_set():
            watched: list[Any] = [client, channel]
            readable, _, _ = select.select(watched, [], [], 1.0)
            if client in readable:
                data = client.recv(PUMP_CHUNK_BYTES)
                if not data:
                    break
                channel.sendall(data)
            if channel in readable:
                data = channel.recv(PUMP_CHUNK_BYTES)
                if not data:
                    break
                client.sendall(data)
            if channel.closed or (channel.eof_received and not channel.recv_ready()):
                break
    except (OSError, paramiko.SSHException, EOFError):
        pass
    finally:
        channel.close()
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_RDWR)
        client.close()
