"""ADB packet framing: the 24-byte header, command constants and the checksum rule.

Pure: no sockets here. See shared/reference/adb-and-telemetry.md section 1.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

A_SYNC = 0x434E5953
A_CNXN = 0x4E584E43
A_AUTH = 0x48545541
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_CLSE = 0x45534C43
A_WRTE = 0x45545257
A_STLS = 0x534C5453

# Commands a host may send us; anything else (including SYNC and STLS) ends the connection.
HOST_COMMANDS = frozenset({A_CNXN, A_AUTH, A_OPEN, A_OKAY, A_CLSE, A_WRTE})

A_VERSION_MIN = 0x01000000
A_VERSION_SKIP_CHECKSUM = 0x01000001
A_VERSION = A_VERSION_SKIP_CHECKSUM

MAX_PAYLOAD_V1_BYTES = 4096
MAX_PAYLOAD_BYTES = 1 << 20

HEADER = struct.Struct("<6I")
HEADER_BYTES = HEADER.size

DEVICE_FEATURES = ("shell_v2", "cmd", "stat_v2", "ls_v2", "fixed_push_mkdir", "fixed_push_symlink_timestamp")


class ProtocolError(Exception):
    """The peer broke framing (bad magic, oversize payload, unknown command): drop the connection."""


@dataclass(frozen=True, slots=True)
class Header:
    command: int
    arg0: int
    arg1: int
    length: int


def command_name(command: int) -> str:
    raw = command.to_bytes(4, "little")
    return raw.decode("ascii") if raw.isascii() and raw.isalpha() else f"0x{command:08x}"


def byte_sum(payload: bytes | bytearray | memoryview) -> int:
    """The 'crc32' field of old protocol versions: the unsigned byte sum mod 2**32."""
    return sum(memoryview(payload).cast("B")) & 0xFFFFFFFF


def encode_header(command: int, arg0: int, arg1: int, payload: bytes | memoryview, *, version: int) -> bytes:
    """Header for `payload`; the checksum is filled in only for peers older than skip-checksum."""
    check = byte_sum(payload) if version < A_VERSION_SKIP_CHECKSUM and len(payload) else 0
    return HEADER.pack(command, arg0, arg1, len(payload), check, command ^ 0xFFFFFFFF)


def encode(command: int, arg0: int, arg1: int, payload: bytes = b"", *, version: int = A_VERSION) -> bytes:
    return encode_header(command, arg0, arg1, payload, version=version) + payload


def parse_header(raw: bytes, *, max_payload: int) -> Header:
    """Validate a received header. The checksum is deliberately ignored (adbd does the same)."""
    command, arg0, arg1, length, _check, magic = HEADER.unpack(raw)
    if magic != command ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad magic 0x{magic:08x} for command {command_name(command)}")
    if command not in HOST_COMMANDS:
        raise ProtocolError(f"unknown command {command_name(command)}")
    if length > max_payload:
        raise ProtocolError(f"payload of {length} bytes exceeds the maximum of {max_payload}")
    return Header(command, arg0, arg1, length)


def device_banner(props: dict[str, str], features: tuple[str, ...] = DEVICE_FEATURES) -> bytes:
    """`device::ro.product.name=..;ro.product.model=..;ro.product.device=..;features=..`.

    The host splits on ':', ';' and '=', so those characters are replaced in values."""

    def clean(value: str) -> str:
        return value.translate(str.maketrans(":;=", "___"))

    fields = [
        f"{key}={clean(props.get(key, ''))}"
        for key in ("ro.product.name", "ro.product.model", "ro.product.device")
    ]
    fields.append("features=" + ",".join(features))
    banner = ("device::" + ";".join(fields)).encode()
    return banner[:MAX_PAYLOAD_V1_BYTES]


def service_name(payload: bytes) -> str:
    """The OPEN payload without its trailing NULs (adb 29 sends one)."""
    return payload.rstrip(b"\0").decode("utf-8", errors="replace")
