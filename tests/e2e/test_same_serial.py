"""Two phones that report one serial (clones, or one spoofing the other) are both usable and never
taken for each other (issue 27): `farm devices` lists both, each with its own identity and the
serial they share; `farm run` measures on both and stores each run under the phone that ran it;
`--devices` naming the shared serial is refused in one line, and so is a phone whose model is not
what the store knows at its identity. Before, every `farm run` died with "device ids must be
unique", and with --devices one phone's runs were stored as the other's."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from vphone.testing.phones import AdbServer

from farm.store import RunState
from farm.store import devices as device_store
from farm.store import runs as run_store
from tests.e2e.farm_cli import REPO, fast_lstm, open_store, run_farm, write_experiment
from tests.fixtures.same_serial_world import SHARED_SERIAL, WORLD
from vphone import control

pytestmark = pytest.mark.integration


@pytest.fixture
def clones(
    adb_server: AdbServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[control.PhoneInfo]]:
    """Two virtual phones on the test's adb server, both reporting SHARED_SERIAL."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    state = control.start_daemon(
        tmp_path / "clones", control.resolve_profiles(2, []), world_factory=WORLD, adb_port=adb_server.port
    )
    try:
        control.connect_phones(state.phones, adb_server.port)
        yield list(state.phones)
    finally:
        control.disconnect_phones(state.phones, adb_server.port)
        control.stop_daemon(state)


def test_two_phones_with_one_serial_are_both_used_and_told_apart(
    adb_server: AdbServer, clones: list[control.PhoneInfo], tmp_path: Path
) -> None:
    results = tmp_path / "results"
    listed = run_farm(adb_server.port, results, "devices", "--no-probe", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    ids = sorted(row["id"] for row in rows)
    assert ids == sorted(f"local/{SHARED_SERIAL}@{phone.adb_serial}" for phone in clones)
    assert all(row["serial"] == SHARED_SERIAL and row["shares_serial"] == 2 for row in rows)
    shown = run_farm(adb_server.port, results, "devices", "--no-probe")
    assert f"farm: local/{SHARED_SERIAL}: 2 phones report this serial: " in shown.stderr

    path = write_experiment(tmp_path, "clones", fast_lstm())
    run = run_farm(adb_server.port, results, "run", str(path), "--no-live")
    assert run.returncode == 0, run.stdout + run.stderr
    with open_store(results) as store:
        runs = run_store.list_runs(store, "clones")
    assert [r.state for r in runs] == [RunState.DONE, RunState.DONE]
    assert sorted(r.ran_on or "" for r in runs) == ids  # each phone's run under its own identity

    refused = run_farm(
        adb_server.port, results, "run", str(path), "--no-live", "--devices", f"local/{SHARED_SERIAL}"
    )
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"farm: --devices local/{SHARED_SERIAL}: 2 phones report this serial (" in refused.stderr


def test_a_phone_that_is_not_the_one_stored_at_its_identity_is_refused(
    adb_server: AdbServer, clones: list[control.PhoneInfo], tmp_path: Path
) -> None:
    results = tmp_path / "results"
    first, second = (f"local/{SHARED_SERIAL}@{phone.adb_serial}" for phone in clones)
    with open_store(results) as store:  # the store knew `first` as another model
        device_store.record_device(store, first, host="local", serial=SHARED_SERIAL, model="Pixel 4a")
    path = write_experiment(tmp_path, "mismatch", fast_lstm())
    run = run_farm(adb_server.port, results, "run", str(path), "--no-live")
    assert run.returncode != 0 and "Traceback" not in run.stderr
    line = next(line for line in (run.stdout + run.stderr).splitlines() if "another phone reports" in line)
    assert f"{first}: this phone reports model " in line and "(the store knows 'Pixel 4a')" in line
    with open_store(results) as store:
        runs = {r.device_id: r for r in run_store.list_runs(store, "mismatch")}
    assert runs[second].state is RunState.DONE and runs[first].state is not RunState.DONE
