"""Round trips on a virtual phone through the real adb server: the session counts every adb
conversation it opens, a shell stream is one however long it talks, and a silent phone is
detected within the stream's idle timeout."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from farm.device.session import DeviceSession
from farm.engine.lifecycle import execute_run, prepare_phone
from farm.engine.model import Gates, RunJob
from farm.errors import DeviceTransientError
from farm.experiment import load_text
from farm.experiment.programs import Program
from farm.experiment.sections import Intensity
from farm.fleet.endpoint import AdbState, LocalAdbEndpoint
from farm.fleet.inventory import identify
from farm.store import Outcome, Store

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


IDLE_SPEC = """
name: overhead
benchmark:
  program: idle
  params: {seconds: 0.5}
measurement: {warmup: 0, iterations: 2, min_seconds: 0, max_seconds: 10, repetitions: 1}
"""
CHARGING_NODE = "/sys/class/power_supply/battery/charging_enabled"  # adreno-nexus6p: rooted
MAX_ROUND_TRIPS = 4  # issue 12: one steady-state run


def test_a_steady_state_run_costs_at_most_four_round_trips(module_virtual_phones, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    phones = module_virtual_phones(count=1, profiles=["adreno-nexus6p"])
    endpoint = LocalAdbEndpoint(phones.adb_port)
    phone = identify(endpoint, phones[0].adb_serial, AdbState.DEVICE)
    session = DeviceSession(endpoint.device(phone.adb_serial), phone.device_id, default_timeout_s=30)
    experiment = load_text(IDLE_SPEC)
    (cell,) = experiment.cells()
    gates = Gates(
        max_temp_c=90.0,
        cooldown_timeout_s=30.0,
        min_battery_pct=1.0,
        disable_charging=True,
        settle_s=0.5,
        tolerance=0.5,
        intensity=Intensity.COMPUTE,
        rate_hz=50.0,
        run_timeout_s=60.0,
    )
    with Store(tmp_path / "farm.db") as store:
        prepared = prepare_phone(session, phone, experiment.benchmark.program, store)
        args = experiment.program_args(cell)
        counts = []
        for run_id in ("first", "second"):  # the first one learns how root writes work here
            job = RunJob(run_id, "overhead", args, Program.IDLE, 0.3, tmp_path / run_id)
            before = session.round_trips
            result = execute_run(prepared, job, gates, store, threading.Event())
            counts.append(session.round_trips - before)
            assert result.outcome is Outcome.DONE, result.error
        print("round trips per run:", counts)
        assert counts[1] <= MAX_ROUND_TRIPS, counts
        assert store.query("SELECT COUNT(*) FROM devices WHERE charging_disabled = 1")[0][0] == 0
    artifacts = tmp_path / "second"
    events = [json.loads(line) for line in (artifacts / "stdout.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events if e["event"] == "iter"] == ["iter", "iter"]  # the idle program
    assert (artifacts / "trace.bin").stat().st_size > 0 and (artifacts / "mem.bin").stat().st_size > 0
    assert (artifacts / "gpuload.jsonl").stat().st_size > 0
    env = json.loads((artifacts / "env.json").read_text())
    assert env["charging_disabled"] is True and env["charging_restored"] is True
    assert env["throttle"]["samples"] >= 2 and env["cpufreq"]
    assert result.load_achieved is not None
    assert session.shell(["cat", CHARGING_NODE]).stdout.strip() == "1"
