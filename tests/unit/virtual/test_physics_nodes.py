"""The /sys tree each profile gets, the file formats, and in-place rewrites (tmp dir only)."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from farm.virtual.nodes import Telemetry, TelemetryNodes
from farm.virtual.profiles import available_profiles, load_profile

IDLE = Telemetry(
    gpu_busy_us=0,
    gpu_total_us=1_000_000,
    gpu_freq_hz=151_000_000,
    cpu_freq_khz=300_000,
    temp_mc=31_500,
    battery_level=80,
    battery_status="Charging",
    voltage_uv=4_200_000,
    current_raw=-1234,
    charge_counter_uah=3_000_000,
    usb_online=True,
)


def _tree(tmp_path: Path, name: str) -> TelemetryNodes:
    nodes = TelemetryNodes(load_profile(name), tmp_path / "sys")
    nodes.create(IDLE)
    return nodes


def _read(root: Path, phone_path: str) -> str:
    return (root / phone_path.removeprefix("/sys/")).read_text()


def test_adreno_paths_and_formats(tmp_path: Path) -> None:
    nodes = _tree(tmp_path, "adreno-sd8gen2")
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
    node = root / "class/power_supply/battery/input_suspend"
    assert stat.S_IMODE(node.stat().st_mode) == 0o644 and node.read_text() == "0\n"
    trans = root / "class/kgsl/kgsl-3d0/devfreq/trans_stat"
    assert stat.S_IMODE(os.stat(trans).st_mode) == 0


def test_mali_paths_and_formats(tmp_path: Path) -> None:
    nodes = _tree(tmp_path, "mali-tensor")
    root = nodes.root
    assert not (root / "class/kgsl").exists()
    nodes.write(replace(IDLE, gpu_busy_us=620_000, gpu_total_us=1_000_000, gpu_freq_hz=572_000_000))
    assert _read(root, "/sys/class/misc/mali0/device/utilization") == "62\n"
    assert _read(root, "/sys/kernel/gpu/gpu_busy") == "62 %\n"
    assert _read(root, "/sys/class/devfreq/1c500000.mali/cur_freq") == "572000000\n"
    assert _read(root, "/sys/class/devfreq/1c500000.mali/available_frequencies").split()[0] == "151000000"


def test_rewrites_keep_the_inode_for_open_readers(tmp_path: Path) -> None:
    nodes = _tree(tmp_path, "adreno-sd8gen2")
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


@pytest.mark.parametrize("name", available_profiles())
def test_every_profile_lays_out_cpu_thermal_and_battery(tmp_path: Path, name: str) -> None:
    nodes = _tree(tmp_path, name)
    root = nodes.root
    assert _read(root, "/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq") == "300000\n"
    assert (root / "devices/system/cpu/cpufreq/policy0/scaling_governor").is_file()
    assert _read(root, "/sys/class/power_supply/battery/status") == "Charging\n"
    assert (root / "class/thermal/thermal_zone0/temp").is_file()
    if load_profile(name).battery.charging_node is None:
        assert nodes.read_charging_node() is None
