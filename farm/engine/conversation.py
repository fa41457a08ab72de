"""Drives one run conversation: lines from the run script to farm.engine.steering, its answers
back, the run's files out of the bundle at the end. The channel is a ShellStream on a phone (or,
in tests, the script under a local shell); stopping the benchmark early (cancel, a host-side
timeout) goes through `request_stop`, which writes the script's stop file with a second short
call: the conversation itself only says go, wait or stop at the script's questions.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO, Protocol

from farm.engine.steering import Assembler, Data, Done, Event, Started, Steering
from farm.errors import FarmError
from farm.store.run_dirs import create_file

# How long past the run timeout the host waits for the script's own timeout before it asks.
STOP_GRACE_S = 5.0


class Channel(Protocol):
    def read_line(self) -> bytes | None: ...

    def copy_to(self, size: int, sink: BinaryIO) -> None: ...

    def send_line(self, text: str) -> None: ...


class ConversationError(FarmError):
    """The run script ended without saying it was done (it failed on the phone: not retried)."""


class FileTooLarge(FarmError):
    """A run's file is larger than a run may bring back: the run fails (a retry would bring the
    same file), the phone is fine."""


def too_large(sizes: list[tuple[str, int]], max_file_bytes: int) -> str | None:
    """Why a bundle must not be taken (its largest file over the limit), or None (pure)."""
    over = [(size, name) for name, size in sizes if size > max_file_bytes]
    if not over:
        return None
    size, name = max(over)
    return f"{name} is {size} bytes, over the {max_file_bytes} bytes a run's file may be"


def converse(
    channel: Channel,
    steering: Steering,
    *,
    cancel: threading.Event,
    run_timeout_s: float,
    request_stop: Callable[[], None],
    on_event: Callable[[Event], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    keep: Mapping[str, Path],
    max_file_bytes: int,
) -> dict[str, Path]:
    """Talk until the script's `done`; returns the bundle's files that `keep` names (phone name ->
    host path), each written there as it comes, never held whole. The report is in
    steering.report. DeviceTransientError (from the channel) when the phone goes silent or away;
    FileTooLarge, before any byte of the bundle is read, when a file passes max_file_bytes (the
    script leaves such files on the phone itself; this is for a phone that does not)."""
    assembler = Assembler()
    files: dict[str, Path] = {}
    bench_started: float | None = None
    stop_asked = False
    while True:
        raw = channel.read_line()
        if raw is None:
            raise ConversationError(_ended_early(steering))
        event = assembler.feed(raw.decode("utf-8", "replace"))
        if event is None:
            continue
        now = clock()
        steering.cancelled = cancel.is_set()
        reply = steering.on_event(event, now)
        if reply is not None:
            channel.send_line(reply.value)
        if on_event is not None:
            on_event(event)
        if isinstance(event, Started) and event.name == "bench":
            bench_started = now
        if isinstance(event, Data):
            reason = too_large(steering.report.sizes, max_file_bytes)
            if reason is not None:
                raise FileTooLarge(reason)
            for name, size in steering.report.sizes:
                files.update(_receive(channel, name, size, keep.get(name)))
        if isinstance(event, Done):
            return files
        running = bench_started is not None and steering.report.bench_end is None
        overdue = running and bench_started is not None and now - bench_started > run_timeout_s + STOP_GRACE_S
        if running and not stop_asked and (cancel.is_set() or overdue):
            stop_asked = True
            request_stop()


def _receive(channel: Channel, name: str, size: int, path: Path | None) -> dict[str, Path]:
    """One bundle file to `path`, or read past when farm does not keep it."""
    with create_file(path or Path(os.devnull)) as sink:
        channel.copy_to(size, sink)
    return {name: path} if path is not None else {}


def _ended_early(steering: Steering) -> str:
    errors = steering.report.errors
    return f"the run script ended early: {errors[-1]}" if errors else "the run script ended without `done`"
