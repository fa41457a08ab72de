"""Ctrl-C and SIGTERM, for the commands that run sweeps: they set a cancel event.

The engine takes cancellation as a parameter (farm.engine.runner.run_experiment(cancel=...));
only the CLI turns signals into it:

    with cancel_on_signals() as cancel:
        run_experiment(options, cancel=cancel)

The first SIGINT or SIGTERM sets the event (the sweep then stops its runs and restores the phones);
a second one raises KeyboardInterrupt, for a process stuck before the sweep watches the event
(e.g. connecting to a lab host). Handlers are installed also when the shell started farm with
SIGINT ignored (a background job), and the previous ones are back on exit.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def cancel_on_signals(
    cancel: threading.Event | None = None, *, on_signal: Callable[[int], None] | None = None
) -> Iterator[threading.Event]:
    """Within the block, SIGINT and SIGTERM set `cancel` (a new event when None), which it yields.
    `on_signal(signum)` is called first (e.g. to say that farm is stopping). Outside the main
    thread nothing is installed (Python delivers signals to the main thread only)."""
    event = cancel if cancel is not None else threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield event
        return

    def handle(signum: int, _frame: FrameType | None) -> None:
        if event.is_set():
            raise KeyboardInterrupt
        if on_signal is not None:
            on_signal(signum)
        event.set()

    previous = {sig: signal.signal(sig, handle) for sig in SIGNALS}
    try:
        yield event
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
