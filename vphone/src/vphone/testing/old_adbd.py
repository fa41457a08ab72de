"""An old adbd in front of a virtual phone: a TCP proxy that speaks for a device without shell v2.

Between the host's adb server and a virtual phone it forwards every ADB packet unchanged, except:
the device's CNXN banner loses `shell_v2` from its features, and an OPEN of a `shell,v2` service is
refused the way adbd refuses an unknown service (CLSE with no local id). So the adb server and
farm's DeviceSession negotiate with a phone that really lacks shell v2 (Android before 7.0), with
no flag set on the session. `services` records what the host asked for, in order.

    with OldAdbd(phone.port) as old:
        adb("connect", old.serial)   # then use old.serial as any adb serial
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

from vphone.adb.packets import A_CLSE, A_CNXN, A_OPEN, HEADER, HEADER_BYTES, encode, service_name


def _read_packet(sock: socket.socket) -> tuple[tuple[int, ...], bytes] | None:
    header = _read_exact(sock, HEADER_BYTES)
    if header is None:
        return None
    fields = HEADER.unpack(header)
    payload = _read_exact(sock, fields[3]) if fields[3] else b""
    return (fields, payload) if payload is not None else None


def _read_exact(sock: socket.socket, count: int) -> bytes | None:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def without_shell_v2(banner: bytes) -> bytes:
    """A device banner `device::k=v;...;features=a,b,...` without the shell_v2 feature."""
    text = banner.rstrip(b"\0").decode()
    parts = []
    for part in text.split(";"):
        if part.startswith("features="):
            kept = [f for f in part.removeprefix("features=").split(",") if f != "shell_v2"]
            part = "features=" + ",".join(kept)
        parts.append(part)
    return ";".join(parts).encode()


class OldAdbd:
    def __init__(self, phone_port: int) -> None:
        self.phone_port = phone_port
        self.services: list[str] = []
        self.refused: list[str] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []

    @property
    def serial(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> OldAdbd:
        self._spawn(self._accept)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        for sock in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(timeout=10)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                host, _ = self._listener.accept()
            except OSError:
                return
            device = socket.create_connection(("127.0.0.1", self.phone_port))
            self._sockets += [host, device]
            lock = threading.Lock()  # both directions may write to the host socket
            self._spawn(self._host_to_device, host, device, lock)
            self._spawn(self._device_to_host, device, host, lock)

    def _host_to_device(self, host: socket.socket, device: socket.socket, lock: threading.Lock) -> None:
        with contextlib.suppress(OSError):
            while (packet := _read_packet(host)) is not None:
                (command, arg0, *_rest), payload = packet
                if command == A_OPEN:
                    service = service_name(payload)
                    self.services.append(service)
                    if service.startswith("shell,v2"):
                        self.refused.append(service)
                        with lock:
                            host.sendall(encode(A_CLSE, 0, arg0))
                        continue
                device.sendall(HEADER.pack(*packet[0]) + payload)
        with contextlib.suppress(OSError):
            device.shutdown(socket.SHUT_RDWR)

    def _device_to_host(self, device: socket.socket, host: socket.socket, lock: threading.Lock) -> None:
        with contextlib.suppress(OSError):
            while (packet := _read_packet(device)) is not None:
                fields, payload = packet
                if fields[0] == A_CNXN:
                    raw = encode(A_CNXN, fields[1], fields[2], without_shell_v2(payload), version=fields[1])
                else:
                    raw = HEADER.pack(*fields) + payload
                with lock:
                    host.sendall(raw)
        with contextlib.suppress(OSError):
            host.shutdown(socket.SHUT_RDWR)
