"""Child processes of a stream: spawn (raw pipes or a PTY), pump output, kill like adbd does.

When the host closes a stream or its connection, adbd's child gets SIGHUP; whatever in its process
group still runs ~0.5 s later and does not ignore SIGHUP gets SIGKILL. So `nohup x &` and
`setsid x` survive, as on a phone, while a plain `sleep 1000` dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import signal
import struct
import termios
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KILL_GRACE_S = 0.5
READ_CHUNK_BYTES = 1 << 20
_SIGHUP_BIT = 1 << (signal.SIGHUP - 1)

_background: set[asyncio.Task[None]] = set()


@dataclass
class Child:
    """A running shell child. `master_fd` is set for PTY children (stdin/stdout/stderr merged)."""

    process: asyncio.subprocess.Process
    master_fd: int | None = None
    _fd_closed: bool = field(default=False, repr=False)

    @property
    def pgid(self) -> int:
        return self.process.pid  # start_new_session=True makes the child a group leader

    def exit_code(self) -> int:
        """adbd's exit byte: the status, or 0x80|signal when killed."""
        code = self.process.returncode
        if code is None:
            return 255
        return (0x80 | -code) & 0xFF if code < 0 else code & 0xFF

    def close_fd(self) -> None:
        if self.master_fd is not None and not self._fd_closed:
            self._fd_closed = True
            os.close(self.master_fd)


async def _create(argv: list[str], **options: Any) -> asyncio.subprocess.Process:
    """create_subprocess_exec that a cancel cannot cut in half. Cancelled while asyncio connects
    the child's pipes, its clean-up can wait forever for an exit it is never told of (the fuzz
    test's connections kept their slots for good that way, until the phone refused everyone). So
    the creation always finishes; a cancel that came meanwhile kills and reaps the child, then
    goes on."""
    creation = asyncio.ensure_future(asyncio.create_subprocess_exec(*argv, **options))
    cancelled = False
    while True:
        try:
            process = await asyncio.shield(creation)
            break
        except asyncio.CancelledError:
            if creation.done():
                raise  # the creation itself was cancelled (loop shutdown)
            cancelled = True
    if cancelled:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        await asyncio.shield(process.wait())
        raise asyncio.CancelledError
    return process


async def spawn(argv: list[str], env: dict[str, str], *, pty: bool, merge_stderr: bool) -> Child:
    if pty:
        master, slave = os.openpty()
        try:
            process = await _create(
                argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        return Child(process, master)
    process = await _create(
        argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
        env=env,
        start_new_session=True,
        limit=READ_CHUNK_BYTES,
    )
    return Child(process)


async def _wait_fd(fd: int, *, writable: bool) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    add, remove = (loop.add_writer, loop.remove_writer) if writable else (loop.add_reader, loop.remove_reader)

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    add(fd, wake)
    try:
        await ready
    finally:
        remove(fd)


async def read_pty(fd: int) -> bytes:
    """Next output of a PTY master; b"" once every slave end is closed (EIO)."""
    while True:
        try:
            return os.read(fd, READ_CHUNK_BYTES)
        except BlockingIOError:
            await _wait_fd(fd, writable=False)
        except OSError as error:
            if error.errno == errno.EIO:
                return b""
            raise


async def write_pty(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
            view = view[written:]
        except BlockingIOError:
            await _wait_fd(fd, writable=True)


def set_window_size(fd: int, spec: bytes) -> None:
    """Apply a shell-v2 window-size packet: b"<rows>x<cols>,<xpix>x<ypix>\\0"."""
    try:
        size, _, pixels = spec.rstrip(b"\0").decode().partition(",")
        rows, cols = (int(v) for v in size.split("x"))
        xpix, ypix = (int(v) for v in pixels.split("x")) if pixels else (0, 0)
    except ValueError:
        return
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, xpix, ypix))


async def pump_output(
    child: Child, sink: Callable[[int, bytes], Awaitable[None]], *, stdout_id: int = 1, stderr_id: int = 2
) -> None:
    """Forward every output of `child` to sink(id, data) until EOF on all of its outputs."""
    if child.master_fd is not None:
        fd = child.master_fd
        while chunk := await read_pty(fd):
            await sink(stdout_id, chunk)
        return

    async def pump(reader: asyncio.StreamReader | None, stream_id: int) -> None:
        if reader is None:
            return
        while chunk := await reader.read(READ_CHUNK_BYTES):
            await sink(stream_id, chunk)

    await asyncio.gather(pump(child.process.stdout, stdout_id), pump(child.process.stderr, stderr_id))


async def feed_stdin(child: Child, data: bytes) -> None:
    """Write host input to the child; input after the child closed its stdin is dropped."""
    if child.master_fd is not None:
        with contextlib.suppress(OSError):
            await write_pty(child.master_fd, data)
        return
    stdin = child.process.stdin
    if stdin is None or stdin.is_closing():
        return
    with contextlib.suppress(ConnectionError, OSError):
        stdin.write(data)
        await stdin.drain()


def close_stdin(child: Child) -> None:
    stdin = child.process.stdin
    if child.master_fd is None and stdin is not None and not stdin.is_closing():
        stdin.close()


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def _ignores_sighup(pid: int) -> bool:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) & _SIGHUP_BIT)
    except (OSError, ValueError):
        pass
    return False


async def _hangup_then_kill(child: Child) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pgid, signal.SIGHUP)
    await asyncio.sleep(KILL_GRACE_S)
    for pid in _group_members(child.pgid):
        if not _ignores_sighup(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    child.close_fd()
    with contextlib.suppress(ProcessLookupError):
        await child.process.wait()


def terminate(child: Child) -> None:
    """Stream closed early: hang up the child's group in the background (survives cancellation)."""
    if child.process.returncode is not None and not _group_members(child.pgid):
        child.close_fd()
        return
    task = asyncio.get_running_loop().create_task(_hangup_then_kill(child))
    _background.add(task)
    task.add_done_callback(_background.discard)


async def wait_for_background(timeout_s: float) -> None:
    """Let pending hang-up/kill tasks finish (daemon shutdown)."""
    if _background:
        await asyncio.wait(list(_background), timeout=timeout_s)
