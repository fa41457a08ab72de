"""One phone's stop signal: set by itself (its lease was lost, it was quarantined) or by the
sweep's cancel event (Ctrl-C, SIGTERM, a nightly's deadline, a store failure).

The lifecycle takes a `threading.Event` and only calls `is_set()` and `wait(timeout)`, so a
subclass that also answers for its parent stops one phone's attempt without touching the others,
and needs no thread to forward the parent's state.
"""

from __future__ import annotations

import threading
import time

POLL_S = 0.1  # how soon a wait notices the parent was set


class PhoneCancel(threading.Event):
    def __init__(self, parent: threading.Event) -> None:
        super().__init__()
        self.parent = parent

    def is_set(self) -> bool:
        return super().is_set() or self.parent.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
            if left <= 0:
                return False
            if super().wait(left):
                return True
        return True
