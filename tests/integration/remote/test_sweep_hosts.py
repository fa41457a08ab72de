"""`farm run` across the local adb server and two lab hosts reached over SSH (real sshd, their own
adb servers and phones): every run is stored once, devices are `host/serial`; and a lab host whose
sshd stops mid-sweep gets its runs done after sshd is back while the other hosts keep running."""

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


@pytest.fixture(scope="module")
def labs(lab_hosts):
    return [lab_hosts("lab1", "127.0.0.2", phones=1), lab_hosts("lab2", "127.0.0.3", phones=1)]


def _farm(env: dict[str, str], *args: str, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "farm", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def _expected_ids(local_phones, labs) -> set[str]:
    ids = {f"local/{p.serial}" for p in local_phones}
    return ids | {f"{lab.name}/{p.serial}" for lab in labs for p in lab.phones}


def test_sweep_over_local_and_two_lab_hosts_stores_every_run_once(
    labs, virtual_phones, tmp_path: Path
) -> None:
    local = virtual_phones(count=1)
    config_dir = tmp_path / "config"
    write_config(config_dir, labs)
    env = cli_env(config_dir, tmp_path / "home", local.adb_port, tmp_path / "results")
    spec = write_experiment(tmp_path, "spread", fast_lstm([8]))

    hosts = _farm(env, "hosts", "--json")
    assert hosts.returncode == 0, hosts.stderr
    rows = {r["name"]: r for r in json.loads(hosts.stdout)}
    assert {n: (r["state"], r["phones"]) for n, r in rows.items()} == {
        "local": ("up", 1),
        "lab1": ("up", 1),
        "lab2": ("up", 1),
    }
    assert rows["lab1"]["rtt_ms"] > 0
    listed = _farm(env, "devices", "--json", "--no-probe")
    assert listed.returncode == 0, listed.stderr
    assert {(d["id"], d["state"]) for d in json.loads(listed.stdout)} == {
        (device_id, "online") for device_id in _expected_ids(local, labs)
    }

    # A host's config tags are its phones' tags: `devices: {tags: [...]}` picks lab1's phone only.
    (config_dir / "farm.yaml").write_text(
        "hosts:\n" + labs[0].config_entry(tags="[rack-a]") + labs[1].config_entry()
    )
    tagged = write_experiment(tmp_path, "tagged", fast_lstm([8]) + "devices: {tags: [rack-a]}\n")
    dry = _farm(env, "run", str(tagged), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["phones"] == [f"lab1/{labs[0].phones[0].serial}"]

    done = _farm(env, "run", str(spec), "--no-live", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    expected = _expected_ids(local, labs)
    assert set(summary["phones"]) == expected
    assert summary["done"] == summary["planned"] == 3

    with open_store(tmp_path / "results") as store:
        runs = run_store.list_runs(store, "spread")
        assert {r.state for r in runs} == {RunState.DONE}
        assert Counter(r.ran_on for r in runs) == dict.fromkeys(expected, 1)
        done_attempts = store.query(
            "SELECT run_id, COUNT(*) AS n FROM attempts WHERE outcome = 'done' GROUP BY run_id"
        )
        assert {row["run_id"]: row["n"] for row in done_attempts} == {r.run_id: 1 for r in runs}


HIDDEN_OUTAGE = [8, 16, 24, 32]  # a run per phone each: the others still have runs ahead when lab2 goes


def test_lab_host_sshd_stopped_mid_sweep_its_runs_wait_and_finish(
    labs, virtual_phones, tmp_path: Path
) -> None:
    local = virtual_phones(count=1)
    config_dir = tmp_path / "config"
    write_config(config_dir, labs)
    results = tmp_path / "results"
    env = cli_env(config_dir, tmp_path / "home", local.adb_port, results)
    spec = write_experiment(
        tmp_path,
        "outage",
        fast_lstm(HIDDEN_OUTAGE, max_attempts=4),
    )
    lab2 = labs[1]
    lab2_id = f"lab2/{lab2.phones[0].serial}"
    others = _expected_ids(local, labs) - {lab2_id}
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
        # Pull lab2 while its first run is under way, so the other phones still have runs ahead.
        wait_for(lambda: attempts_on(results, lab2_id) >= 1, 120, "a first run started on lab2")
        lab2.sshd.stop()
        try:
            time.sleep(1.0)  # a run whose last adb call just finished may still be storing its result
            before = done_by_phone(results, "outage")
            # While lab2 is away, the other hosts' phones finish every run of theirs (waiting for all
            # of them, not for "one more", holds however far they had got when lab2 went) ...
            wait_for(
                lambda: all(done_by_phone(results, "outage")[d] == len(HIDDEN_OUTAGE) for d in others),
                120,
                "the other hosts' phones to finish their runs while lab2 is down",
            )
            # ... and lab2's phone finishes none.
            assert done_by_phone(results, "outage")[lab2_id] == before[lab2_id]
            assert farm.poll() is None
        finally:
            lab2.sshd.start()
        out, err = farm.communicate(timeout=180)
    finally:
        if farm.poll() is None:
            farm.kill()
            farm.wait()
    assert farm.returncode == 0, out + err
    assert "Traceback" not in err, err
    assert json.loads(out)["done"] == 3 * len(HIDDEN_OUTAGE)
    with open_store(results) as store:
        runs = run_store.list_runs(store, "outage")
        assert {r.state for r in runs} == {RunState.DONE}
        assert Counter(r.ran_on for r in runs) == dict.fromkeys(
            _expected_ids(local, labs), len(HIDDEN_OUTAGE)
        )
        done_attempts = store.query("SELECT COUNT(*) FROM attempts WHERE outcome = 'done'")[0][0]
        assert done_attempts == len(runs)
        kinds = {e.kind for e in store_events.recent(store, "outage", 200) if e.device_id == lab2_id}
        assert "recovered" in kinds
        for other in others:
            assert not [
                e
                for e in store_events.recent(store, "outage", 200)
                if e.device_id == other and e.kind == "fault"
            ]
