"""farm-probe and farm-sampler on virtual phones, through the real adb server and adbutils.

The virtual phones expose each SoC profile's telemetry at its real Android paths with its
quirks, and keep a ground-truth log of what their physics really did; the sampler's trace of a
real OpenCL workload (PoCL on this host) is checked against that log.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from telemetry_trees import Agents
from vphone.profiles import PROFILES_DIR, load_profile

from farm.analysis.metrics import cpu_clock_metrics
from farm.telemetry.probe import Capabilities, CurrentSign, GpuFamily, parse_probe
from farm.telemetry.sampler import Source, default_sources, sampler_argv
from farm.telemetry.trace import parse_trace

pytestmark = pytest.mark.integration

BIN_DIR = "/data/local/tmp/farm/bin"
RUN_DIR = "/data/local/tmp/farm/runs/telemetry-test"


def _deploy(device: Any, *local: Path) -> None:
    device.shell(f"mkdir -p {BIN_DIR} {RUN_DIR}")
    for path in local:
        device.sync.push(str(path), f"{BIN_DIR}/{path.name}", mode=0o755)
    device.shell(f"chmod 755 {BIN_DIR}/*")


def _probe(device: Any) -> Capabilities:
    out = device.shell(f"{BIN_DIR}/farm-probe", timeout=20)
    return parse_probe(out)


@pytest.fixture
def spin_binary(cl_busy_binary: Path) -> Path:
    """The GPU workload: vphone/testing/cl_busy.c, a tiny OpenCL busy loop."""
    return cl_busy_binary


def test_probe_finds_each_profiles_paths_and_conventions(
    virtual_phones: Callable[..., Any], agents: Agents
) -> None:
    profiles = ["adreno-sd8gen2", "adreno-nexus6p", "mali-tensor", "no-opencl"]
    phones = virtual_phones(count=len(profiles), profiles=profiles)
    client = phones.client()
    caps: dict[str, Capabilities] = {}
    for phone in phones:
        device = phone.device(client)
        _deploy(device, agents.probe)
        caps[phone.profile] = _probe(device)  # its run time is measured in bench_sampler.py
        assert caps[phone.profile].prop("ro.serialno") == phone.serial

    sd = caps["adreno-sd8gen2"]
    assert sd.gpu.family is GpuFamily.ADRENO and sd.gpu.model == "Adreno740v2"
    assert sd.gpu.busy is not None and sd.gpu.busy.path == "/sys/class/kgsl/kgsl-3d0/gpubusy"
    assert sd.gpu.busy_format == "kgsl" and sd.gpu.freq_unit == "Hz"
    assert sd.battery.current_unit == "uA" and sd.battery.voltage_unit == "uV"
    assert not sd.root.available and sd.has_opencl and sd.abi == "x86_64"
    suspend = {c.node.path: c for c in sd.charging}["/sys/class/power_supply/battery/input_suspend"]
    assert not suspend.writable and sd.charging_switch() is None, "no root: charging cannot be stopped"
    assert [z.type for z in sd.thermal] == ["cpu-0-0-usr", "gpuss-0-usr", "battery", "skin-therm"]
    assert all(z.unit == "mC" and z.celsius is not None and 15 < z.celsius < 90 for z in sd.thermal)

    n6p = caps["adreno-nexus6p"]
    assert n6p.gpu.family is GpuFamily.ADRENO and n6p.root.su_path is not None
    # the probe's verdict on su must be the phone's own (the rooted profile serves su via init)
    n6p_phone = next(p for p in phones if p.profile == "adreno-nexus6p")
    su_says_root = "uid=0(" in n6p_phone.device(client).shell("su -c id", timeout=10)
    assert n6p.root.su_works is su_says_root
    switch = n6p.charging_switch()
    node_paths = [c.node.path for c in n6p.charging]
    assert "/sys/class/power_supply/battery/charging_enabled" in node_paths
    assert (switch is not None) is su_says_root

    mali = caps["mali-tensor"]
    assert mali.gpu.family is GpuFamily.MALI
    assert mali.gpu.busy is not None and mali.gpu.busy.path == "/sys/class/misc/mali0/device/utilization"
    assert mali.gpu.busy_format == "int"
    assert mali.gpu.freq is not None and mali.gpu.freq.path == "/sys/class/devfreq/1c500000.mali/cur_freq"
    assert mali.gpu.freq_unit == "Hz" and mali.battery.current_unit == "mA"

    assert not caps["no-opencl"].has_opencl

    # The sign conventions: whatever the phones' charging state, each must match its profile.
    expected_sign = {
        "adreno-sd8gen2": CurrentSign.NEGATIVE_DISCHARGING,
        "adreno-nexus6p": CurrentSign.POSITIVE_DISCHARGING,
        "mali-tensor": CurrentSign.NEGATIVE_DISCHARGING,
    }
    for name, sign in expected_sign.items():
        if caps[name].battery.current_sign is not CurrentSign.UNKNOWN:  # Full / Not charging: no hint
            assert caps[name].battery.current_sign is sign, name


def test_probe_reports_unreadable_nodes(
    virtual_phones: Callable[..., Any], agents: Agents, tmp_path: Path
) -> None:
    # gpubusy unreadable for the shell user the way a production SELinux policy makes it: the
    # profile's `unreadable` list, on a copy (a mode changed under a running phone's served
    # node does not show: the phone reads it over FUSE, vphone.nodemirror)
    shipped = (PROFILES_DIR / "adreno-sd8gen2.yaml").read_text()
    denied_line = "unreadable:\n  - /sys/class/kgsl/kgsl-3d0/gpubusy\n"
    assert "unreadable:\n" in shipped, "adreno-sd8gen2.yaml has no unreadable list any more"
    copy = tmp_path / "adreno-sd8gen2-gpubusy-denied.yaml"
    copy.write_text(shipped.replace("unreadable:\n", denied_line, 1))
    phones = virtual_phones(count=1, profiles=[str(copy)])
    phone = phones[0]
    device = phone.device(phones.client())
    _deploy(device, agents.probe)
    caps = _probe(device)
    denied = {n.path: n for n in caps.gpu.candidates}["/sys/class/kgsl/kgsl-3d0/gpubusy"]
    assert denied.present and not denied.readable and denied.error == "EACCES"
    assert caps.gpu.busy is not None and caps.gpu.busy.path.endswith("gpu_busy_percentage")


def _truth(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _stop_charging(phone: Any) -> None:
    """What a lab does with root: stop charging through the profile's node, so the gauge shows the
    phone's own draw (with the cable in and charging on it shows the charger's current). Written
    from the host side because this profile has no root."""
    node = phone.state_dir / "sys" / "class/power_supply/battery/input_suspend"
    node.write_text("1\n")


def _trace_around_workload(
    phones: Any, agents: Agents, workload: str, extra: Path | None = None, sources: tuple[Source, ...] = ()
) -> Any:
    """Samples 3 s idle, the workload (3 s), 3 s idle.

    Returns (trace, caps, truth rows, "rc=N" of the workload, (start_ns, end_ns) of the workload)."""
    phone = phones[0]
    device = phone.device(phones.client())
    _deploy(device, agents.probe, agents.sampler, *([extra] if extra else []))
    _stop_charging(phone)
    time.sleep(1.5)  # one fuel-gauge update (1 s on this profile) so the probe sees discharging
    caps = _probe(device)
    trace_path = f"{RUN_DIR}/trace.bin"
    argv = sampler_argv(
        f"{BIN_DIR}/farm-sampler", default_sources(caps) + sources, 50, trace_path, duration_s=9.0
    )
    device.shell(f"nohup {shlex.join(argv)} > /dev/null 2>&1 &")
    time.sleep(3.0)
    # time.monotonic_ns() is the phone's CLOCK_MONOTONIC too (same kernel), so these bracket it
    workload_ns = (time.monotonic_ns(), 0)
    rc_text = device.shell(f"{workload} > /dev/null 2>&1; echo rc=$?", timeout=30)
    workload_ns = (workload_ns[0], time.monotonic_ns())
    local = Path(phones.state_dir) / "trace.bin"
    deadline = time.monotonic() + 15
    while True:
        time.sleep(0.5)
        device.sync.pull(trace_path, str(local))
        trace = parse_trace(local.read_bytes())
        if trace.end is not None or time.monotonic() > deadline:
            break
    assert trace.end is not None, "the sampler stopped by itself after --duration-s"
    return trace, caps, _truth(phone.ground_truth), rc_text.strip(), workload_ns


def _truth_arrays(truth: list[dict[str, Any]], *keys: str) -> list[np.ndarray]:
    return [np.array([r[k] for r in truth], dtype=np.int64 if k == "t_ns" else np.float64) for k in keys]


def _check_gauge_matches_truth(
    trace: Any, caps: Capabilities, truth: list[dict[str, Any]], workload_ns: tuple[int, int]
) -> None:
    """Every fuel-gauge update the sampler caught is a value the physics really had just then,
    and the power they give rises while the ground truth says the phone was loaded."""
    assert caps.battery.current_sign is CurrentSign.NEGATIVE_DISCHARGING  # this profile's quirk
    assert caps.battery.current_unit == "uA"
    t_truth, current_ma, power_mw = _truth_arrays(truth, "t_ns", "current_ma", "power_mw")
    current = trace.series("battery.current_now")
    voltage = trace.series("battery.voltage_now")
    assert current is not None and voltage is not None
    updates = current.update_points()
    assert len(updates) >= 6, "a 1 s gauge updates about 9 times in 9 s"
    for t_ns, raw in zip(updates.t_ns[1:], updates.values[1:], strict=True):
        # the physics logs a row when it writes the node; we read it within one 20 ms tick
        near = (t_truth <= t_ns + 5_000_000) & (t_truth >= t_ns - 200_000_000)
        assert near.any(), f"no ground-truth row just before the gauge update at {t_ns}"
        assert np.min(np.abs(current_ma[near] * 1000 - raw)) <= 0.01 * abs(raw) + 1
    first, last = workload_ns
    volts = np.interp(updates.t_ns, voltage.t_ns, voltage.values) / 1e6
    gauge_mw = -updates.values / 1000 * volts  # uA -> mA, discharging negative on this profile
    during = (updates.t_ns > first + 500_000_000) & (updates.t_ns <= last + 100_000_000)
    idle = updates.t_ns < first
    assert during.any() and idle.any()
    truth_idle_mw = float(np.mean(power_mw[(t_truth < first) & (t_truth > int(trace.sample_t_ns[0]))]))
    assert abs(float(np.mean(gauge_mw[idle])) - truth_idle_mw) < 0.25 * truth_idle_mw
    assert float(np.max(gauge_mw[during])) > float(np.mean(gauge_mw[idle])) + 100


def test_sampler_power_follows_cpu_load_against_ground_truth(
    virtual_phones: Callable[..., Any], agents: Agents
) -> None:
    phones = virtual_phones(count=1, profiles=["adreno-sd8gen2"])
    spin = "timeout 3 sh -c 'while :; do :; done'"
    trace, caps, truth, _rc, workload_ns = _trace_around_workload(phones, agents, spin)
    assert trace.sample_t_ns.size > 400 and np.all(np.diff(trace.sample_t_ns) > 0)
    _check_gauge_matches_truth(trace, caps, truth, workload_ns)
    _, cpu_busy = _truth_arrays(truth, "t_ns", "cpu_busy_cores")
    assert float(np.max(cpu_busy)) > 0.3, "the shell spin loop shows in the ground truth"


def test_sampler_gpu_busy_and_power_follow_opencl_load(
    virtual_phones: Callable[..., Any], agents: Agents, spin_binary: Path
) -> None:
    phones = virtual_phones(count=1, profiles=["adreno-sd8gen2"])
    workload = f"timeout 10 {BIN_DIR}/{spin_binary.name} --seconds=3"
    trace, caps, truth, rc, workload_ns = _trace_around_workload(phones, agents, workload, spin_binary)
    # OpenCL runs on every virtual phone with a GPU profile (PoCL): a failed workload is a failure
    assert rc == "rc=0", f"the OpenCL workload failed on the virtual phone: {workload} gave {rc}"
    _check_gauge_matches_truth(trace, caps, truth, workload_ns)
    # kgsl's gpubusy is busy/total over its last ~1 s window: each new value the sampler saw must
    # be the ground truth's mean GPU busy over about the second before it
    busy = trace.series("gpu.busy")
    assert busy is not None and len(busy) > 400
    t_truth, truth_busy = _truth_arrays(truth, "t_ns", "gpu_busy")
    windows = busy.update_points()
    assert float(np.max(windows.values)) > 0.3, "the OpenCL load shows in gpu.busy"
    for t_ns, value in zip(windows.t_ns[1:], windows.values[1:], strict=True):
        window = (t_truth > t_ns - 1_100_000_000) & (t_truth <= t_ns)
        assert abs(float(np.mean(truth_busy[window])) - value) < 0.2


def test_sampled_cpu_clocks_drop_when_the_hot_profile_throttles(
    virtual_phones: Callable[..., Any], agents: Agents
) -> None:
    phones = virtual_phones(count=1, profiles=["adreno-sd888-hot"])
    spin = "for i in 1 2; do timeout 5 sh -c 'while :; do :; done' & done; wait"
    # The prime core's thermal cap on the same ticks: scaling_max_freq shows the caps in force.
    cap = Source("cap.policy7", "/sys/devices/system/cpu/cpufreq/policy7/scaling_max_freq")
    trace, caps, truth, _rc, (first, last) = _trace_around_workload(phones, agents, spin, sources=(cap,))
    tables = {c.name: c.freqs_khz for c in load_profile("adreno-sd888-hot").cpu.clusters}
    clocks = {p.policy: trace.series(f"cpu.freq.{p.policy}") for p in caps.cpu_policies}
    assert sorted(clocks) == ["policy0", "policy4", "policy7"]  # little, big, prime
    for policy, series in clocks.items():
        assert series is not None and len(series) > 400, f"{policy} sampled every tick"
        table = tables[{"policy0": "little", "policy4": "big", "policy7": "prime"}[policy]]
        assert set(series.values.astype(int)) <= set(table), f"{policy}: only its table's clocks"
    prime, limit = clocks["policy7"], trace.series("cap.policy7")
    assert prime is not None and limit is not None
    capped = (limit.t_ns >= first) & (limit.t_ns <= last) & (limit.values < max(tables["prime"]))
    assert capped.any(), "the hot profile throttles under two spinning shells within 5 s"
    t_cap = int(limit.t_ns[capped][0])
    # The independent truth: the physics' die temperature had passed the CPU zone's 45 C trip.
    t_truth, temp_c = _truth_arrays(truth, "t_ns", "temp_c")
    assert float(np.max(temp_c[t_truth <= t_cap])) >= 45.0
    before = prime.within(first, t_cap)
    after = prime.within(t_cap + 300_000_000, last)
    assert len(before) and len(after)
    assert float(np.min(after.values)) < float(np.max(before.values)), "the sampled clock drops"
    # ...and the run's metrics say so (the mean/min clock of the run's window).
    metrics = {m.name: m.value for m in cpu_clock_metrics(trace, first, last, "cpu.freq.")}
    assert metrics["cpu_policy7_freq_min_mhz"] < metrics["cpu_policy7_freq_mean_mhz"]
    assert metrics["cpu_policy7_freq_mean_mhz"] < float(np.max(before.values)) / 1000
