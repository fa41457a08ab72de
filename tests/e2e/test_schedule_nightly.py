"""`farm schedule run` twice on a tiny experiment with a virtual phone: every night is its own
experiment with its own runs; `farm regress` judges the newest night against the earlier ones;
`farm schedule daemon --once` fires a due slot; SIGTERM stops an idle daemon at once; a slot a
daemon killed with -9 left running is recovered as abandoned on the next start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from farm.store import Metric, RunState
from farm.store import events as store_events
from farm.store import runs as run_store
from farm.store.runs import PlannedRun
from tests.e2e.farm_cli import fast_lstm, open_store, run_farm, start_farm, write_experiment

pytestmark = pytest.mark.integration

EARLIER_NIGHTS = 5
# No idle power baseline (seconds per phone, and energy is not what this test is about).
TINY = fast_lstm()
SEEDED_SCALE = 0.1  # earlier nights were ten times as fast: the real nights are a +900 % step
# (a step far above the run-to-run noise of a 2 us latency on a loaded host, seen at +-45 %)
CHARGING_NODE = "/sys/class/power_supply/battery/charging_enabled"  # adreno-nexus6p, rooted


def _config(folder: Path, spec: Path, cron: str = "0 3 * * *", name: str = "tiny-nightly") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            schedules:
              - name: {name}
                experiment: {spec.name}
                cron: "{cron}"
                max_runtime_s: 120
            """
        )
    )
    return path


def _seed_earlier_nights(results: Path, template_night: str) -> None:
    """History before the real nights: the first real night's cells and metrics, scaled."""
    with open_store(results) as store:
        runs = run_store.list_runs(store, template_night)
        for night in range(EARLIER_NIGHTS):
            name = f"tiny--2020010{night + 1}-020000"
            run_store.save_experiment(store, name, "{}", "0" * 64, "seeded")
            planned = [
                PlannedRun(
                    f"seed{night}-{r.run_id}",
                    r.cell_id,
                    tuple(r.factors.items()),
                    r.repetition,
                    r.device_id,
                    i,
                )
                for i, r in enumerate(runs)
            ]
            run_store.insert_planned(store, name, planned)
            for run, seeded in zip(runs, planned, strict=True):
                store.execute("UPDATE runs SET state = 'DONE' WHERE run_id = ?", (seeded.run_id,))
                latency = next(
                    m for m in run_store.get_metrics(store, run.run_id) if m.name == "latency_median_ms"
                )
                assert latency.measured
                run_store.put_metrics(
                    store, seeded.run_id, [Metric(latency.name, latency.value * SEEDED_SCALE, "ms")]
                )


def test_two_nights_are_separate_points_and_a_step_is_flagged(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=1, profiles=["adreno-nexus6p"])
    results = tmp_path / "results"
    spec = write_experiment(tmp_path, "tiny", TINY)
    config = _config(tmp_path, spec)

    first = run_farm(phones.adb_port, results, "schedule", "run", "tiny-nightly", "--config", str(config))
    assert first.returncode == 0, first.stdout + first.stderr
    listed = run_farm(phones.adb_port, results, "schedule", "list", "--json", "--config", str(config))
    (entry,) = json.loads(listed.stdout)
    night_one = entry["last"]["experiment"]
    assert entry["last"]["outcome"] == "ok" and entry["last"]["done"] == 1
    assert night_one.startswith("tiny--") and entry["next_fire"].endswith("03:00:00+00:00")
    assert (results / "schedules" / "tiny-nightly" / f"{night_one}.yaml").is_file()

    _seed_earlier_nights(results, night_one)
    second = run_farm(phones.adb_port, results, "schedule", "run", "tiny-nightly", "--config", str(config))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "REGRESSION latency_median_ms" in second.stdout  # flagged by the run itself

    with open_store(results) as store:
        firing = store.query("SELECT * FROM schedule_firings ORDER BY id DESC LIMIT 1")[0]
        night_two = firing["experiment"]
        assert night_two != night_one and firing["outcome"] == "ok" and firing["regressions"] >= 1
        one, two = (run_store.list_runs(store, night) for night in (night_one, night_two))
        assert len(one) == len(two) == 1 and one[0].run_id != two[0].run_id  # fresh runs, not a resume
        assert one[0].state is two[0].state is RunState.DONE
        events = [e for e in store_events.recent(store, night_two) if e.kind == "regression"]
        assert events and "latency_median_ms regression" in events[0].message

    flagged = run_farm(phones.adb_port, results, "regress", "tiny", "--threshold-pct", "20", "--json")
    assert flagged.returncode == 1, flagged.stdout + flagged.stderr
    report = json.loads(flagged.stdout)
    assert (
        report["nightlies"][-2:] == [night_one, night_two] and len(report["nightlies"]) == EARLIER_NIGHTS + 2
    )
    (regression,) = [r for r in report["regressions"] if r["metric"] == "latency_median_ms"]
    assert regression["new_series"] == night_two and regression["history_n"] == EARLIER_NIGHTS + 1
    assert regression["change_pct"] > 20
    # the same step under a threshold above it is not flagged
    lenient = run_farm(phones.adb_port, results, "regress", "tiny", "--threshold-pct", "100000")
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    assert "0 regression(s)" in lenient.stdout

    # the daemon, one pass, a new schedule with a slot every minute: the current minute is due
    every_minute = _config(tmp_path, spec, cron="* * * * *", name="tiny-minutely")
    once = run_farm(phones.adb_port, results, "schedule", "daemon", "--once", "--config", str(every_minute))
    assert once.returncode == 0, once.stdout + once.stderr
    assert "tiny-minutely: ok" in once.stdout
    with open_store(results) as store:
        assert store.query("SELECT COUNT(*) AS n FROM schedule_firings WHERE trigger = 'cron'")[0]["n"] == 1


def test_sigterm_stops_an_idle_daemon_cleanly(tmp_path: Path, adb_server) -> None:
    spec = write_experiment(tmp_path, "tiny", TINY)
    config = _config(tmp_path, spec, cron="0 3 1 1 *")
    daemon = start_farm(adb_server.port, tmp_path / "results", "schedule", "daemon", "--config", str(config))
    try:
        assert daemon.stdout is not None
        assert "next: tiny-nightly at" in daemon.stdout.readline()
        daemon.send_signal(signal.SIGTERM)
        output, _ = daemon.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()
        raise
    assert daemon.returncode == 0
    assert "stopped" in output


def test_max_runtime_stops_the_nightly_cleanly(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=1, profiles=["adreno-nexus6p"])
    results = tmp_path / "results"
    # Runs far longer than the limit, and a limit long enough for probing and planning on a
    # loaded host (at 4 s with 1 s runs, the limit once fell before the plan was stored: no
    # pending run to see).
    long_runs = (
        "benchmark: {program: idle, params: {seconds: 60}}\n"
        "measurement: {warmup: 0, iterations: 1, min_seconds: 0, max_seconds: 90, repetitions: 3}\n"
        "telemetry: {idle_baseline_s: 0}\n"
        "conditions: {cooldown: {max_temp_c: 90, timeout_s: 5}, min_battery_pct: 1}\n"
    )
    spec = write_experiment(tmp_path, "long", long_runs)
    config = tmp_path / "farm.yaml"
    entry = f"{{name: long-nightly, experiment: {spec.name}, cron: '0 3 * * *', max_runtime_s: 10}}"
    config.write_text(f"schedules:\n  - {entry}\n")
    stopped = run_farm(phones.adb_port, results, "schedule", "run", "long-nightly", "--config", str(config))
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert "long-nightly: timeout" in stopped.stdout and "max_runtime_s=10" in stopped.stdout
    with open_store(results) as store:
        firing = store.query("SELECT * FROM schedule_firings")[0]
        assert firing["outcome"] == "timeout" and firing["pending"] > 0
        states = {r.state for r in run_store.list_runs(store, firing["experiment"])}
        assert RunState.RUNNING not in states and RunState.PENDING in states
        assert store.query("SELECT COUNT(*) AS n FROM leases")[0]["n"] == 0  # the phone is free again
        execution = store.query("SELECT status FROM executions ORDER BY id DESC LIMIT 1")[0]
        assert execution["status"] == "interrupted"
    (phone,) = phones
    assert phone.device(phones.client()).shell(["cat", CHARGING_NODE]).strip() == "1"  # restored


def _firings(results: Path) -> list[dict[str, object]]:
    with open_store(results) as store:
        return [dict(row) for row in store.query("SELECT * FROM schedule_firings ORDER BY id")]


def _running_slot(results: Path) -> bool:
    return (results / "farm.db").exists() and any(f["outcome"] == "running" for f in _firings(results))


def test_a_slot_left_running_by_a_daemon_killed_with_9_is_recovered_on_the_next_start(
    tmp_path: Path, adb_server
) -> None:
    # No phone on this adb server: the nightly waits for one (it retries every minute), so the
    # daemon is inside its slot when it is killed.
    spec = write_experiment(tmp_path, "tiny", TINY)
    results = tmp_path / "results"
    config = tmp_path / "farm.yaml"
    entry = (
        f"{{name: waits, experiment: {spec.name}, cron: '* * * * *', catch_up: run_once, max_runtime_s: 900}}"
    )
    config.write_text(f"schedules:\n  - {entry}\n")
    daemon = start_farm(adb_server.port, results, "schedule", "daemon", "--config", str(config))
    try:
        deadline = time.monotonic() + 120
        while not _running_slot(results):
            assert daemon.poll() is None, daemon.stdout.read() if daemon.stdout else ""
            assert time.monotonic() < deadline, "the daemon never started its slot"
            time.sleep(0.2)
        os.kill(daemon.pid, signal.SIGKILL)
        daemon.wait(timeout=30)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    (left,) = [f for f in _firings(results) if f["outcome"] == "running"]
    assert left["experiment"], left  # the nightly it was running

    # The next start (here: one pass, with a schedule that has nothing due) recovers it.
    config.write_text(f"schedules:\n  - {{name: waits, experiment: {spec.name}, cron: '0 3 1 1 *'}}\n")
    again = run_farm(adb_server.port, results, "schedule", "daemon", "--once", "--config", str(config))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "was left running by a farm process that is gone" in again.stdout
    firing = next(f for f in _firings(results) if f["id"] == left["id"])
    assert firing["outcome"] == "abandoned" and firing["finished_at"] is not None
    assert firing["pending"] == 0  # no run had been planned: no phone ever came
    with open_store(results) as store:
        owners = store.query("SELECT status FROM executions WHERE experiment = ?", (left["experiment"],))
    assert [row["status"] for row in owners] == ["crashed"]
    listed = run_farm(adb_server.port, results, "schedule", "list", "--config", str(config))
    assert "abandoned" in listed.stdout, listed.stdout + listed.stderr
