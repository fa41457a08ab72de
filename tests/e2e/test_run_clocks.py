"""Clock control through `farm run` on virtual phones: pinned on a rooted phone and restored
after the run and after `kill -9` of farm; an unrooted phone that cannot do a required pin is
skipped with one line; per-run validity flags and the clocks are stored; on the virtual SoC
(vphone/src/vphone/clocks.py: clocks that set the phone's speed, fixed performance mode, heat) pinned
min is slower than max, fixed performance mode is applied, a hot phone throttles (retry), and a
sustained run records its drift."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from vphone.profiles import load_profile

from farm.device.session import DeviceSession
from farm.store import RunState
from farm.store import devices as device_store
from farm.store import events as store_events
from farm.store import runs as run_store
from tests.e2e.farm_cli import fast_lstm, open_store, run_farm, start_farm, write_experiment

pytestmark = pytest.mark.integration


POLICY = "/sys/devices/system/cpu/cpufreq/policy0"  # adreno-nexus6p: 384000 .. 1555200 kHz


def _max_khz(phones, phone) -> str:  # type: ignore[no-untyped-def]
    session = DeviceSession(phone.device(phones.client()), "local/x", default_timeout_s=20)
    return (session.read_text(f"{POLICY}/scaling_max_freq") or "").strip()


def _env(results: Path, run: run_store.StoredRun) -> dict[str, object]:
    return json.loads((results / (run.artifacts_dir or "") / "env.json").read_text())


def test_pin_is_applied_recorded_and_restored_and_a_required_pin_skips_an_unrooted_phone(
    virtual_phones, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=2, profiles=["adreno-nexus6p", "adreno-sd8gen2"])
    rooted, unrooted = phones[0], phones[1]
    before = _max_khz(phones, rooted)
    results = tmp_path / "results"
    body = fast_lstm(extra="  clocks: {mode: pin, cpu: min, required: true}\n")
    spec = write_experiment(tmp_path, "pinned", body)
    done = run_farm(phones.adb_port, results, "run", str(spec), "--no-live")
    # The unrooted phone's runs are SKIPPED at plan time, stored with the reason (checked below),
    # rather than failing one by one at run time.
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    with open_store(results) as store:
        runs = {r.ran_on or r.device_id: r for r in run_store.list_runs(store, "pinned")}
        ran = runs[f"local/{rooted.serial}"]
        assert ran.state is RunState.DONE
        refused = runs[f"local/{unrooted.serial}"]
        assert refused.state is RunState.SKIPPED and "need root" in (refused.reason or "")
        clocks = _env(results, ran)["clocks"]
        assert isinstance(clocks, dict) and clocks["mode"] == "pin" and clocks["as_requested"] is True
        readback = clocks["readback"]
        assert isinstance(readback, dict)
        assert readback[f"{POLICY}/scaling_max_freq"] == readback[f"{POLICY}/scaling_min_freq"] == "384000"
        metrics = {m.name: m.value for m in run_store.get_metrics(store, ran.run_id)}
        assert metrics["valid_clocks_as_requested"] == 1.0 and "valid" in metrics
        warnings = [e.message for e in store_events.recent(store, "pinned", 50) if e.kind == "warning"]
        assert device_store.clocks_marked(store) == set(), warnings  # restored: no marker left
    assert _max_khz(phones, rooted) == before != "384000"


def test_clocks_left_pinned_by_a_killed_farm_are_restored_by_the_next(virtual_phones, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["adreno-nexus6p"])
    before = _max_khz(phones, phones[0])
    results = tmp_path / "results"
    body = fast_lstm(
        measurement="{warmup: 1, iterations: 3, min_seconds: 30, max_seconds: 60, repetitions: 1}",
        extra="  clocks: {mode: pin, cpu: min}\n",
    )
    spec = write_experiment(tmp_path, "killed", body)
    farm = start_farm(phones.adb_port, results, "run", str(spec), "--no-live")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert farm.poll() is None, farm.stdout.read() if farm.stdout else ""
            if (results / "farm.db").exists():
                with open_store(results) as store:
                    if run_store.list_runs(store, "killed", [RunState.RUNNING]):
                        break
            time.sleep(0.2)
        os.killpg(farm.pid, signal.SIGKILL)
        farm.wait()
    finally:
        if farm.poll() is None:
            farm.kill()
            farm.wait()
    assert _max_khz(phones, phones[0]) == "384000"  # left pinned by the dead farm
    with open_store(results) as store:
        assert device_store.clocks_marked(store) == {f"local/{phones[0].serial}"}
    # The next farm (any `farm run` on this store) puts them back before it uses the phone.
    quick = write_experiment(tmp_path, "after", fast_lstm())
    again = run_farm(phones.adb_port, results, "run", str(quick), "--no-live")
    assert again.returncode == 0, again.stderr
    assert _max_khz(phones, phones[0]) == before
    with open_store(results) as store:
        assert device_store.clocks_marked(store) == set()
        messages = [e.message for e in store_events.recent(store, None, 100)]
        assert "clocks restored after an interrupted run" in messages


@pytest.mark.serial  # a speed ratio: needs the host's cores
def test_pinned_min_is_slower_than_max_by_the_clock_ratio_and_compare_finds_it(
    virtual_phones, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["adreno-sd865"])
    results = tmp_path / "results"
    for level in ("min", "max"):
        # A multi-threaded gemm of ~10 ms iterations wants more cores than the phone's budget at
        # any clock, so its speed is the clock's (the virtual SoC scales the budget by it).
        body = (
            "benchmark: {program: gemm, params: {m: 192, n: 192, k: 192, backend: cpu-mt}}\n"
            "sweep: {}\n"
            "measurement: {warmup: 1, iterations: 8, min_seconds: 2, max_seconds: 20, repetitions: 5}\n"
            "telemetry: {idle_baseline_s: 0}\n"
            "conditions:\n  cooldown: {max_temp_c: 90, timeout_s: 5}\n  min_battery_pct: 1\n"
            f"  clocks: {{mode: pin, cpu: {level}, required: true}}\n"
        )
        spec = write_experiment(tmp_path, f"pin_{level}", body)
        done = run_farm(phones.adb_port, results, "run", str(spec), "--no-live")
        assert done.returncode == 0, done.stderr
    # The mean, not the median: the virtual SoC slows a phone by its CPU-time quota per CFS
    # period (20 ms at the top clock, stretched by the clock ratio below it: cgroup.cfs_quota),
    # which stretches some iterations a lot rather than each a little (a real phone's lower
    # clock slows every iteration); over >= 2 s runs the mean is the speed.
    compared = run_farm(
        phones.adb_port, results, "compare", "pin_max", "pin_min", "--metric", "latency_mean_ms", "--json"
    )
    assert compared.returncode == 0, compared.stderr
    (cell,) = json.loads(compared.stdout)["cells"]
    assert cell["verdict"] == "slower" and cell["p_value"] < 0.01, json.dumps(cell)
    with open_store(results) as store:
        clocks = _env(results, run_store.list_runs(store, "pin_min")[0])["clocks"]
    assert isinstance(clocks, dict) and clocks["mode"] == "pin"
    readback = clocks["readback"]
    assert isinstance(readback, dict)
    # The fastest core at its lowest clock against the same core at its highest is the slowdown
    # the phone's own tables predict (sd865: prime 844.8 / 2841.6 MHz = 1 / 3.36). It is reached
    # only when the phone's CPU budget, not the shared host, holds back the top-clock run (on a
    # loaded 2-core host the top run is itself starved: 1.5-1.9 measured there), so the test
    # asks for a clear slowdown. Above the prediction, the host decides how far: on this 2-core
    # VM a CPU that halts between held-back periods makes the work resuming on it pay (keepwarm.py),
    # and other work on the host keeps the CPUs awake for the top-clock run more than for the
    # min-clock one, whose periods are longer: measured (2026-12-07) 3.17 on a quiet host, 4.15
    # beside one busy loop, 4.85 beside two, 5.52 in CI's serial pass. The bound is twice the
    # prediction: a pin that did not lower the clock, or a quota that was not scaled, is outside.
    expected = 2841600 / int(readback["/sys/devices/system/cpu/cpufreq/policy7/scaling_max_freq"])
    assert 1.25 < cell["ratio"] < 2.0 * expected, (cell["ratio"], expected)


def test_fixed_performance_mode_on_an_android_11_phone_is_applied_and_turned_off(
    virtual_phones, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["mali-tensor"])  # Android 14, its power HAL has the mode
    results = tmp_path / "results"
    body = fast_lstm(extra="  clocks: {mode: fixed_performance, required: true}\n")
    done = run_farm(
        phones.adb_port, results, "run", str(write_experiment(tmp_path, "fixed", body)), "--no-live"
    )
    assert done.returncode == 0, done.stderr
    with open_store(results) as store:
        run = run_store.list_runs(store, "fixed")[0]
        env = _env(results, run)
        assert env["clocks"]["mode"] == "fixed_performance"  # type: ignore[index]
        assert device_store.clocks_marked(store) == set()
    # Read back by its effect (dumpsys power shows no such mode): the nodes the profile's HAL sets.
    fixed = load_profile("mali-tensor").fixed_performance
    assert fixed is not None
    readback = env["clocks"]["readback"]  # type: ignore[index]
    last = f"/sys/devices/system/cpu/cpufreq/policy{load_profile('mali-tensor').cpu.first_cpus()[-1]}"
    top = str(fixed.cpu_khz[-1])
    assert readback[f"{last}/scaling_max_freq"] == readback[f"{last}/scaling_min_freq"] == top
    assert env["clocks_held"]["held"] is True and env["clocks_held"]["samples"] >= 1  # type: ignore[index]


def test_a_hot_phone_throttles_and_on_throttle_retry_runs_it_again(virtual_phones, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["adreno-sd888-hot"])
    results = tmp_path / "results"
    body = fast_lstm(
        measurement="{warmup: 1, iterations: 3, min_seconds: 12, max_seconds: 30, repetitions: 1}",
        params="layers: 2, seq_len: 64, input_dim: 32, classes: 6, batch: 4, backend: cpu",
        extra="  on_throttle: retry\n",
    ).replace("cooldown: {max_temp_c: 90, timeout_s: 5}", "cooldown: {max_temp_c: 42, timeout_s: 60}")
    spec = write_experiment(tmp_path, "hot", body)
    done = run_farm(phones.adb_port, results, "run", str(spec), "--no-live", timeout_s=400)
    assert done.returncode in (0, 1), done.stderr
    with open_store(results) as store:
        events = [e for e in store_events.recent(store, "hot", 100) if e.kind == "throttle"]
        assert any("retrying after the cooldown" in e.message for e in events), events
        assert all("CPU max lowered" in e.message or "thermal status" in e.message for e in events)
        (run,) = run_store.list_runs(store, "hot")
        assert run.attempts >= 2
        assert run.state is RunState.DONE
        metrics = {m.name: m.value for m in run_store.get_metrics(store, run.run_id)}
        if any("retrying" not in e.message for e in events):  # the last attempt throttled too
            assert metrics["valid_not_throttled"] == 0.0 and metrics["valid"] == 0.0  # kept, flagged
        else:  # a retry after the cooldown ran cool
            assert metrics["valid_not_throttled"] == 1.0


@pytest.mark.serial  # a drift ratio: needs the host's cores
def test_a_sustained_run_on_a_hot_phone_records_its_drift_and_is_not_flagged(
    virtual_phones, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["adreno-sd888-hot"])
    results = tmp_path / "results"
    # A multi-threaded gemm wants more cores than the phone's budget, so a clock cap slows it.
    body = (
        "benchmark: {program: gemm, params: {m: 192, n: 192, k: 192, backend: cpu-mt}}\n"
        "sweep: {}\n"
        "measurement: {warmup: 1, sustained_s: 15, repetitions: 1}\n"
        "telemetry: {idle_baseline_s: 0}\n"
        "conditions:\n  cooldown: {max_temp_c: 90, timeout_s: 5}\n  min_battery_pct: 1\n"
    )
    done = run_farm(
        phones.adb_port, results, "run", str(write_experiment(tmp_path, "sustained", body)), "--no-live"
    )
    assert done.returncode == 0, done.stderr
    with open_store(results) as store:
        (run,) = run_store.list_runs(store, "sustained")
        metrics = {m.name: m.value for m in run_store.get_metrics(store, run.run_id)}
    assert metrics["measured_s"] >= 14.5
    # The hot profile caps its clocks within seconds: a time to throttle, and slower at the end.
    assert metrics["time_to_throttle_s"] is not None and metrics["time_to_throttle_s"] < 15
    # The drift itself is the run's own medians. Its size on a virtual phone says little: 1.1-1.3
    # on an idle 2-core host, near 1 when the host starves the early iterations too, and down to
    # 0.75 (CI, 2026-12-07) because the capped phase's throttled work runs on host CPUs kept warm
    # (vphone keepwarm) while the budget-bound phase before the cap does not; a real phone's
    # lower clock slows every iteration. So: the ratio as stored, within sane bounds.
    ratio = metrics["latency_steady_ms"] / metrics["latency_initial_ms"]
    assert metrics["steady_initial_ratio"] == pytest.approx(ratio) and 0.5 < ratio < 5
    assert "valid_not_throttled" not in metrics and metrics["valid"] == 1.0  # what sustained measures
