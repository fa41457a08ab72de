"""A phone that stops answering in the middle of a run conversation (device_agents/run/farm-run.sh
over one shell stream): the attempt ends LOST within the call timeout, not at the end of the
benchmark, and once the phone is back the next attempt runs to DONE with charging back on."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from farm.device.session import DeviceSession
from farm.engine.lifecycle import execute_run, prepare_phone
from farm.engine.model import Gates, Phase, PhaseUpdate, RunJob
from farm.engine.recovery import kill_stale_processes, restore_charging_marker
from farm.experiment import load_text
from farm.experiment.programs import Program
from farm.experiment.sections import Intensity
from farm.fleet.endpoint import AdbState, LocalAdbEndpoint
from farm.fleet.inventory import identify
from farm.store import Outcome, Store

pytestmark = pytest.mark.integration

SPEC = """
name: drop
benchmark:
  program: idle
  params: {seconds: 60}
measurement: {warmup: 0, iterations: 4, min_seconds: 0, max_seconds: 90, repetitions: 1}
"""
CALL_TIMEOUT_S = 5.0
CHARGING_NODE = "/sys/class/power_supply/battery/charging_enabled"  # adreno-nexus6p: rooted


def test_a_phone_hanging_mid_run_is_lost_within_the_call_timeout(virtual_phones, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["adreno-nexus6p"])
    endpoint = LocalAdbEndpoint(phones.adb_port)
    phone = identify(endpoint, phones[0].adb_serial, AdbState.DEVICE)
    session = DeviceSession(
        endpoint.device(phone.adb_serial), phone.device_id, default_timeout_s=CALL_TIMEOUT_S
    )
    experiment = load_text(SPEC)
    (cell,) = experiment.cells()
    gates = Gates(
        max_temp_c=90.0,
        cooldown_timeout_s=5.0,
        min_battery_pct=1.0,
        disable_charging=True,
        settle_s=0.5,
        tolerance=0.5,
        intensity=Intensity.COMPUTE,
        rate_hz=20.0,
        run_timeout_s=120.0,
    )
    running = threading.Event()

    def on_phase(update: PhaseUpdate) -> None:
        if update.phase is Phase.RUNNING:
            running.set()

    with Store(tmp_path / "farm.db") as store:
        prepared = prepare_phone(session, phone, experiment.benchmark.program, store)
        args = experiment.program_args(cell)
        job = RunJob("hung", "drop", args, Program.IDLE, 0.0, tmp_path / "hung")
        hang = threading.Thread(target=lambda: (running.wait(60), phones.fault(phones[0], "hang")))
        hang.start()
        started = time.monotonic()
        result = execute_run(prepared, job, gates, store, threading.Event(), on_phase)
        hung_for = time.monotonic() - started
        hang.join()
        assert result.outcome is Outcome.LOST, result.error
        assert hung_for < 45.0  # the call timeout (plus the restore attempts), not the 60 s benchmark
        assert result.charging_restored is False  # the host could not reach it either ...
        assert (
            store.query("SELECT COUNT(*) FROM devices WHERE charging_disabled = 1")[0][0] == 1
        )  # ... marked

        phones.fault(phones[0], "recover")
        kill_stale_processes(session)  # what the scheduler's recovery does when the phone is back
        restore_charging_marker(store, session, phone.device_id)
        assert session.shell(["cat", CHARGING_NODE]).stdout.strip() == "1"
        short = RunJob("again", "drop", ("--seconds=0.2", "--iters=1"), Program.IDLE, 0.0, tmp_path / "again")
        again = execute_run(prepared, short, gates, store, threading.Event())
        assert again.outcome is Outcome.DONE, again.error
        assert again.charging_restored is True
        assert store.query("SELECT COUNT(*) FROM devices WHERE charging_disabled = 1")[0][0] == 0
    assert session.shell(["cat", CHARGING_NODE]).stdout.strip() == "1"
