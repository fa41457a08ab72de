"""The /sys tree each profile gets, the file formats, and in-place rewrites (tmp dir only)."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from vphone.clocknodes import ClockNodes
from vphone.nodes import NodeFiles, Telemetry, TelemetryNodes
from vphone.profiles import available_profiles, load_profile
from vphone.socmodel import SocModel

IDLE = Telemetry(
    gpu_busy_us=0,
    gpu_total_us=1_000_000,
    gpu_freq_hz=151_000_000,
    battery_temp_mc=31_500,
    battery_level=80,
    battery_status="Charging",
    voltage_uv=4_200_000,
    current_raw=-1234,
    charge_counter_uah=3_000_000,
    usb_online=True,
)
ROOT_OWNER = (4321, 4321)  # a stand-in for the host uid the phone's root maps to
CPU = "/sys/devices/system/cpu"


def _tree(tmp_path: Path, name: str) -> tuple[TelemetryNodes, ClockNodes, SocModel]:
    """The tree as Physics.prepare lays it out, at an idle die temperature of 31.5 C."""
    profile = load_profile(name)
    files = NodeFiles(tmp_path / "sys", ROOT_OWNER if profile.rooted else None)
    nodes = TelemetryNodes(profile, files)
    nodes.create(IDLE)
    model = SocModel(profile)
    clocks = ClockNodes(profile, model.soc, files, model.devices)
    clocks.create(model.state, model.readings(31.5))
    nodes.hide_unreadable()
    return nodes, clocks, model


def _read(root: Path, phone_path: str) -> str:
    return (root / phone_path.removeprefix("/sys/")).read_text()


def test_adreno_paths_and_formats(tmp_path: Path) -> None:
    nodes, _, _ = _tree(tmp_path, "adreno-sd8gen2")
    root = nodes.root
    assert (root / "class/kgsl/kgsl-3d0").is_symlink()
    assert _read(root, "/sys/class/kgsl/kgsl-3d0/gpubusy") == "      0 1000000\n"
    nodes.write(replace(IDLE, gpu_busy_us=437_000, gpu_total_us=1_012_000))
    assert _read(root, "/sys/class/kgsl/kgsl-3d0/gpubusy") == " 437000 1012000\n"
    assert _read(root, "/sys/class/kgsl/kgsl-3d0/gpu_busy_percentage") == "43 %\n"
    assert _read(root, "/sys/kernel/gpu/gpu_busy") == "43 %\n"
    assert _read(root, "/sys/class/power_supply/battery/current_now") == "-1234\n"
    assert _read(root, "/sys/class/power_supply/battery/temp") == "315\n"
    assert _read(root, "/sys/class/thermal/thermal_zone1/type") == "gpuss-0-usr\n"
    assert _read(root, "/sys/class/thermal/thermal_zone1/temp") == "31500\n"
    assert _read(root, "/sys/class/kgsl/kgsl-3d0/max_pwrlevel") == "0\n"
    assert _read(root, "/sys/class/kgsl/kgsl-3d0/min_pwrlevel") == "5\n"  # six levels
    assert _read(root, "/sys/class/kgsl/kgsl-3d0/devfreq/governor") == "msm-adreno-tz\n"
    assert _read(root, "/sys/class/kgsl/kgsl-3d0/max_gpuclk") == "680000000\n"
    assert _read(root, "/sys/class/kgsl/kgsl-3d0/force_clk_on") == "0\n"
    node = root / "class/power_supply/battery/input_suspend"
    assert stat.S_IMODE(node.stat().st_mode) == 0o644 and node.read_text() == "0\n"
    trans = root / "class/kgsl/kgsl-3d0/devfreq/trans_stat"
    assert stat.S_IMODE(os.stat(trans).st_mode) == 0


def test_mali_paths_and_formats(tmp_path: Path) -> None:
    nodes, _, _ = _tree(tmp_path, "mali-tensor")
    root = nodes.root
    assert not (root / "class/kgsl").exists()
    nodes.write(replace(IDLE, gpu_busy_us=620_000, gpu_total_us=1_000_000, gpu_freq_hz=572_000_000))
    assert _read(root, "/sys/class/misc/mali0/device/utilization") == "62\n"
    assert _read(root, "/sys/kernel/gpu/gpu_busy") == "62 %\n"
    assert _read(root, "/sys/class/devfreq/1c500000.mali/available_frequencies").split()[0] == "151000000"
    assert _read(root, "/sys/class/devfreq/1c500000.mali/max_freq") == "848000000\n"
    assert _read(root, "/sys/class/misc/mali0/device/scaling_max_freq") == "848000\n"  # kHz, Pixel's driver


def test_rewrites_keep_the_inode_for_open_readers(tmp_path: Path) -> None:
    nodes, _, _ = _tree(tmp_path, "adreno-sd8gen2")
    path = nodes.root / "class/power_supply/battery/capacity"
    fd = os.open(path, os.O_RDONLY)
    try:
        assert os.pread(fd, 64, 0) == b"80\n"
        nodes.write(replace(IDLE, battery_level=7))
        assert os.pread(fd, 64, 0) == b"7\n"  # same fd, new value, no stale tail
        nodes.write(replace(IDLE, battery_level=100))
        assert os.pread(fd, 64, 0) == b"100\n"
    finally:
        os.close(fd)


POLICY_FILES = (
    "affected_cpus",
    "related_cpus",
    "cpuinfo_min_freq",
    "cpuinfo_max_freq",
    "cpuinfo_cur_freq",
    "cpuinfo_transition_latency",
    "scaling_available_frequencies",
    "scaling_available_governors",
    "scaling_cur_freq",
    "scaling_driver",
    "scaling_governor",
    "scaling_max_freq",
    "scaling_min_freq",
    "scaling_setspeed",
    "stats/time_in_state",
    "stats/total_trans",
)


@pytest.mark.parametrize("name", available_profiles())
def test_every_profile_has_a_phones_cpufreq_hotplug_and_thermal_view(tmp_path: Path, name: str) -> None:
    nodes, clocks, model = _tree(tmp_path, name)
    root, profile = nodes.root, load_profile(name)
    ncpu = profile.cpu.ncpu
    assert _read(root, f"{CPU}/online") == f"0-{ncpu - 1}\n"
    assert _read(root, f"{CPU}/possible") == _read(root, f"{CPU}/present") == f"0-{ncpu - 1}\n"
    for i, (cluster, first) in enumerate(zip(profile.cpu.clusters, profile.cpu.first_cpus(), strict=True)):
        policy = root / f"devices/system/cpu/cpufreq/policy{first}"
        for f in POLICY_FILES:
            assert (policy / f).is_file(), f"policy{first}/{f}"
        members = list(range(first, first + cluster.cpus))
        assert (policy / "related_cpus").read_text() == " ".join(map(str, members)) + "\n"
        assert (policy / "scaling_available_frequencies").read_text().split() == [
            str(f) for f in cluster.freqs_khz
        ]
        governors = (policy / "scaling_available_governors").read_text().split()
        assert profile.cpu.governor in governors and "userspace" in governors
        assert (policy / "scaling_governor").read_text() == f"{profile.cpu.governor}\n"
        assert (policy / "scaling_setspeed").read_text() == "<unsupported>\n"
        assert (policy / "scaling_max_freq").read_text() == f"{cluster.freqs_khz[-1]}\n"
        states = [line.split() for line in (policy / "stats/time_in_state").read_text().splitlines()]
        assert [int(s[0]) for s in states] == list(cluster.freqs_khz) and all(s[1] == "0" for s in states)
        assert stat.S_IMODE((policy / "cpuinfo_cur_freq").stat().st_mode) == 0o400  # root only
        for cpu in members:  # cpuN/cpufreq is the policy, as devlib and farm-probe read it
            assert os.path.realpath(root / f"devices/system/cpu/cpu{cpu}/cpufreq") == str(policy.resolve())
            assert _read(root, f"{CPU}/cpu{cpu}/online") == "1\n"
            assert _read(root, f"{CPU}/cpu{cpu}/cpu_capacity") == f"{cluster.capacity}\n"
        assert model.soc.policies[i].first_cpu == first
    for zi, zone in enumerate(profile.thermal.zones):
        z = f"/sys/class/thermal/thermal_zone{zi}"
        assert _read(root, f"{z}/type") == f"{zone.type}\n"
        for ti, trip in enumerate(zone.trips):
            assert _read(root, f"{z}/trip_point_{ti}_temp") == f"{round(trip.temp_c * 1000)}\n"
            assert _read(root, f"{z}/trip_point_{ti}_type") == f"{trip.type.value}\n"
    for di, dev in enumerate(model.devices):
        c = f"/sys/class/thermal/cooling_device{di}"
        assert _read(root, f"{c}/type") == f"{dev.name}\n"
        assert (
            _read(root, f"{c}/cur_state") == "0\n" and _read(root, f"{c}/max_state") == f"{dev.max_state}\n"
        )
    assert _read(root, "/sys/class/power_supply/battery/status") == "Charging\n"
    if profile.battery.charging_node is None:
        assert nodes.read_charging_node() is None
    # Root may write the clock controls of rooted profiles only; read-only ones stay root's.
    assert bool(clocks.writable_paths()) == profile.rooted
    if os.geteuid() == 0:
        for rel in clocks.writable_paths():
            st = (root / rel).stat()
            assert (st.st_uid, st.st_gid) == ROOT_OWNER and stat.S_IMODE(st.st_mode) == 0o644, rel
        governor = root / "devices/system/cpu/cpufreq/policy0/scaling_governor"
        if not profile.rooted:
            assert governor.stat().st_uid == 0 and stat.S_IMODE(governor.stat().st_mode) == 0o444


def test_rooted_controls_cover_cpufreq_hotplug_and_kgsl(tmp_path: Path) -> None:
    _, clocks, _ = _tree(tmp_path, "adreno-sd865")
    paths = set(clocks.writable_paths())
    for policy in (0, 4, 7):
        for f in ("scaling_governor", "scaling_min_freq", "scaling_max_freq", "scaling_setspeed"):
            assert f"devices/system/cpu/cpufreq/policy{policy}/{f}" in paths
    assert {f"devices/system/cpu/cpu{c}/online" for c in range(8)} <= paths
    kgsl = "devices/platform/soc/3d00000.qcom,kgsl-3d0/kgsl/kgsl-3d0"
    for f in (
        "max_pwrlevel",
        "min_pwrlevel",
        "force_clk_on",
        "devfreq/governor",
        "devfreq/min_freq",
        "devfreq/max_freq",
    ):
        assert f"{kgsl}/{f}" in paths
