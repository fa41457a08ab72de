"""The CLI turns SIGINT and SIGTERM into the cancel event the engine takes (farm.cli.signals)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from farm.cli.signals import cancel_on_signals


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_sets_the_event_a_second_one_interrupts_and_handlers_come_back(signum: int) -> None:
    before = signal.getsignal(signum)
    seen: list[int] = []
    with cancel_on_signals(on_signal=seen.append) as cancel:
        assert not cancel.is_set()
        os.kill(os.getpid(), signum)
        assert cancel.wait(60)  # delivered to this (main) thread, which runs the handler
        assert seen == [signum]
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signum)
            time.sleep(60)  # interrupted by the handler's KeyboardInterrupt (raised here at the latest)
    assert signal.getsignal(signum) == before
