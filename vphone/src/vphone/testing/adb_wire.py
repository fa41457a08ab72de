"""A blocking adb-server side of one raw TCP connection to a virtual phone, packet by packet.

For tests that must do what no well-behaved client does (floods, flow-control violations,
fuzzing): `WireHost.connect(port)` sends CNXN and returns once the phone's banner came back. A
phone with ro.adb.secure=1 asks for a key first: connect() signs its token with this host's adb
key (the one the phones trust by default), or with `key`.

    with WireHost.connect(phone.port) as host:
        local_id = host.open(7, "shell:sleep 30")   # None when the phone refused the stream
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa, utils

from vphone.adb import auth
from vphone.adb import packets as p

HOST_BANNER = b"host::features=shell_v2\0"
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Packet:
    command: int
    arg0: int
    arg1: int
    payload: bytes


def sign_token(key: rsa.RSAPrivateKey, token: bytes) -> bytes:
    """What an adb host sends back for an AUTH token: PKCS#1 v1.5, the token taken as a SHA-1."""
    return key.sign(token, padding.PKCS1v15(), utils.Prehashed(hashes.SHA1()))


def load_adb_key(path: Path) -> rsa.RSAPrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey), path
    return key


def host_adb_key_path() -> Path:
    """The adb server's own private key file (~/.android/adbkey, made on its first start)."""
    return Path(os.environ.get("ANDROID_USER_HOME", Path.home() / ".android")) / "adbkey"


def host_adb_key() -> rsa.RSAPrivateKey:
    return load_adb_key(host_adb_key_path())


class WireHost:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    @staticmethod
    def connect(port: int, *, banner: bool = True, key: rsa.RSAPrivateKey | None = None) -> WireHost:
        host = WireHost(socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S))
        host.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if banner:
            host.send(p.A_CNXN, p.A_VERSION, p.MAX_PAYLOAD_BYTES, HOST_BANNER)
            reply = host.recv()
            if reply is not None and reply.command == p.A_AUTH and reply.arg0 == auth.AuthType.TOKEN:
                signature = sign_token(key or host_adb_key(), reply.payload)
                host.send(p.A_AUTH, auth.AuthType.SIGNATURE, 0, signature)
                reply = host.recv()
            if reply is None or reply.command != p.A_CNXN:
                host.close()
                raise ConnectionError(f"no CNXN from the phone on port {port}: {reply}")
        return host

    def __enter__(self) -> WireHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, command: int, arg0: int, arg1: int, payload: bytes = b"") -> None:
        self.sock.sendall(p.encode(command, arg0, arg1, payload))

    def _read_exactly(self, count: int) -> bytes | None:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def recv(self, timeout_s: float = TIMEOUT_S) -> Packet | None:
        """The next packet; None once the phone closed the connection."""
        self.sock.settimeout(timeout_s)
        try:
            header = self._read_exactly(24)
            if header is None:
                return None
            command, arg0, arg1, length, _check, _magic = struct.unpack("<6I", header)
            payload = self._read_exactly(length) if length else b""
        except ConnectionResetError:
            return None
        return None if payload is None else Packet(command, arg0, arg1, payload)

    def open(self, remote_id: int, service: str) -> int | None:
        """OPEN `service`; the phone's local id on OKAY, None when it answered CLSE (refused)."""
        self.send(p.A_OPEN, remote_id, 0, service.encode() + b"\0")
        while (packet := self.recv()) is not None:
            if packet.arg1 == remote_id and packet.command == p.A_OKAY:
                return packet.arg0
            if packet.arg1 == remote_id and packet.command == p.A_CLSE:
                return None
        raise ConnectionError(f"the phone closed the connection on OPEN {service!r}")

    def closed_by_phone(self, timeout_s: float = TIMEOUT_S) -> bool:
        """Whether the phone ends the connection within timeout_s (packets before that are skipped)."""
        try:
            while self.recv(timeout_s) is not None:
                pass
        except TimeoutError:
            return False
        return True
