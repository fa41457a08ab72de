"""The recovery ladder on virtual phones that hang mid-run (they stop answering packets, yet adb
still lists them): reconnect, then reboot (allowed by the experiment), then the farm.yaml
power-cycle command, then quarantine. One phone's power-cycle command (here: the virtual phone's
own `recover`, standing in for uhubctl) brings it back and its runs finish; the other's command
lacks a value for a placeholder, so that phone is quarantined and `farm devices` says why."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from vphone.testing.waiting import eventually

from farm.store import RunState
from farm.store import events as store_events
from farm.store import runs as run_store
from tests.e2e.farm_cli import fast_lstm, open_store, run_farm, start_farm, write_experiment

pytestmark = pytest.mark.integration


def _started_on(results: Path, device_id: str) -> bool:
    if not (results / "farm.db").exists():
        return False
    with open_store(results) as store:
        rows = store.query("SELECT 1 FROM runs WHERE state = 'RUNNING' AND ran_on = ?", (device_id,))
    return bool(rows)


def test_hung_phones_climb_the_ladder_one_is_power_cycled_the_other_quarantined(
    virtual_phones, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    phones = virtual_phones(count=2)
    saved, lost = phones
    results = tmp_path / "results"
    command = f"{shlex.quote(sys.executable)} -m farm virtual fault {{serial}} recover --state-dir {{state}}"
    config = tmp_path / "config" / "farm.yaml"
    config.parent.mkdir()
    config.write_text(
        "hosts:\n"
        "  - name: local\n"
        f"    adb_port: {phones.adb_port}\n"
        f"    power_cycle: {json.dumps(command)}\n"
        "    power_cycle_timeout_s: 60\n"
        "    phones:\n"
        f"      {saved.serial}: {{state: {json.dumps(str(phones.state_dir))}}}\n"
    )
    monkeypatch.setenv("FARM_CONFIG", str(config))
    body = fast_lstm(
        "{hidden: [8, 9]}",
        "{warmup: 1, iterations: 3, min_seconds: 3, max_seconds: 20, repetitions: 1}",
        extra="timeouts: {device_call_timeout_s: 5, lost_phone_wait_s: 5}\nretries: {reboot: true}\n",
    )
    spec = write_experiment(tmp_path, "ladder", body)
    ids = {phone.serial: f"local/{phone.serial}" for phone in phones}
    farm = start_farm(phones.adb_port, results, "run", str(spec), "--no-live", "--json")
    try:
        started = eventually(lambda: all(_started_on(results, d) for d in ids.values()), 120)
        assert started, "runs never started on both phones"
        for phone in phones:
            phones.fault(phone, "hang")
        out, _ = farm.communicate(timeout=300)
    finally:
        if farm.poll() is None:
            farm.kill()
            farm.wait()
        phones.fault(lost, "recover")
    assert farm.returncode == 1, out  # the quarantined phone's runs could not run
    assert "Traceback" not in out, out
    with open_store(results) as store:
        runs = run_store.list_runs(store, "ladder")
        events = store_events.recent(store, "ladder", 200)
    by_phone = {d: [r.state for r in runs if r.device_id == d] for d in ids.values()}
    assert by_phone[ids[saved.serial]] == [RunState.DONE, RunState.DONE]
    assert RunState.DONE not in by_phone[ids[lost.serial]]

    def steps(device_id: str) -> list[str]:
        return [f"{e.kind}: {e.message}" for e in events if e.device_id == device_id]

    saved_steps = [s for s in steps(ids[saved.serial]) if s.startswith(("recovery", "recovered"))]
    assert saved_steps[0].startswith("recovery: reconnect"), saved_steps
    assert saved_steps[1].startswith("recovery: reboot"), saved_steps
    assert any(s.startswith("recovery: power-cycle: `") and "exited 0" in s for s in saved_steps), saved_steps
    assert saved_steps[-1] == "recovered: phone is back after: power-cycle", saved_steps
    lost_steps = steps(ids[lost.serial])
    assert any("power-cycle not possible" in s and "{state}" in s for s in lost_steps), lost_steps
    assert lost_steps[-1].startswith("quarantine: no more runs on this phone this sweep"), lost_steps

    listed = run_farm(phones.adb_port, results, "devices", "--json", "--no-probe")
    assert listed.returncode == 0, listed.stderr
    states = {d["id"]: (d["state"], d["error"]) for d in json.loads(listed.stdout)}
    state, reason = states[ids[lost.serial]]
    assert state == "quarantined" and "tried reconnect, reboot, power-cycle" in reason, states
    assert states[ids[saved.serial]][0] == "online"
