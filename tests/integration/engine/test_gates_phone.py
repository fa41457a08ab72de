"""The battery and temperature gates on a real virtual phone: each really holds the run back, then
lets it go once the phone's own state allows it (its battery service, its thermal physics).

The phone is the Nexus 6P profile with a fast thermal time constant (r x c = 5 s instead of 50 s)
and a CPU that heats ten times more per busy core, so heating it with a shell loop takes seconds
even when the loop gets a small share of a loaded host's CPU."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from vphone.profiles import PROFILES_DIR

from farm.device.session import DeviceSession
from farm.engine.conditions import read_temperature_c
from farm.engine.lifecycle import execute_run, prepare_phone
from farm.engine.model import Gates, Phase, PhaseUpdate, PreparedPhone, RunJob
from farm.engine.runscript import COOL_POLL_S
from farm.experiment import load_text
from farm.experiment.model import Experiment
from farm.experiment.sections import Intensity
from farm.fleet.endpoint import AdbState, LocalAdbEndpoint
from farm.fleet.inventory import identify
from farm.store import Outcome, Store

pytestmark = pytest.mark.integration

SPEC = """
name: gates
benchmark:
  program: lstm
  params: {hidden: 8, layers: 1, seq_len: 4, input_dim: 3, classes: 2, batch: 1, backend: cpu}
measurement: {warmup: 1, iterations: 3, min_seconds: 0, max_seconds: 10, repetitions: 1}
"""
# The Nexus 6P profile: ambient 25 °C, 10 °C/W; idle 0.6 W plus the screen's 0.7 W (farm keeps
# it awake): where the phone settles doing nothing.
IDLE_C = 25.0 + (0.6 + 0.7) * 10.0


@pytest.fixture(scope="module")
def lab(module_virtual_phones, tmp_path_factory) -> Iterator[tuple[PreparedPhone, Store, Experiment]]:  # type: ignore[no-untyped-def]
    profile = yaml.safe_load((PROFILES_DIR / "adreno-nexus6p.yaml").read_text())
    profile["name"] = "nexus6p-fast-thermal"
    profile["thermal"]["c_j_per_c"] = 0.5
    profile["power"]["cpu_core_mw"] = 11_000.0
    path = tmp_path_factory.mktemp("profile") / "nexus6p-fast-thermal.yaml"
    path.write_text(yaml.safe_dump(profile))
    phones = module_virtual_phones(count=1, profiles=[str(path)])
    endpoint = LocalAdbEndpoint(phones.adb_port)
    phone = identify(endpoint, phones[0].adb_serial, AdbState.DEVICE)
    session = DeviceSession(endpoint.device(phone.adb_serial), phone.device_id, default_timeout_s=30)
    experiment = load_text(SPEC)
    with Store(tmp_path_factory.mktemp("store") / "farm.db") as store:
        yield prepare_phone(session, phone, experiment.benchmark.program, store), store, experiment


def _gates(*, max_temp_c: float = 90.0, min_battery_pct: float = 1.0) -> Gates:
    return Gates(
        max_temp_c=max_temp_c,
        cooldown_timeout_s=120.0,
        min_battery_pct=min_battery_pct,
        disable_charging=False,
        settle_s=1.0,
        tolerance=0.1,
        intensity=Intensity.COMPUTE,
        rate_hz=20.0,
        run_timeout_s=60.0,
    )


def _job(experiment: Experiment, run_id: str, folder: Path) -> RunJob:
    (cell,) = experiment.cells()
    program = experiment.benchmark.program
    return RunJob(run_id, "gates", experiment.program_args(cell), program, 0.0, folder / run_id)


def test_the_battery_gate_holds_the_run_until_the_level_reaches_the_minimum(lab, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    prepared, store, experiment = lab
    session: DeviceSession = prepared.session
    # The gate reads the battery's own power_supply capacity (never BatteryService's state, which
    # `dumpsys battery set|unplug` fakes or freezes): a minimum above the true level holds the
    # run until the charging phone reaches it (the profile charges in seconds, level_time_scale).
    level = int(session.shell(["cat", "/sys/class/power_supply/battery/capacity"], check=True).stdout)
    minimum = min(100, level + 2)
    phases: list[PhaseUpdate] = []
    job = _job(experiment, "battery", tmp_path)
    result = execute_run(
        prepared, job, _gates(min_battery_pct=float(minimum)), store, threading.Event(), phases.append
    )
    charging = [update for update in phases if update.phase is Phase.CHARGING]
    assert (
        charging and charging[0].battery_pct is not None and charging[0].battery_pct < minimum
    )  # it held the run
    assert result.outcome is Outcome.DONE, result.error
    assert result.battery_start_pct is not None and result.battery_start_pct >= minimum  # then let it go
    assert not any("below the minimum" in note for note in result.notes)
    order = [update.phase for update in phases]
    assert order.index(Phase.CHARGING) < order.index(Phase.COOLING) < order.index(Phase.RUNNING)


def test_the_cooldown_gate_holds_the_run_until_the_phone_is_cool(lab, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    prepared, store, experiment = lab
    session: DeviceSession = prepared.session
    limit_c = IDLE_C + 3.0
    # heat it: a busy loop (11 W per core it gets, 10 °C per W), in the phone's own shell
    spinner = session.start(
        ["sh", "-c", "while :; do :; done"],
        workdir="/data/local/tmp",
        stdout="/dev/null",
        stderr="/dev/null",
        exit_file="/data/local/tmp/spin.exit",
    )
    try:
        deadline = time.monotonic() + 120
        while (hot := read_temperature_c(prepared)) is None or hot < limit_c + 2.0:
            assert time.monotonic() < deadline, f"the phone did not heat up: {hot} °C"
            time.sleep(0.5)
        phases: list[PhaseUpdate] = []

        def on_phase(update: PhaseUpdate) -> None:
            phases.append(update)
            if update.phase is Phase.COOLING and update.battery_pct is not None:  # entering the gate
                session.stop(spinner, grace_s=1.0)  # it now cools back towards idle

        job = _job(experiment, "cool", tmp_path)
        result = execute_run(prepared, job, _gates(max_temp_c=limit_c), store, threading.Event(), on_phase)
    finally:
        session.stop(spinner, grace_s=1.0)
    assert result.outcome is Outcome.DONE, result.error
    # it let the run go only below the limit ...
    assert result.temperature_start_c is not None and result.temperature_start_c <= limit_c
    # ... after at least one of its polls: the phone was 2 °C over the limit when the gate began
    # and cannot lose that in the milliseconds to its first reading (5 s time constant)
    assert result.cooldown_waited_s is not None and result.cooldown_waited_s >= COOL_POLL_S
    assert not any("cooldown" in note for note in result.notes)  # no "still hot after the cooldown"
