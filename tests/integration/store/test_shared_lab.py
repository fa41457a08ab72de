"""Several coordinators, one sweep, on a real PostgreSQL server and virtual phones.

Two `farm run` processes ("machines": each its own results folder) share one experiment over
overlapping phone sets; one is killed with -9 mid-sweep, the other takes its phones and runs over
and finishes; the restarted one resumes without redoing anything. Exactly-once is read from the
database (one `done` attempt per run). Then a coordinator reaching its phones over lab host
tunnels, one of whose sshd starts 20 s after the sweep: that host's phone joins the sweep.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from vphone.testing.waiting import eventually

from farm.store import RunState, Store, StoreLocation
from farm.store import runs as run_store
from tests.e2e.farm_cli import REPO, farm_argv, farm_env, fast_lstm, write_experiment
from tests.integration.remote.labs import cli_env, write_config

pytestmark = pytest.mark.integration

DEADLINE_S = 180.0
LATE_HOST_S = 20.0


def _spread(runs: int, min_seconds: float) -> str:
    sweep = "{hidden: [" + ", ".join(str(8 + i) for i in range(runs)) + "]}"
    measurement = f"{{warmup: 1, iterations: 3, min_seconds: {min_seconds}, max_seconds: 20, repetitions: 1}}"
    return fast_lstm(sweep, measurement, extra="devices: {spread: true}\n")


def _env(adb_port: int, results: Path) -> dict[str, str]:
    env = farm_env(adb_port, results)
    env["FARM_CONFIG_DIR"] = str(results.parent / "no-config")
    return env


def _start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        farm_argv(*args),
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _stop(*procs: subprocess.Popen[str]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def _query(url: str, sql: str, params: tuple[object, ...] = ()) -> list[dict[str, object]]:
    with Store(StoreLocation(Path("/nonexistent"), url), read_only=True) as store:
        return [dict(zip(row.keys(), row, strict=True)) for row in store.query(sql, params)]


def _execution_of(url: str, pid: int) -> int | None:
    rows = _query(url, "SELECT id FROM executions WHERE pid = ? ORDER BY id DESC", (pid,))
    return int(str(rows[0]["id"])) if rows else None


def _done_attempts(url: str, experiment: str) -> collections.Counter[str]:
    rows = _query(
        url,
        "SELECT a.run_id FROM attempts a JOIN runs r ON r.run_id = a.run_id "
        "WHERE r.experiment = ? AND a.outcome = 'done'",
        (experiment,),
    )
    return collections.Counter(str(r["run_id"]) for r in rows)


@pytest.fixture(scope="module")
def phones(module_virtual_phones):  # type: ignore[no-untyped-def]
    return module_virtual_phones(count=3)


def test_two_coordinators_share_a_sweep_and_one_killed_is_taken_over(
    phones, pg_url: str, tmp_path: Path
) -> None:
    spec = write_experiment(tmp_path, "shared", _spread(12, 1))
    a_sel, b_sel = f"{phones[0].serial},{phones[1].serial}", f"{phones[1].serial},{phones[2].serial}"
    env_a, env_b = _env(phones.adb_port, tmp_path / "a"), _env(phones.adb_port, tmp_path / "b")
    args = ("run", str(spec), "--no-live", "--json", "--results", pg_url)
    a = _start(env_a, *args, "--devices", a_sel)
    b = _start(env_b, *args, "--devices", b_sel)
    try:
        # Kill A with -9 while it has a run under way (and at least one done): mid-sweep.
        def a_mid_sweep() -> bool:
            assert a.poll() is None and b.poll() is None
            me = _execution_of(pg_url, a.pid)
            if me is None:
                return False
            rows = _query(pg_url, "SELECT state FROM runs WHERE execution_id = ?", (me,))
            done = _query(pg_url, "SELECT 1 FROM attempts WHERE execution_id = ? AND outcome = 'done'", (me,))
            return bool(done) and any(r["state"] == "RUNNING" for r in rows)

        assert eventually(a_mid_sweep, DEADLINE_S), "A never had a run under way"
        a_id = _execution_of(pg_url, a.pid)
        os.killpg(a.pid, signal.SIGKILL)
        a.communicate()
        # `farm status` names who holds what: B's phones, by host and pid.
        status = subprocess.run(
            farm_argv("status", "shared", "--json", "--results", pg_url),
            env=env_b,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert status.returncode == 0, status.stderr
        holders = {lease["pid"] for lease in json.loads(status.stdout)["leases"]}
        assert holders <= {b.pid}, holders  # A's leases died with it (same machine: pid gone)
        out, err = b.communicate(timeout=DEADLINE_S)
    finally:
        _stop(a, b)
    assert b.returncode == 0, out + err
    assert "Traceback" not in err, err
    summary = json.loads(out)
    assert summary["done"] == summary["planned"] == 12
    done = _done_attempts(pg_url, "shared")
    assert len(done) == 12 and set(done.values()) == {1}, done  # every run measured exactly once
    takeovers = _query(pg_url, "SELECT message FROM events WHERE kind = 'takeover'")
    assert takeovers, "B never requeued the killed coordinator's run"
    interrupted = _query(
        pg_url, "SELECT run_id FROM attempts WHERE execution_id = ? AND outcome = 'interrupted'", (a_id,)
    )
    assert interrupted  # A's run in flight was closed, not counted, and done again by B
    for row in interrupted:
        assert done[str(row["run_id"])] == 1
    # Only B's phones after the kill: never A's own phones[0], which B cannot reach.
    after = _query(
        pg_url,
        "SELECT DISTINCT device_id FROM attempts WHERE execution_id <> ? AND outcome = 'done'",
        (a_id,),
    )
    assert {r["device_id"] for r in after} <= {f"local/{p.serial}" for p in phones[1:]}

    # The killed coordinator restarted: nothing left to redo, nothing redone.
    attempts_before = _query(pg_url, "SELECT COUNT(*) AS n FROM attempts")[0]["n"]
    again = subprocess.run(
        farm_argv(*args, "--devices", a_sel),
        env=env_a,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["done"] == 12
    assert _query(pg_url, "SELECT COUNT(*) AS n FROM attempts")[0]["n"] == attempts_before
    # Every DONE run has its metrics now: one A finished just before the kill gets them from A's
    # own run folder at its restart (only A's machine has that folder).
    metrics = _query(pg_url, "SELECT run_id, COUNT(*) AS n FROM metrics GROUP BY run_id")
    assert len(metrics) == 12
    with Store(StoreLocation(tmp_path / "a", pg_url), read_only=True) as store:
        assert {r.state for r in run_store.list_runs(store, "shared")} == {RunState.DONE}


def test_a_lab_host_that_comes_up_late_joins_a_shared_sweep(
    lab_hosts, phones, pg_url: str, tmp_path: Path
) -> None:
    local = phones[:1]
    lab1 = lab_hosts("lab1", "127.0.0.2", phones=1)
    lab2 = lab_hosts("lab2", "127.0.0.3", phones=1)
    lab2.sshd.stop()  # down when the sweep starts
    config = tmp_path / "config"
    write_config(config, [lab1, lab2], local=False)
    # More runs than two phones finish before a late host joins, even on a loaded machine: the test
    # stops both coordinators once the late phone has finished one.
    spec = write_experiment(tmp_path, "late", _spread(120, 2))
    args = ("run", str(spec), "--no-live", "--json", "--results", pg_url)
    here = _start(_env(phones.adb_port, tmp_path / "here"), *args, "--devices", local[0].serial)
    remote = _start(cli_env(config, tmp_path / "home", phones.adb_port, tmp_path / "there"), *args)
    lab2_phone = f"lab2/{lab2.phones[0].serial}"
    try:
        time.sleep(LATE_HOST_S)  # when the fault happens (lab2's sshd starts), not a wait for an event
        lab2.sshd.start()

        def lab2_done() -> bool:
            assert here.poll() is None and remote.poll() is None, "the sweep ended before lab2 joined"
            return bool(
                _query(
                    pg_url,
                    "SELECT 1 FROM attempts WHERE device_id = ? AND outcome = 'done'",
                    (lab2_phone,),
                )
            )

        assert eventually(lab2_done, DEADLINE_S), "lab2's phone never finished a run"
        for proc in (here, remote):  # enough shown: stop both the clean way (Ctrl-C)
            os.killpg(proc.pid, signal.SIGINT)
        outputs = [proc.communicate(timeout=DEADLINE_S) for proc in (here, remote)]
    finally:
        _stop(here, remote)
    for proc, (out, err) in zip((here, remote), outputs, strict=True):
        assert proc.returncode == 130, out + err
        assert "Traceback" not in err, err
    ran_on = {r["device_id"] for r in _query(pg_url, "SELECT device_id FROM attempts WHERE outcome = 'done'")}
    assert {f"local/{local[0].serial}", f"lab1/{lab1.phones[0].serial}", lab2_phone} <= ran_on
    done = _done_attempts(pg_url, "late")
    assert set(done.values()) == {1}, done  # none twice
    joined = _query(pg_url, "SELECT 1 FROM events WHERE kind = 'joined' AND device_id = ?", (lab2_phone,))
    assert joined
    assert not _query(pg_url, "SELECT 1 FROM runs WHERE state = 'RUNNING'")  # both stopped cleanly
