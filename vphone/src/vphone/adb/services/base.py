"""What every service gets: the phone's world, a way to restart adbd, and a byte-stream reader."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from vphone.adb.transport import Stream
from vphone.phone_api import PhoneWorld


class PhoneControl(Protocol):
    """The adbd-level actions a service may trigger on its phone."""

    def restart_adbd(self) -> None:
        """Drop every TCP connection shortly (after `adb root` says "restarting...")."""

    def begin_reboot(self) -> None:
        """Drop every connection, go offline while PhoneWorld.reboot() runs, then come back."""


@dataclass(frozen=True)
class ServiceContext:
    world: PhoneWorld
    control: PhoneControl


class ByteReader:
    """Reads a stream as bytes, whatever the WRTE boundaries (packets split or merged)."""

    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self._buffer = bytearray()
        self._start = 0

    def _available(self) -> int:
        return len(self._buffer) - self._start

    async def _fill(self) -> bool:
        chunk = await self._stream.read()
        if not chunk:
            return False
        if self._start:
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += chunk
        return True

    async def read_exactly(self, count: int) -> bytes:
        """`count` bytes, or EOFError when the host closes first."""
        while self._available() < count:
            if not await self._fill():
                raise EOFError
        data = bytes(self._buffer[self._start : self._start + count])
        self._start += count
        return data

    async def read_some(self) -> bytes:
        """Whatever is buffered, or the next chunk; b"" at EOF."""
        if not self._available() and not await self._fill():
            return b""
        data = bytes(self._buffer[self._start :])
        self._buffer.clear()
        self._start = 0
        return data
