"""One shell conversation with a phone: a program's stdout read line by line (or by byte count) as
it comes, and lines written to its stdin, over one adb stream (one round trip however long it runs).

Shell v2 frames both directions (id byte + u32 LE length: 0 stdin, 1 stdout, 2 stderr, 3 exit,
4 close-stdin); on a phone whose adbd has no v2 the stream is raw: stdout and stderr merged, stdin
as bytes, no exit code (the program's own last line has to say how it ended).

Timeouts are per read, not per conversation: a run may last an hour, but a phone that says
nothing for `idle_timeout_s` (the program prints heartbeats) is hung or gone, and raises
DeviceTransientError (retry may help) within that time.

    with session.stream(["sh", script, *params]) as conversation:
        line = conversation.read_line()      # b"..." without the newline; None at the end
        conversation.send_line("go")
        data = conversation.read_exact(size)
        conversation.copy_to(size, handle)   # a large file, written as it comes

A line longer than LINE_MAX_BYTES raises OutputTooLarge: the run script's lines are short, and a
phone that never sends a newline must not fill the host's memory.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from types import TracebackType
from typing import BinaryIO

from farm.errors import DeviceTransientError, OutputTooLarge

ID_STDIN = 0
ID_STDOUT = 1
ID_STDERR = 2
ID_EXIT = 3
ID_CLOSE_STDIN = 4
STDERR_KEPT_BYTES = 8192  # what a conversation keeps of the program's stderr, for error messages
LINE_MAX_BYTES = 1 << 20  # the longest stdout line read_line takes
# adbd's shell v2 packets are at most its MAX_PAYLOAD (1 MiB); a longer length field is a phone
# making the host buffer what it announces.
PACKET_MAX_BYTES = 1 << 20


def packet_length(device_id: str, header: bytes | bytearray) -> int:
    """The payload length of a shell v2 packet header (id + u32 LE), bounded by PACKET_MAX_BYTES."""
    length = int.from_bytes(header[1:5], "little")
    if length > PACKET_MAX_BYTES:
        raise OutputTooLarge(device_id, f"the phone announced a {length}-byte shell packet")
    return length


def pack(packet_id: int, data: bytes = b"") -> bytes:
    """One shell v2 packet (pure)."""
    return bytes([packet_id]) + len(data).to_bytes(4, "little") + data


class ShellStream:
    """A program on the phone and its open stdin/stdout. Built by DeviceSession.stream (which
    counts the round trip); closing it hangs the program up (adbd closes its pipes)."""

    def __init__(
        self,
        sock: socket.socket,
        device_id: str,
        *,
        idle_timeout_s: float,
        framed: bool,
        closer: Callable[[], None] | None = None,
    ) -> None:
        self._sock = sock
        self.device_id = device_id
        self.idle_timeout_s = idle_timeout_s
        self.framed = framed
        self._closer = closer or sock.close
        self._raw = bytearray()  # received, not yet unframed
        self._out = bytearray()  # stdout, not yet read
        self._stderr = bytearray()
        self.exit_code: int | None = None
        self._ended = False  # the program's output is over (exit packet, or EOF when raw)
        self._closed = False

    # -- writing ------------------------------------------------------------------------------

    def send_line(self, text: str) -> None:
        """One line to the program's stdin (a newline is added)."""
        data = (text + "\n").encode()
        self._send(pack(ID_STDIN, data) if self.framed else data)

    def close_stdin(self) -> None:
        """EOF on the program's stdin (shell v2 only; a raw stream keeps it open)."""
        if self.framed:
            self._send(pack(ID_CLOSE_STDIN))

    def _send(self, data: bytes) -> None:
        try:
            self._sock.settimeout(self.idle_timeout_s)
            self._sock.sendall(data)
        except OSError as error:
            raise DeviceTransientError(self.device_id, f"shell stream write failed: {error}") from error

    # -- reading ------------------------------------------------------------------------------

    def read_line(self) -> bytes | None:
        """The next stdout line without its newline; None once the program's output is over (a
        last line without a newline is returned first)."""
        while True:
            end = self._out.find(b"\n")
            if end >= 0:
                line = bytes(self._out[:end])
                del self._out[: end + 1]
                return line
            if len(self._out) > LINE_MAX_BYTES:
                raise OutputTooLarge(
                    self.device_id, f"the phone sent a line longer than {LINE_MAX_BYTES} bytes"
                )
            if self._ended:
                if self._out:
                    line = bytes(self._out)
                    self._out.clear()
                    return line
                return None
            self._fill()

    def read_exact(self, size: int) -> bytes:
        """Exactly `size` bytes of stdout; DeviceTransientError when the output ends first."""
        while len(self._out) < size:
            if self._ended:
                raise DeviceTransientError(
                    self.device_id, f"shell stream ended {size - len(self._out)} bytes short"
                )
            self._fill()
        data = bytes(self._out[:size])
        del self._out[:size]
        return data

    def copy_to(self, size: int, sink: BinaryIO) -> None:
        """Exactly `size` bytes of stdout written to sink as they come (never all held at once);
        DeviceTransientError when the output ends first."""
        left = size
        while left > 0:
            if not self._out:
                if self._ended:
                    raise DeviceTransientError(self.device_id, f"shell stream ended {left} bytes short")
                self._fill()
                continue
            take = min(left, len(self._out))
            sink.write(self._out[:take])
            del self._out[:take]
            left -= take

    def wait_exit(self) -> int | None:
        """Read to the end; the exit code (None on a raw stream)."""
        while not self._ended:
            self._fill()
        self._out.clear()
        return self.exit_code

    @property
    def stderr(self) -> str:
        """What the program wrote on stderr so far (its tail)."""
        return self._stderr.decode("utf-8", "replace")

    def _fill(self) -> None:
        """Wait (at most idle_timeout_s) for the phone's next bytes and unframe them."""
        try:
            self._sock.settimeout(self.idle_timeout_s)
            chunk = self._sock.recv(65536)
        except TimeoutError as error:
            raise DeviceTransientError(
                self.device_id, f"the phone said nothing for {self.idle_timeout_s:g} s (hung or gone)"
            ) from error
        except OSError as error:
            raise DeviceTransientError(self.device_id, f"shell stream read failed: {error}") from error
        if not chunk:
            if self.framed:
                raise DeviceTransientError(self.device_id, "shell stream closed before the exit code")
            self._ended = True
            return
        if not self.framed:
            self._out += chunk
            return
        self._raw += chunk
        while len(self._raw) >= 5:
            length = packet_length(self.device_id, self._raw)
            if len(self._raw) < 5 + length:
                break
            kind, payload = self._raw[0], bytes(self._raw[5 : 5 + length])
            del self._raw[: 5 + length]
            if kind == ID_STDOUT:
                self._out += payload
            elif kind == ID_STDERR:
                self._stderr += payload
                del self._stderr[:-STDERR_KEPT_BYTES]
            elif kind == ID_EXIT:
                self.exit_code = payload[0] if payload else 255
                self._ended = True

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(OSError):  # the phone is gone already
                self._closer()

    def __enter__(self) -> ShellStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
