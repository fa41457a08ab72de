"""Drives one run conversation: lines from the run script to farm.engine.steering, its answers
back, the run's files out of the bundle at the end. The channel is a ShellStream on a phone (or,
in tests, the script under a local shell); stopping the benchmark early (cancel, a host-side
timeout) goes through `request_stop`, which writes the script's stop file with a second short
call: the conversation itself only says go, wait or stop at the script's questions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from farm.engine.steering import Assembler, Data, Done, Event, Started, Steering
from farm.errors import FarmError

# How long past the run timeout the host waits for the script's own timeout before it asks.
STOP_GRACE_S = 5.0


class Channel(Protocol):
    def read_line(self) -> bytes | None: ...

    def read_exact(self, size: int) -> bytes: ...

    def send_line(self, text: str) -> None: ...


class ConversationError(FarmError):
    """The run script ended without saying it was done (it failed on the phone: not retried)."""


def converse(
    channel: Channel,
    steering: Steering,
    *,
    cancel: threading.Event,
    run_timeout_s: float,
    request_stop: Callable[[], None],
    on_event: Callable[[Event], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, bytes]:
    """Talk until the script's `done`; returns the bundle's files by phone name. The report is in
    steering.report. DeviceTransientError (from the channel) when the phone goes silent or away."""
    assembler = Assembler()
    files: dict[str, bytes] = {}
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
            for name, size in steering.report.sizes:
                files[name] = channel.read_exact(size)
        if isinstance(event, Done):
            return files
        running = bench_started is not None and steering.report.bench_end is None
        overdue = running and bench_started is not None and now - bench_started > run_timeout_s + STOP_GRACE_S
        if running and not stop_asked and (cancel.is_set() or overdue):
            stop_asked = True
            request_stop()


def _ended_early(steering: Steering) -> str:
    errors = steering.report.errors
    return f"the run script ended early: {errors[-1]}" if errors else "the run script ended without `done`"
