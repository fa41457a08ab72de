"""The screen timeout farm raises for a run is put back after a phone that died mid-run returns
(issue 28): the run script holds the screen with screen_off_timeout at its maximum and restores
it when it ends, but a phone that reboots under it (a crash, a power loss) keeps the maximum. The
store's marker, written before the run, keeps the phone's own value; the next contact puts it
back, and no later run takes the maximum for the phone's own."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from farm.store import RunState
from farm.store import devices as device_store
from farm.store import events as store_events
from farm.store import runs as run_store
from tests.e2e.farm_cli import fast_lstm, open_store, start_farm, write_experiment

pytestmark = pytest.mark.integration

OWN_MS = "60000"  # the phone's own timeout, set by "its user" before farm runs
HELD_MS = "2147483647"  # the run script's maximum


def _timeout(device) -> str:  # type: ignore[no-untyped-def]
    return device.shell("settings get system screen_off_timeout").strip()


def _wait(what: str, predicate, timeout_s: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_phone_that_reboots_mid_run_gets_its_screen_timeout_back(virtual_phones, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["adreno-nexus6p"])
    victim = phones[0]
    device = victim.device(phones.client())
    device.shell(f"settings put system screen_off_timeout {OWN_MS}")
    assert _timeout(device) == OWN_MS
    results = tmp_path / "results"
    body = fast_lstm(
        "{hidden: [128]}",
        "{warmup: 1, iterations: 3, min_seconds: 8, max_seconds: 30, repetitions: 1}",
        params="layers: 1, seq_len: 64, input_dim: 9, classes: 6, batch: 1, backend: cpu",
    )
    farm = start_farm(
        phones.adb_port, results, "run", str(write_experiment(tmp_path, "held", body)), "--no-live"
    )
    try:
        _wait("the screen held", lambda: _timeout(device) == HELD_MS)
        phones.fault(victim, "reboot")  # the script dies with the phone's processes: no restore
        output, _ = farm.communicate(timeout=300)
    finally:
        if farm.poll() is None:
            farm.kill()
            farm.wait()
    assert farm.returncode == 0, output
    device = victim.device(phones.client())
    assert _timeout(device) == OWN_MS  # back, not the maximum the dead run left
    with open_store(results) as store:
        (run,) = run_store.list_runs(store, "held")
        assert run.state is RunState.DONE and run.attempts == 2
        assert device_store.screens_marked(store) == set()
        messages = [e.message for e in store_events.recent(store, None, 100)]
        assert "screen timeout restored after an interrupted run" in messages, messages
