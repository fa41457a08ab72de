"""`shell:` (v1), `shell,v2,...:` (shell protocol) and `exec:` services.

v1 and exec merge stdout and stderr and end with CLSE at exit; v2 frames output as
id(1 byte) + u32 LE length + data (1 stdout, 2 stderr, 3 exit) and takes 0 stdin, 4 close-stdin
and 5 window size from the host. PTY when the command is empty unless `raw` is given.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

from vphone.adb.services import process
from vphone.adb.services.base import ByteReader, ServiceContext
from vphone.adb.transport import Stream

ID_STDIN = 0
ID_STDOUT = 1
ID_STDERR = 2
ID_EXIT = 3
ID_CLOSE_STDIN = 4
ID_WINDOW_SIZE = 5
V2_HEADER = struct.Struct("<BI")
DEFAULT_TERM = "dumb"


@dataclass(frozen=True)
class ShellRequest:
    v2: bool
    pty: bool
    term: str
    command: str | None  # None: interactive login shell


def parse_shell_service(name: str) -> ShellRequest:
    """`shell[,arg...]:[command]`; arguments raw, pty, v2, TERM=..; unknown ones are ignored."""
    head, _, command = name.partition(":")
    v2 = False
    pty: bool | None = None
    term = DEFAULT_TERM
    for arg in head.split(",")[1:]:
        if arg == "v2":
            v2 = True
        elif arg == "raw":
            pty = False
        elif arg == "pty":
            pty = True
        elif arg.startswith("TERM="):
            term = arg[len("TERM=") :]
    return ShellRequest(
        v2=v2, pty=(command == "") if pty is None else pty, term=term, command=command or None
    )


def pack_v2(packet_id: int, data: bytes = b"") -> bytes:
    return V2_HEADER.pack(packet_id, len(data)) + data


async def _spawn(ctx: ServiceContext, request: ShellRequest, *, merge_stderr: bool) -> process.Child:
    return await process.spawn(
        ctx.world.shell_argv(request.command),
        ctx.world.shell_env(request.term),
        pty=request.pty,
        merge_stderr=merge_stderr,
    )


async def _run_child(
    child: process.Child, stdin_loop: asyncio.Task[None], output: asyncio.Future[None]
) -> None:
    """Wait for output EOF and exit; on cancellation (host closed) hang up the child's group."""
    finished = False
    try:
        await output
        await child.process.wait()
        finished = True
    finally:
        stdin_loop.cancel()
        if finished:
            child.close_fd()
        else:
            output.cancel()
            process.terminate(child)


async def run_raw(stream: Stream, ctx: ServiceContext, request: ShellRequest) -> None:
    """v1 shell and exec: output bytes as they come, merged; CLSE at exit."""
    child = await _spawn(ctx, request, merge_stderr=True)

    async def sink(_id: int, data: bytes) -> None:
        await stream.write(data)

    async def stdin_loop() -> None:
        while data := await stream.read():
            await process.feed_stdin(child, data)

    stdin_task = asyncio.create_task(stdin_loop())
    await _run_child(child, stdin_task, asyncio.ensure_future(process.pump_output(child, sink)))
    ctx.world.settle()


async def run_v2(stream: Stream, ctx: ServiceContext, request: ShellRequest) -> None:
    child = await _spawn(ctx, request, merge_stderr=False)

    async def sink(packet_id: int, data: bytes) -> None:
        await stream.write(pack_v2(packet_id, data))

    async def stdin_loop() -> None:
        reader = ByteReader(stream)
        try:
            while True:
                packet_id, length = V2_HEADER.unpack(await reader.read_exactly(V2_HEADER.size))
                data = await reader.read_exactly(length) if length else b""
                if packet_id == ID_STDIN:
                    await process.feed_stdin(child, data)
                elif packet_id == ID_CLOSE_STDIN:
                    process.close_stdin(child)
                elif packet_id == ID_WINDOW_SIZE and child.master_fd is not None:
                    process.set_window_size(child.master_fd, data)
        except EOFError:
            return

    stdin_task = asyncio.create_task(stdin_loop())
    await _run_child(child, stdin_task, asyncio.ensure_future(process.pump_output(child, sink)))
    ctx.world.settle()
    await stream.write(pack_v2(ID_EXIT, bytes([child.exit_code()])))


async def shell_service(stream: Stream, ctx: ServiceContext, name: str) -> None:
    request = parse_shell_service(name)
    if request.v2:
        await run_v2(stream, ctx, request)
    else:
        await run_raw(stream, ctx, request)


async def exec_service(stream: Stream, ctx: ServiceContext, command: str) -> None:
    """`exec:<cmd>`: raw, no PTY, stdout and stderr merged, no exit code."""
    await run_raw(stream, ctx, ShellRequest(v2=False, pty=False, term=DEFAULT_TERM, command=command))
