"""Round trips on a virtual phone through the real adb server: the session counts every adb
conversation it opens, a shell stream is one however long it talks, and a silent phone is
detected within the stream's idle timeout."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from farm.device.session import DeviceSession
from farm.errors import DeviceTransientError

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def session(module_virtual_phones) -> Iterator[DeviceSession]:  # type: ignore[no-untyped-def]
    phones = module_virtual_phones(count=1, profiles=["adreno-nexus6p"])
    session = DeviceSession(phones[0].device(phones.client()), "local/rt", default_timeout_s=30)
    session.shell(["true"])  # shell v2 support asked once, here
    yield session


def test_every_shell_call_and_sync_transfer_counts_one_round_trip(
    session: DeviceSession, tmp_path: Path
) -> None:
    before = session.round_trips
    session.shell(["echo", "x"])
    session.script('echo "$1"', "y")
    assert session.round_trips == before + 2
    local = tmp_path / "f"
    local.write_text("data")
    session.push(local, "/data/local/tmp/rt-file")
    session.pull("/data/local/tmp/rt-file", tmp_path / "back")
    assert session.round_trips == before + 4
    assert (tmp_path / "back").read_text() == "data"


def test_a_stream_is_one_round_trip_for_a_whole_conversation(session: DeviceSession) -> None:
    before = session.round_trips
    script = (
        'while IFS= read -r line; do [ "$line" = end ] && break; printf "got %s\\n" "$line"; done; exit 3'
    )
    with session.stream(["sh", "-c", script]) as stream:
        for word in ("a b", "it's", "$HOME"):
            stream.send_line(word)
            assert stream.read_line() == f"got {word}".encode()
        stream.send_line("end")
        assert stream.read_line() is None
        assert stream.exit_code == 3
    assert session.round_trips == before + 1


def test_a_silent_phone_raises_a_transient_error_within_the_idle_timeout(session: DeviceSession) -> None:
    started = time.monotonic()
    with (
        session.stream(["sh", "-c", "echo hi; sleep 30"], idle_timeout_s=1.0) as stream,
        pytest.raises(DeviceTransientError, match="said nothing"),
    ):
        assert stream.read_line() == b"hi"
        stream.read_line()
    assert time.monotonic() - started < 20.0  # the idle timeout, not the program's 30 s


def test_bytes_are_read_exactly_after_a_line(session: DeviceSession) -> None:
    with session.stream(["sh", "-c", "echo size; printf 'ab\\ncd'; echo; echo after"]) as stream:
        assert stream.read_line() == b"size"
        assert stream.read_exact(5) == b"ab\ncd"
        assert stream.read_line() == b""
        assert stream.read_line() == b"after"
        assert stream.wait_exit() == 0
