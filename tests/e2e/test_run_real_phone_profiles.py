"""`farm run` on virtual phones as strict as the real devices their profiles name (issue 28).

pixel7: SELinux keeps shell out of every thermal zone and the Mali utilisation and clock nodes,
and OpenCL comes as libOpenCL.so beside the Pixel wrapper libOpenCL-pixel.so. A hypothetical
Pixel 7 with the wrapper alone (vphone.testing.hypothetical; a -lOpenCL build does not start on
it) keeps the wrapper path tested: every run of the smoke study must still run there, the gpu
ones through the wrapper, and each run must record and say what telemetry the phone refused and
what that cost (not carry on as if it had none)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from vphone.profiles import load_profile
from vphone.testing.hypothetical import PIXEL_WRAPPER_LIBRARY, wrapper_only_pixel
from vphone.testing.phones import PhoneSet

from farm.device.android import parse_hal_temperatures
from farm.device.session import DeviceSession
from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import REPO, fast_lstm, open_store, run_farm, start_farm, write_experiment

pytestmark = pytest.mark.integration


def test_smoke_on_a_wrapper_only_pixel_runs_through_its_wrapper_and_records_what_selinux_refused(
    virtual_phones, tmp_path: Path
) -> None:
    phones = virtual_phones(count=1, profiles=[str(wrapper_only_pixel(tmp_path))])
    results = tmp_path / "results"
    smoke = str(REPO / "experiments" / "smoke.yaml")
    done = run_farm(phones.adb_port, results, "run", smoke, "--no-live", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert summary["done"] == 4 and summary["failed"] == 0

    with open_store(results) as store:
        runs = run_store.list_runs(store, "smoke")
    assert {r.state for r in runs} == {RunState.DONE} and len(runs) == 4
    for run in runs:
        folder = results / (run.artifacts_dir or "")
        env = json.loads((folder / "env.json").read_text(encoding="utf-8"))
        lost = {loss["source"]: loss for loss in env["telemetry_lost"]}
        assert {"thermal_zones", "gpu_busy"} <= set(lost)
        assert lost["thermal_zones"]["errors"] == ["EACCES"]
        assert any(note.startswith("thermal_zones unreadable (EACCES") for note in env["notes"])
        info = next(
            json.loads(line)
            for line in (folder / "stdout.jsonl").read_text(encoding="utf-8").splitlines()
            if line.startswith("{") and json.loads(line)["event"] == "info"
        )
        if info["backend"] == "gpu":
            assert info["opencl_library"] == PIXEL_WRAPPER_LIBRARY
    report_dir = tmp_path / "report"
    reported = run_farm(phones.adb_port, results, "report", "smoke", "--out", str(report_dir))
    assert reported.returncode == 0, reported.stderr
    markdown = (report_dir / "report.md").read_text(encoding="utf-8")
    assert "thermal_zones unreadable (EACCES" in markdown and "gpu_busy unreadable (EACCES" in markdown


def test_devices_proves_opencl_by_listing_devices_through_the_phones_own_library(
    virtual_phones, tmp_path: Path
) -> None:
    profiles = [str(wrapper_only_pixel(tmp_path)), "pixel7", "no-opencl"]
    phones = virtual_phones(count=3, profiles=profiles)
    listed = run_farm(phones.adb_port, tmp_path / "results", "devices", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["serial"]: row for row in json.loads(listed.stdout)}
    wrapper_only, pixel7, bare = (rows[p.serial] for p in phones)
    assert wrapper_only["opencl"] is True and wrapper_only["opencl_devices"]
    assert {d["library"] for d in wrapper_only["opencl_devices"]} == {PIXEL_WRAPPER_LIBRARY}
    # The real Pixel 7's libOpenCL.so comes first in farm's loader (kernels/common/clload.c).
    assert pixel7["opencl"] is True and pixel7["opencl_devices"]
    assert {d["library"] for d in pixel7["opencl_devices"]} <= {"libOpenCL.so", "/vendor/lib64/libOpenCL.so"}
    assert bare["opencl"] is False and bare["opencl_devices"] == []


def test_a_power_hal_boost_mid_run_breaks_the_pin_and_the_run_says_its_clocks_did_not_hold(
    virtual_phones, tmp_path: Path
) -> None:
    """dimensity9200 (rooted): a touch is a Boost.INTERACTION; the HAL raises the CPU floor, and
    when the boost ends writes the floor's default, not farm's pin. Read back once, the pin looked
    applied; sampled through the run, it did not hold."""
    phones = virtual_phones(count=1, profiles=["dimensity9200"])
    phone = phones[0]
    results = tmp_path / "results"
    farm = _start_a_long_lstm(phones, tmp_path, results, "boosted", "{mode: pin, cpu: max, required: true}")
    try:
        shell = DeviceSession(phone.device(phones.client()), "local/x", default_timeout_s=20)
        _wait_until_the_lstm_has_measured(farm, shell)
        assert shell.shell(["input", "tap", "10", "10"]).ok
        out, _ = farm.communicate(timeout=240)
    finally:
        if farm.poll() is None:
            farm.kill()
    assert farm.returncode == 0, out
    with open_store(results) as store:
        (run,) = run_store.list_runs(store, "boosted")
        metrics = {m.name: m.value for m in run_store.get_metrics(store, run.run_id)}
    env = json.loads((results / (run.artifacts_dir or "") / "env.json").read_text(encoding="utf-8"))
    assert env["clocks"]["as_requested"] is True  # the one read-back said the pin was in force
    held = env["clocks_held"]
    assert held["held"] is False and held["samples"] >= 1
    assert any(d["node"].endswith("/scaling_min_freq") for d in held["drifts"])
    assert metrics["valid_clocks_held"] == 0.0 and metrics["valid"] == 0.0
    assert any(note.startswith("clock pins did not hold") for note in env["notes"])
    # The script wrote the broken pin again, once, as root, and said when: the run stays flagged
    # (the drift was seen while it measured).
    again = held["reapplied"]
    assert again is not None and again["how"] in ("direct", "su-c", "su-0"), again
    assert any(node.endswith("/scaling_min_freq") for node in again["nodes"]), again
    assert 0 <= again["at_s"] <= 30
    assert any(note.startswith(f"clock pins re-applied at {again['at_s']:g} s") for note in env["notes"])


def _start_a_long_lstm(
    phones: PhoneSet, tmp_path: Path, results: Path, name: str, clocks: str
) -> subprocess.Popen[str]:
    """`farm run` of one lstm that measures for at least 8 s with `clocks`, in the background."""
    body = fast_lstm(
        measurement="{warmup: 1, iterations: 3, min_seconds: 8, max_seconds: 30, repetitions: 1}",
        extra=f"  clocks: {clocks}\n",
    )
    spec = write_experiment(tmp_path, name, body)
    return start_farm(phones.adb_port, results, "run", str(spec), "--no-live")


def _wait_until_the_lstm_has_measured(farm: subprocess.Popen[str], shell: DeviceSession) -> None:
    """Until the phone's lstm has had 1 s of its own CPU time: a pin broken at the benchmark's very
    start is found by the run's first check, re-applied before it measures, and rightly not a
    drift (CI once wrote it that early under load)."""
    deadline = time.monotonic() + 180
    while _cpu_ticks(shell, "lstm") < 100:
        assert farm.poll() is None, farm.stdout.read() if farm.stdout else ""
        assert time.monotonic() < deadline, "the benchmark never ran"
        time.sleep(0.2)


def _cpu_ticks(shell: DeviceSession, program: str) -> int:
    """utime + stime of the phone's `program` in clock ticks (0 while it is not running)."""
    pid = shell.shell(["pidof", program]).stdout.split()
    if not pid:
        return 0
    fields = shell.shell(["cat", f"/proc/{pid[0]}/stat"]).stdout.rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12]) if len(fields) > 12 else 0


def test_a_fixed_performance_pin_root_broke_is_reapplied_by_turning_the_mode_off_and_on(
    virtual_phones, tmp_path: Path
) -> None:
    """mali-tensor (a rooted copy: root stands for any other writer of the node, a vendor daemon
    or a thermal engine): mid-run the big cluster's max is written down to its lowest clock.
    Pixel's power HAL writes a node only when its request changes (libperfmgr FileNode::Update),
    so asking for the mode again (the old re-apply) leaves the node broken; off then on writes
    the defaults and then the fixed clocks again. Independent truth: the sampler's trace of the
    big cluster's clock goes down to the broken value and then back to the fixed one."""
    from farm.telemetry.trace import parse_trace

    shipped = (REPO / "vphone/src/vphone/profiles/mali-tensor.yaml").read_text(encoding="utf-8")
    assert "\nrooted: false\n" in shipped
    copy = tmp_path / "mali-tensor-rooted.yaml"
    copy.write_text(shipped.replace("\nrooted: false\n", "\nrooted: true\n"), encoding="utf-8")
    profile = load_profile(str(copy))
    fixed = profile.fixed_performance
    assert fixed is not None
    big = f"policy{profile.cpu.first_cpus()[-1]}"
    low, pinned = profile.cpu.clusters[-1].freqs_khz[0], fixed.cpu_khz[-1]
    phones = virtual_phones(count=1, profiles=[str(copy)])
    phone = phones[0]
    results = tmp_path / "results"
    farm = _start_a_long_lstm(phones, tmp_path, results, "fixed", "{mode: fixed_performance, required: true}")
    try:
        shell = DeviceSession(phone.device(phones.client()), "local/x", default_timeout_s=20)
        _wait_until_the_lstm_has_measured(farm, shell)
        node = f"/sys/devices/system/cpu/cpufreq/{big}/scaling_max_freq"
        assert shell.shell(["su", "-c", f"echo {low} > {node}"]).ok
        out, _ = farm.communicate(timeout=240)
    finally:
        if farm.poll() is None:
            farm.kill()
    assert farm.returncode == 0, out
    with open_store(results) as store:
        (run,) = run_store.list_runs(store, "fixed")
    run_dir = results / (run.artifacts_dir or "")
    env = json.loads((run_dir / "env.json").read_text(encoding="utf-8"))
    held = env["clocks_held"]
    assert held["held"] is False and any(d["node"] == node for d in held["drifts"]), held
    again = held["reapplied"]
    assert again is not None and again["how"] == "fixed", again
    assert node in again["nodes"], again
    series = parse_trace((run_dir / "trace.bin").read_bytes()).series(f"cpu.freq.{big}")
    assert series is not None
    clocks = [int(v) for v in series.values]
    assert low in clocks, "the trace never saw the broken pin"
    assert pinned in clocks[clocks.index(low) :], f"the big cluster never came back to {pinned} kHz"


def test_pixel7_cooldown_and_temperature_trace_come_from_the_thermal_hal(
    virtual_phones, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """SELinux refuses shell every thermal zone on a Pixel 7, but `dumpsys thermalservice` (DUMP)
    shows what the thermal HAL reads: the cooldown gate and the run's temperature trace use it,
    not the battery thermistor, and env.json says which source was used."""
    phones = virtual_phones(count=1, profiles=["pixel7"])
    device = phones[0].device(phones.client())
    refused = device.shell2("cat /sys/class/thermal/thermal_zone0/temp", v2=True)
    assert refused.returncode != 0 and "Permission denied" in refused.stderr  # the profile's policy
    before = parse_hal_temperatures(device.shell("dumpsys thermalservice").splitlines())
    assert before, "the phone's thermal HAL shows no temperature"
    results = tmp_path / "results"
    spec = write_experiment(tmp_path, "hal", fast_lstm())
    done = run_farm(phones.adb_port, results, "run", str(spec), "--no-live")
    assert done.returncode == 0, done.stderr
    after = parse_hal_temperatures(device.shell("dumpsys thermalservice").splitlines())
    with open_store(results) as store:
        (run,) = run_store.list_runs(store, "hal")
    env = json.loads((results / (run.artifacts_dir or "") / "env.json").read_text(encoding="utf-8"))
    assert env["sensors"]["cooldown_gate"] == "thermalservice (HAL)", env["sensors"]
    assert env["sensors"]["cooldown_battery_only"] is False
    # The gate read the hottest HAL sensor, between what the phone showed before and after.
    low, high = min(max(before.values()), max(after.values())), max(max(before.values()), max(after.values()))
    assert low - 1.0 <= env["temperature_start_c"] <= high + 1.0, (env["temperature_start_c"], before, after)
    trace = env["temperature_trace"]
    assert trace and all(low - 1.0 <= point["max_c"] <= high + 1.0 for point in trace), trace
    assert env["sensors"]["temperature_trace"] == "dumpsys thermalservice (HAL)"
