"""Where phones are: an endpoint is one adb server (local now; SSH-tunnelled lab hosts later).

An endpoint lists what its adb server sees and hands out adbutils devices for sessions. Its `host`
is the first half of every device identity `host/serial` (`local` for this machine's server).
"""

from __future__ import annotations

import contextlib
import enum
import os
import socket
import time
from dataclasses import dataclass
from typing import Protocol

import adbutils

from farm.errors import DeviceTransientError, EnvironmentProblem

DEFAULT_ADB_PORT = 5037
LOCAL_HOST = "local"
ADB_SOCKET_TIMEOUT_S = 30.0


class AdbState(enum.StrEnum):
    """What `adb devices` says about a phone (plus `missing`: the server does not list it)."""

    DEVICE = "device"
    OFFLINE = "offline"
    UNAUTHORIZED = "unauthorized"
    MISSING = "missing"
    OTHER = "other"

    @classmethod
    def parse(cls, text: str) -> AdbState:
        try:
            return cls(text)
        except ValueError:
            return cls.OTHER


TRANSPORT_PREFIX = "transport-id:"


@dataclass(frozen=True)
class Listed:
    """One line of `adb devices -l`: the serial adb knows the phone by, its state, and what tells
    two phones with one serial apart (the USB port it is plugged into; the server's transport id)."""

    adb_serial: str
    state: AdbState
    usb: str | None = None
    transport_id: int | None = None


def transport_address(transport_id: int) -> str:
    """How farm addresses a phone by its transport id where its serial names two phones."""
    return f"{TRANSPORT_PREFIX}{transport_id}"


def parse_devices_l(text: str) -> list[Listed]:
    """`host:devices-l` text: `SERIAL STATE [usb:PATH] [product:..] ... [transport_id:N]` (pure)."""
    listed = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        extra = dict(field.split(":", 1) for field in fields[2:] if ":" in field)
        transport = extra.get("transport_id", "")
        listed.append(
            Listed(
                fields[0],
                AdbState.parse(fields[1]),
                usb=extra.get("usb"),
                transport_id=int(transport) if transport.isdigit() else None,
            )
        )
    return listed


class Endpoint(Protocol):
    """What the engine needs of an adb server (LocalAdbEndpoint, farm.fleet.ssh_endpoint.SshAdbEndpoint,
    or a test's own): list its phones, hand out a device for a session, nudge a dropped TCP phone,
    and wait (bounded) until a lost phone is back."""

    @property
    def host(self) -> str: ...

    def list(self) -> list[Listed]: ...

    def device(self, adb_serial: str) -> adbutils.AdbDevice: ...

    def reconnect(self, adb_serial: str) -> None: ...

    def reset_transport(self, adb_serial: str) -> None:
        """Tear the phone's adb transport down and up again (a hung connection is dropped)."""
        ...

    def wait_online(self, adb_serial: str, device_id: str, timeout_s: float, poll_s: float = 0.5) -> None:
        """Return once the phone is listed as `device`; DeviceTransientError after timeout_s."""
        ...


def adb_port_from_env(explicit: int | None = None) -> int:
    if explicit:
        return explicit
    value = os.environ.get("ANDROID_ADB_SERVER_PORT")
    return int(value) if value and value.isdigit() else DEFAULT_ADB_PORT


class LocalAdbEndpoint:
    """The adb server on this machine (port from --adb-port, $ANDROID_ADB_SERVER_PORT or 5037).

    It never starts a server itself: a missing server is an EnvironmentProblem with the fix.
    """

    def __init__(
        self, port: int | None = None, *, host: str = LOCAL_HOST, address: str = "127.0.0.1"
    ) -> None:
        self.port = adb_port_from_env(port)
        self.host = host
        self.address = address
        self._client = adbutils.AdbClient(host=address, port=self.port, socket_timeout=ADB_SOCKET_TIMEOUT_S)

    def check_server(self) -> None:
        try:
            with socket.create_connection((self.address, self.port), timeout=3.0):
                pass
        except OSError as error:
            raise EnvironmentProblem(
                f"no adb server on {self.address}:{self.port} ({error.strerror or error})",
                hint=f"start one with `adb -P {self.port} start-server` or pass --adb-port",
            ) from error

    def list(self) -> list[Listed]:
        self.check_server()
        try:
            conn = self._client.make_connection(timeout=10.0)
            with conn:
                conn.send_command("host:devices-l")
                conn.check_okay()
                text = conn.read_string_block()
        except (adbutils.AdbError, OSError) as error:
            raise EnvironmentProblem(f"adb server {self.address}:{self.port}: {error}") from error
        return parse_devices_l(text)

    def device(self, adb_serial: str) -> adbutils.AdbDevice:
        """The phone of an adb serial, or of `transport-id:N` where one serial names several."""
        if adb_serial.startswith(TRANSPORT_PREFIX):
            return adbutils.AdbDevice(
                self._client, transport_id=int(adb_serial.removeprefix(TRANSPORT_PREFIX))
            )
        return self._client.device(adb_serial)

    def reconnect(self, adb_serial: str) -> None:
        """Ask the server to reconnect a TCP phone (`host:port` serials); others come back by USB."""
        if ":" not in adb_serial:
            return
        with contextlib.suppress(adbutils.AdbError, OSError):
            self._client.connect(adb_serial, timeout=5.0)

    def reset_transport(self, adb_serial: str) -> None:
        """`adb disconnect` + `adb connect` for a TCP phone; `adb -s SERIAL reconnect` for USB.
        Best effort: the ladder judges by whether the phone answers afterwards."""
        with contextlib.suppress(adbutils.AdbError, OSError):
            if ":" in adb_serial:
                self._client.disconnect(adb_serial)
                self._client.connect(adb_serial, timeout=5.0)
            else:
                self._client.device(adb_serial).open_transport("reconnect", timeout=5.0).close()

    def state_of(self, adb_serial: str) -> AdbState:
        for item in self.list():
            by_transport = (
                item.transport_id is not None and transport_address(item.transport_id) == adb_serial
            )
            if item.adb_serial == adb_serial or by_transport:
                return item.state
        return AdbState.MISSING

    def wait_online(self, adb_serial: str, device_id: str, timeout_s: float, poll_s: float = 0.5) -> None:
        """Wait until the phone is back as `device`, nudging TCP phones to reconnect."""
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.state_of(adb_serial)
            if state is AdbState.DEVICE:
                return
            if time.monotonic() >= deadline:
                raise DeviceTransientError(device_id, f"still {state} after {timeout_s:.0f} s")
            if state in (AdbState.MISSING, AdbState.OFFLINE):
                self.reconnect(adb_serial)
            time.sleep(poll_s)
