"""`farm run` on virtual phones against a shared PostgreSQL store and against a store that fails
mid-sweep: the server going away (the finished run is kept and stored at the next start, nothing
redone) and a full disk (the sweep stops cleanly); charging is back on after each. And a report
made on "another machine" (another results folder) from the database alone."""

from __future__ import annotations

import collections
import os
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from farm.store import RunState, Store, StoreLocation
from farm.store import events as store_events
from farm.store import runs as run_store
from tests.e2e.farm_cli import farm_argv, farm_env, fast_lstm, write_experiment
from tests.fixtures.postgres import PostgresServer
from tests.integration.store.conftest import Tmpfs

pytestmark = pytest.mark.integration

CHARGING_NODE = "/sys/class/power_supply/battery/charging_enabled"  # adreno-nexus6p: rooted
DEADLINE_S = 120.0
PROCESS_LIST = 'for p in /proc/[0-9]*; do tr "\\000" " " < "$p/cmdline" 2>/dev/null; echo; done'


def _wait_benchmark(device, proc: subprocess.Popen[str]) -> None:  # type: ignore[no-untyped-def]
    """Until the benchmark program itself runs on the phone (past every store write of the start)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        lines = device.shell(["sh", "-c", PROCESS_LIST]).splitlines()
        if any(line.startswith("/data/local/tmp/farm/bin/") and "/lstm " in line for line in lines):
            return
        time.sleep(0.1)
    pytest.fail("the benchmark never started")


# Runs long enough that a fault lands inside one (the benchmark is seen running before it).
SLOW_RUNS = "{warmup: 1, iterations: 3, min_seconds: 2, max_seconds: 20, repetitions: 1}"
SHORT_RUNS = "{warmup: 1, iterations: 3, min_seconds: 1, max_seconds: 20, repetitions: 1}"


def _env(adb_port: int, results: Path) -> dict[str, str]:
    env = farm_env(adb_port, results)
    env["FARM_CONFIG_DIR"] = str(results.parent / "no-config")
    return env


def _farm(adb_port: int, results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        farm_argv(*args),
        env=_env(adb_port, results),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _start(adb_port: int, results: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        farm_argv(*args),
        env=_env(adb_port, results),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_states(where: StoreLocation, experiment: str, done: int, proc: subprocess.Popen[str]) -> None:
    """Until `done` runs are DONE and one more is RUNNING (the benchmark of the next is under way)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if where.url is not None or where.sqlite_path.exists():
            with Store(where, read_only=True) as store:
                counts = run_store.count_states(store, experiment)
            if counts[RunState.DONE] >= done and counts[RunState.RUNNING] == 1:
                return
        time.sleep(0.2)
    pytest.fail(f"never {done} DONE and one RUNNING")


def _done_attempts(where: StoreLocation, experiment: str) -> collections.Counter[str]:
    with Store(where, read_only=True) as store:
        rows = store.query(
            "SELECT a.run_id FROM attempts a JOIN runs r ON r.run_id = a.run_id "
            "WHERE r.experiment = ? AND a.outcome = 'done'",
            (experiment,),
        )
    return collections.Counter(r["run_id"] for r in rows)


def test_a_sweep_on_postgresql_and_a_report_from_another_machine(
    virtual_phones, pg_url: str, tmp_path: Path
) -> None:
    phones = virtual_phones(count=2)
    here = tmp_path / "coordinator"
    spec = write_experiment(tmp_path, "shared", fast_lstm("{hidden: [8, 9]}"))
    ran = _farm(phones.adb_port, here, "run", str(spec), "--no-live", "--json", "--results", pg_url)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert not (here / "farm.db").exists()  # the database is the server; only run folders are here
    location = StoreLocation(here, pg_url)
    with Store(location, read_only=True) as store:
        runs = run_store.list_runs(store, "shared")
        assert len(runs) == 4 and {r.state for r in runs} == {RunState.DONE}
        assert all((here / (r.artifacts_dir or "-") / "env.json").is_file() for r in runs)
        folders = {r["results_dir"] for r in store.query("SELECT results_dir FROM executions")}
        assert folders == {str(here.resolve())}
    # Another machine: its own (empty) results folder, the same database.
    elsewhere = tmp_path / "laptop"
    report = _farm(phones.adb_port, elsewhere, "report", "shared", "--results", pg_url, "--format", "md")
    assert report.returncode == 0, report.stderr
    note = [line for line in report.stderr.splitlines() if "not on this machine" in line]
    assert len(note) == 1 and note[0].startswith("farm: 4 run folder(s)"), report.stderr
    assert f"{socket.gethostname()}:{here.resolve()}/shared/" in note[0]
    markdown = (elsewhere / "shared" / "report.md").read_text()
    assert "not on this machine" in markdown and "latency" in markdown


def test_server_gone_mid_sweep_stops_cleanly_and_the_finished_run_is_not_redone(
    virtual_phones, postgres_server: PostgresServer, pg_url: str, tmp_path: Path
) -> None:
    phones = virtual_phones(count=1, profiles=["adreno-nexus6p"])
    results = tmp_path / "results"
    location = StoreLocation(results, pg_url)
    spec = write_experiment(tmp_path, "outage", fast_lstm("{hidden: [8, 9]}", SLOW_RUNS))
    farm = _start(phones.adb_port, results, "run", str(spec), "--no-live", "--results", pg_url)
    device = phones[0].device(phones.client())
    try:
        _wait_states(location, "outage", 1, farm)
        with Store(location, read_only=True) as store:
            in_flight = run_store.list_runs(store, "outage", [RunState.RUNNING])[0].run_id
        _wait_benchmark(device, farm)
        postgres_server.stop()
        try:
            _, stderr = farm.communicate(timeout=DEADLINE_S)
        finally:
            postgres_server.start()
    finally:
        if farm.poll() is None:
            os.killpg(farm.pid, 9)
            farm.wait()
    assert farm.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert "Traceback" not in stderr and "not reachable" in lines[-1], stderr
    assert device.shell(["cat", CHARGING_NODE]).strip() == "1"  # charging back on
    kept = results / "outage" / in_flight / "pending-result.json"
    assert kept.is_file()  # the run measured while the server was down, kept beside its traces
    again = _farm(phones.adb_port, results, "run", str(spec), "--no-live", "--json", "--results", pg_url)
    assert again.returncode == 0, again.stdout + again.stderr
    done = _done_attempts(location, "outage")
    assert len(done) == 2 and set(done.values()) == {1}, done  # each run measured exactly once
    with Store(location, read_only=True) as store:
        assert len(store.query("SELECT 1 FROM attempts WHERE run_id = ?", (in_flight,))) == 1
        assert store.query("SELECT COUNT(*) FROM devices WHERE charging_disabled = 1")[0][0] == 0
    assert not kept.exists()


def test_full_disk_mid_sweep_stops_cleanly_and_a_rerun_finishes(
    virtual_phones, tiny_tmpfs: Callable[[str], Tmpfs], tmp_path: Path
) -> None:
    phones = virtual_phones(count=1, profiles=["adreno-nexus6p"])
    fs = tiny_tmpfs("96m")  # a run writes ~12 MB of benchmark lines
    location = StoreLocation(fs.path)
    spec = write_experiment(tmp_path, "full", fast_lstm("{hidden: [8, 9]}", SHORT_RUNS))
    farm = _start(phones.adb_port, fs.path, "run", str(spec), "--no-live", "--results", str(fs.path))
    filler = fs.path / "filler"
    try:
        _wait_states(location, "full", 1, farm)
        fs.fill()
        _, stderr = farm.communicate(timeout=DEADLINE_S)
    finally:
        if farm.poll() is None:
            os.killpg(farm.pid, 9)
            farm.wait()
    assert farm.returncode == 2, stderr
    assert "Traceback" not in stderr and "Exception in thread" not in stderr, stderr
    assert "disk full" in stderr.strip().splitlines()[-1] and str(fs.path) in stderr, stderr
    device = phones[0].device(phones.client())
    assert device.shell(["cat", CHARGING_NODE]).strip() == "1"
    filler.unlink()
    again = _farm(
        phones.adb_port, fs.path, "run", str(spec), "--no-live", "--json", "--results", str(fs.path)
    )
    assert again.returncode == 0, again.stdout + again.stderr
    done = _done_attempts(location, "full")
    assert len(done) == 2 and set(done.values()) == {1}, done
    with Store(location, read_only=True) as store:
        assert run_store.count_states(store, "full")[RunState.DONE] == 2


def test_resume_retries_lost_runs_and_retry_failed_the_rest_never_done_ones(
    virtual_phones, tmp_path: Path
) -> None:
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    location = StoreLocation(results)
    spec = write_experiment(tmp_path, "retry", fast_lstm("{hidden: [8, 9, 10]}"))
    first = _farm(phones.adb_port, results, "run", str(spec), "--no-live", "--json")
    assert first.returncode == 0, first.stdout + first.stderr
    with Store(location) as store:  # as two disconnects, and a benchmark error, would have left them
        kept, lost, failed = (r.run_id for r in run_store.list_runs(store, "retry"))
        for run_id, outcome in ((lost, "lost"), (failed, "failed")):
            store.execute(
                "UPDATE runs SET state = 'FAILED', attempts = 2, reason = ? WHERE run_id = ?",
                (outcome, run_id),
            )
            store.execute("UPDATE attempts SET outcome = ? WHERE run_id = ?", (outcome, run_id))
    resumed = _farm(phones.adb_port, results, "run", str(spec), "--no-live", "--json")
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # the benchmark failure stays
    with Store(location, read_only=True) as store:
        states = {r.run_id: r.state for r in run_store.list_runs(store, "retry")}
        assert states == {kept: RunState.DONE, lost: RunState.DONE, failed: RunState.FAILED}
    retried = _farm(phones.adb_port, results, "run", str(spec), "--no-live", "--json", "--retry-failed")
    assert retried.returncode == 0, retried.stdout + retried.stderr
    done = _done_attempts(location, "retry")
    assert done == {kept: 1, lost: 1, failed: 1}  # each DONE once; the kept run never redone
    with Store(location, read_only=True) as store:
        assert len(store.query("SELECT 1 FROM attempts WHERE run_id = ?", (kept,))) == 1
        events = [e.message for e in store_events.recent(store, "retry", 50) if e.kind == "retry"]
        assert any("1 lost (phone gone) run(s) requeued" in m for m in events), events
        assert any("1 failed run(s) requeued" in m for m in events), events
