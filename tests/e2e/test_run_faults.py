"""Faults during `farm run` on virtual phones: a phone dropping off mid-run, a hung benchmark,
benchmark failures, Ctrl-C; charging is back on after every one of them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from farm.store import RunState
from farm.store import events as store_events
from farm.store import runs as run_store
from tests.e2e.farm_cli import fast_lstm, open_store, run_farm, start_farm, write_experiment

pytestmark = pytest.mark.integration

CHARGING_NODE = "/sys/class/power_supply/battery/charging_enabled"  # adreno-nexus6p: rooted
PROCESS_LIST = 'for p in /proc/[0-9]*; do tr "\\000" " " < "$p/cmdline" 2>/dev/null; echo; done'


def _farm_programs_running(device, name: str) -> list[str]:  # type: ignore[no-untyped-def]
    lines = device.shell(["sh", "-c", PROCESS_LIST]).splitlines()
    return [line for line in lines if line.startswith("/data/local/tmp/farm/bin/") and f"/{name} " in line]


def _wait_running(
    results: Path, experiment: str, process: subprocess.Popen[str], timeout_s: float = 90
) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        if (results / "farm.db").exists():
            with open_store(results) as store:
                running = run_store.list_runs(store, experiment, [RunState.RUNNING])
            if running:
                return running[0].run_id
        time.sleep(0.2)
    raise AssertionError("no run started")


def test_phone_disconnected_mid_run_is_retried_and_the_sweep_completes(
    virtual_phones, tmp_path: Path
) -> None:
    phones = virtual_phones(count=1, profiles=["adreno-sd8gen2"])
    results = tmp_path / "results"
    body = fast_lstm(
        "{hidden: [128, 129]}",
        "{warmup: 1, iterations: 3, min_seconds: 4, max_seconds: 20, repetitions: 1}",
        # about a millisecond per iteration: a few thousand iterations, not 10^5
        params="layers: 1, seq_len: 64, input_dim: 9, classes: 6, batch: 1, backend: cpu",
    )
    spec = write_experiment(tmp_path, "drop", body)
    farm = start_farm(phones.adb_port, results, "run", str(spec), "--no-live", "--json")
    try:
        _wait_running(results, "drop", farm)
        time.sleep(1.5)  # inside the benchmark
        phones.fault(phones[0], "disconnect")
        output, _ = farm.communicate(timeout=180)
    finally:
        if farm.poll() is None:
            farm.kill()
            farm.wait()
    assert farm.returncode == 0, output
    with open_store(results) as store:
        runs = run_store.list_runs(store, "drop")
        assert [r.state for r in runs] == [RunState.DONE, RunState.DONE]
        events = store_events.recent(store, "drop", 50)
        assert any(e.kind == "fault" for e in events)
        outcomes = [r["outcome"] for r in store.query("SELECT outcome FROM attempts ORDER BY started_at")]
        assert "lost" in outcomes and outcomes[-1] == "done"
        for run in runs:  # the benchmark's own memory, sampled by pid during the run
            peak = {m.name: m.value for m in run_store.get_metrics(store, run.run_id)}.get("rss_peak_mb")
            assert peak is not None and peak > 0


def test_spread_run_of_a_lost_phone_is_taken_by_an_equivalent_phone(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=2, profiles=["adreno-sd8gen2"])
    results = tmp_path / "results"
    body = fast_lstm(
        "{hidden: [128, 129, 130, 131]}",
        # Runs of 6 s: the phone goes away while the run just seen RUNNING still measures (with a
        # fixed pause before the fault, a run seen late in its 3 s once ended first, on that phone).
        "{warmup: 1, iterations: 3, min_seconds: 6, max_seconds: 20, repetitions: 1}",
        "devices: {spread: true}\n",
        params="layers: 1, seq_len: 64, input_dim: 9, classes: 6, batch: 1, backend: cpu",
    )
    spec = write_experiment(tmp_path, "spread", body)
    farm = start_farm(phones.adb_port, results, "run", str(spec), "--no-live", "--json")
    victim = None
    try:
        lost_run = _wait_running(results, "spread", farm)
        with open_store(results) as store:
            lost_phone = (run_store.get_run(store, lost_run) or pytest.fail("run vanished")).ran_on
        victim = next(p for p in phones if f"local/{p.serial}" == lost_phone)
        phones.fault(victim, "offline", 120)  # gone for longer than the whole sweep
        started = time.monotonic()
        output, _ = farm.communicate(timeout=180)
        elapsed = time.monotonic() - started
    finally:
        if farm.poll() is None:
            farm.kill()
            farm.wait()
        if victim is not None:
            phones.fault(victim, "recover")
    assert farm.returncode == 0, output
    assert elapsed < 100  # did not wait out the lost phone once nothing was left for it
    with open_store(results) as store:
        assert all(r.state is RunState.DONE for r in run_store.list_runs(store, "spread"))
        moved = run_store.get_run(store, lost_run)
        assert moved is not None and moved.ran_on != lost_phone and moved.attempts == 2


def test_hung_benchmark_killed_failures_kept_and_charging_back_on(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=1, profiles=["adreno-nexus6p"])
    results = tmp_path / "results"
    body = fast_lstm(
        # grouped order: the hung cell first, then one that fails (verify needs gpu), then one that works
        "{hidden: [2048, 8, 8], seq_len: [100000, 4, 4], verify: [false, true, false]}",
        "{warmup: 0, iterations: 1, min_seconds: 0, max_seconds: 600, repetitions: 1, order: grouped}",
        "zip: [[hidden, seq_len, verify]]\ntimeouts: {run_timeout_s: 3}\n"
        "retries: {max_attempts: 2, on: [timeout]}\n",
    ).replace("seq_len: 4, ", "")
    spec = write_experiment(tmp_path, "hang", body)
    done = run_farm(phones.adb_port, results, "run", str(spec), "--no-live", "--json")
    assert done.returncode == 1, done.stdout + done.stderr  # some runs failed
    assert json.loads(done.stdout)["done"] == 1
    with open_store(results) as store:
        runs = {
            r.factors["hidden"] if not r.factors["verify"] else "verify": r
            for r in run_store.list_runs(store, "hang")
        }
        hung, failing, fine = runs[2048], runs["verify"], runs[8]
        assert hung.state is RunState.FAILED and hung.attempts == 2 and "timed out" in (hung.reason or "")
        outcomes = [
            r["outcome"] for r in store.query("SELECT outcome FROM attempts WHERE run_id = ?", (hung.run_id,))
        ]
        assert outcomes == ["timeout", "timeout"]
        assert failing.state is RunState.FAILED and failing.attempts == 1  # a benchmark error is not retried
        assert "verify" in (results / (failing.artifacts_dir or "") / "stderr.txt").read_text()
        assert fine.state is RunState.DONE  # the phone served the next run
        for row in store.query("SELECT env_json FROM attempts"):
            assert json.loads(row["env_json"])["charging_restored"] is True
        assert store.query("SELECT COUNT(*) FROM devices WHERE charging_disabled = 1")[0][0] == 0
    device = phones[0].device(phones.client())
    assert _farm_programs_running(device, "lstm") == []
    assert device.shell(["cat", CHARGING_NODE]).strip() == "1"


def test_ctrl_c_restores_charging_and_requeues_the_run(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=1, profiles=["adreno-nexus6p"])
    results = tmp_path / "results"
    body = fast_lstm(
        "{hidden: [8]}", "{warmup: 1, iterations: 3, min_seconds: 30, max_seconds: 60, repetitions: 1}"
    )
    spec = write_experiment(tmp_path, "ctrlc", body)
    farm = start_farm(phones.adb_port, results, "run", str(spec), "--no-live")
    device = phones[0].device(phones.client())
    try:
        run_id = _wait_running(results, "ctrlc", farm)
        deadline = time.monotonic() + 30
        while not _farm_programs_running(device, "lstm"):
            assert time.monotonic() < deadline, "the benchmark never started"
            time.sleep(0.2)
        assert device.shell(["cat", CHARGING_NODE]).strip() == "0"  # charging is off while measuring
        os.kill(farm.pid, signal.SIGINT)
        output, _ = farm.communicate(timeout=60)
    finally:
        if farm.poll() is None:
            farm.kill()
            farm.wait()
    assert farm.returncode == 130, output
    # the line says how far it got and how to go on, not "retrying"
    assert "0/1 runs done; run the same command again to resume" in output
    assert "retrying" not in output
    assert device.shell(["cat", CHARGING_NODE]).strip() == "1"
    assert _farm_programs_running(device, "lstm") == []
    with open_store(results) as store:
        run = run_store.get_run(store, run_id)
        assert run is not None and run.state is RunState.PENDING and run.attempts == 0
        assert store.query("SELECT outcome FROM attempts")[0]["outcome"] == "interrupted"
        assert store.query("SELECT COUNT(*) FROM devices WHERE charging_disabled = 1")[0][0] == 0
