"""Issue #27 item 1, host side: what the daemon reads or writes below a phone's tree never blocks
(a FIFO the phone planted), never follows a link, and is bounded. On the old code each FIFO case
blocked the reading thread until a writer came: here, a bounded wait, then the test unblocks it."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from vphone import beneath, ctlfiles

WAIT_S = 10.0


def in_thread(call: Callable[[], object], unblock: Path, *, blocked_reader: bool = True) -> object:
    """call() on a thread; if it has not returned within WAIT_S, open the FIFO `unblock` the
    other way (so the test ends) and report it as blocked."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as error:  # the outcome under test
            result.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WAIT_S)
    if thread.is_alive():
        fd = os.open(unblock, (os.O_WRONLY if blocked_reader else os.O_RDONLY) | os.O_NONBLOCK)
        os.close(fd)
        thread.join(WAIT_S)
        return AssertionError("blocked on the FIFO")
    return result[0]


def test_reading_a_fifo_below_the_tree_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "power.json")
    outcome = in_thread(lambda: beneath.read_text(tmp_path, "power.json"), tmp_path / "power.json")
    assert isinstance(outcome, OSError) and outcome.errno == errno.EINVAL, outcome
    assert ctlfiles.read_json(tmp_path, "power.json", "default") == "default"


def test_a_request_that_is_a_fifo_is_removed_unread(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "taskset.request.1")
    outcome = in_thread(
        lambda: ctlfiles.take_request(tmp_path, "taskset.request.1"), tmp_path / "taskset.request.1"
    )
    assert outcome is None
    assert not os.path.lexists(tmp_path / "taskset.request.1")


def test_writing_a_node_replaced_by_a_fifo_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "current_now")
    outcome = in_thread(
        lambda: beneath.open_file(tmp_path, "current_now", os.O_WRONLY | os.O_CREAT),
        tmp_path / "current_now",
        blocked_reader=False,
    )
    assert isinstance(outcome, OSError) and outcome.errno == errno.EINVAL, outcome


def test_a_link_below_the_tree_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "host-file"
    secret.write_text("1\n")
    (tmp_path / "sys").mkdir()
    (tmp_path / "sys" / "input_suspend").symlink_to(secret)
    with pytest.raises(OSError) as raised:
        beneath.read_text(tmp_path / "sys", "input_suspend")
    assert raised.value.errno == errno.ELOOP


def test_reads_are_bounded(tmp_path: Path) -> None:
    with open(tmp_path / "big", "wb") as f:
        f.truncate(64 << 20)  # sparse: free for the phone, 64 MiB for a reader
    with pytest.raises(OSError) as raised:
        beneath.read_text(tmp_path, "big")
    assert raised.value.errno == errno.EFBIG


def test_listing_is_bounded(tmp_path: Path) -> None:
    for i in range(20):
        (tmp_path / str(i)).touch()
    assert len(beneath.list_dir(tmp_path, "", max_entries=20)) == 20
    with pytest.raises(OSError) as raised:
        beneath.list_dir(tmp_path, "", max_entries=19)
    assert raised.value.errno == errno.E2BIG
