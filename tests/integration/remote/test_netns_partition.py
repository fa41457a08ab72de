"""A lab host in its own network namespace (a separate machine as far as farm can tell: its sshd
on port 22 of another address, its adb server unreachable except through SSH). Pulling its network
cable mid-sweep (no FIN, no RST: packets vanish) takes its phone offline until the cable is back;
its runs then finish, and the local phone's runs go on meanwhile."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from farm.store import RunState
from farm.store import events as store_events
from farm.store import runs as run_store
from tests.integration.remote.labs import (
    REPO,
    attempts_on,
    cli_env,
    done_by_phone,
    fast_lstm,
    open_store,
    wait_for,
    write_config,
    write_experiment,
)

pytestmark = pytest.mark.integration
UNPLUGGED_S = 6.0
# Runs per phone, each measuring at least RUN_S: enough that the local phone still has some ahead
# when the far one's first run starts (its SSH set-up and deploy take a few seconds the local phone
# spends running; a run's own overhead is a fraction of a second since the run script).
HIDDEN = [8, 16, 24, 32, 40, 48]
RUN_S = 2.0


@pytest.fixture(scope="module")
def far(netns_lab_hosts):
    return netns_lab_hosts("far", phones=1)


def test_pulled_cable_mid_sweep_waits_and_finishes(far, virtual_phones, tmp_path: Path) -> None:
    local = virtual_phones(count=1)
    config = tmp_path / "config"
    write_config(config, [far])
    results = tmp_path / "results"
    env = cli_env(config, tmp_path / "home", local.adb_port, results)
    spec = write_experiment(tmp_path, "cable", fast_lstm(HIDDEN, min_seconds=RUN_S, max_attempts=4))
    far_id, local_id = f"far/{far.phones[0].serial}", f"local/{local[0].serial}"

    farm = subprocess.Popen(
        [sys.executable, "-m", "farm", "run", str(spec), "--no-live", "--json"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        # Unplug while the far phone's first run is under way: the local phone still has runs ahead.
        wait_for(lambda: attempts_on(results, far_id) >= 1 or farm.poll() is not None, 120, "a far run")
        assert farm.poll() is None, farm.communicate()
        far.cable(False)
        unplugged = time.monotonic()
        try:
            time.sleep(1.0)  # a run whose last adb call just finished may still be storing its result
            before = done_by_phone(results, "cable")
            assert before[local_id] < len(HIDDEN), f"the local phone finished before the unplug: {before}"
            wait_for(
                lambda: done_by_phone(results, "cable")[local_id] > before[local_id],
                60,
                "local progress while unplugged",
            )
            # Past the keepalive probe (1 s + 2 s answer timeout): a shorter blip is ridden out by
            # TCP itself, without dropping anything, which is right but not what this test is about.
            time.sleep(max(0.0, UNPLUGGED_S - (time.monotonic() - unplugged)))
            assert done_by_phone(results, "cable")[far_id] == before[far_id]
        finally:
            far.cable(True)
        out, err = farm.communicate(timeout=180)
    finally:
        if farm.poll() is None:
            farm.kill()
            farm.wait()
    assert farm.returncode == 0, out + err
    assert "Traceback" not in err, err
    assert json.loads(out)["done"] == 2 * len(HIDDEN)
    with open_store(results) as store:
        runs = run_store.list_runs(store, "cable")
        assert Counter(r.ran_on for r in runs if r.state is RunState.DONE) == {
            far_id: len(HIDDEN),
            local_id: len(HIDDEN),
        }
        events = store_events.recent(store, "cable", 200)
        assert "recovered" in {e.kind for e in events if e.device_id == far_id}
        assert not [e for e in events if e.device_id == local_id and e.kind == "fault"]
