"""What a phone returns is bounded on the host (issue 27): a command that prints more than a
shell call keeps, a file larger than a pull takes, a line without end on a stream, and a command
line longer than an adb request carries, each fail that call with one line, on a real adb server
and a virtual phone; the phone answers the next call as before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from farm import errors
from farm.device.session import DeviceSession

pytestmark = pytest.mark.integration

BIG_FILE = "/data/local/tmp/bounds-big"
ADB_REQUEST_MAX_BYTES = 0xFFFF  # an adb server request's length is 4 hex digits
# Looked up when raised, so that the tests fail (not error) on a farm without them.
OutputTooLarge = getattr(errors, "OutputTooLarge", errors.FarmError)
CommandRefused = getattr(errors, "CommandRefused", errors.FarmError)


@pytest.fixture(scope="module")
def session(module_virtual_phones) -> Iterator[DeviceSession]:  # type: ignore[no-untyped-def]
    phones = module_virtual_phones(count=1, profiles=["adreno-nexus6p"])
    session = DeviceSession(phones[0].device(phones.client()), "local/bounds", default_timeout_s=60)
    session.shell(["truncate", "-s", str(64 << 20), BIG_FILE], check=True)  # sparse: free on the phone
    yield session


def test_a_command_that_prints_more_than_a_call_keeps_fails_that_call(session: DeviceSession) -> None:
    with pytest.raises(OutputTooLarge, match=r"local/bounds: `cat .*` printed more than 16777216 bytes"):
        session.shell(["cat", BIG_FILE])
    assert session.shell(["echo", "still here"]).stdout == "still here\n"


def test_a_pull_stops_at_its_bound_and_leaves_no_partial_file(session: DeviceSession, tmp_path: Path) -> None:
    local = tmp_path / "big"
    with pytest.raises(OutputTooLarge, match="larger than the 16777216 bytes"):
        session.pull(BIG_FILE, local)
    assert not local.exists()
    with pytest.raises(OutputTooLarge):
        session.pull_many([BIG_FILE])


def test_a_stream_line_without_end_is_refused(session: DeviceSession) -> None:
    with session.stream(["cat", BIG_FILE]) as stream, pytest.raises(OutputTooLarge, match="line longer"):
        stream.read_line()


def test_a_command_line_longer_than_an_adb_request_is_refused_before_it_is_sent(
    session: DeviceSession,
) -> None:
    before = session.round_trips
    argument = "x" * 400_000
    with pytest.raises(CommandRefused, match=f"an adb request carries at most {ADB_REQUEST_MAX_BYTES}"):
        session.shell(["echo", argument])
    with pytest.raises(CommandRefused):
        session.stream(["echo", argument])
    assert session.round_trips == before  # nothing reached the adb server
    fits = "y" * (ADB_REQUEST_MAX_BYTES - 100)
    assert session.shell(["echo", fits]).stdout == fits + "\n"
