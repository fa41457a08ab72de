"""The built farm-probe on fake sysfs trees of each GPU family, parsed by parse_probe."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from telemetry_trees import KGSL, PSY, Agents, adreno_tree, as_shell_user, mali_tree, mediatek_tree

from farm.telemetry.probe import Capabilities, CurrentSign, GpuFamily, parse_probe
from farm.telemetry.sampler import default_sources
from tests.fixtures.cross import ALL_ABIS

AGENT_ABIS = ALL_ABIS  # the host build, and the ARM builds under qemu-user


def run_probe(agents: Agents, root: Path, *extra: str) -> Capabilities:
    argv = as_shell_user(
        agents.command([str(agents.probe), f"--sysfs-root={root}", "--sample-interval-ms=5", *extra])
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1, "the probe prints exactly one JSON line"
    return parse_probe(done.stdout)


def test_adreno_tree(agents: Agents, world_dir: Path) -> None:
    adreno_tree(world_dir)
    caps = run_probe(agents, world_dir)
    assert caps.gpu.family is GpuFamily.ADRENO and caps.gpu.model == "Adreno740v2"
    assert caps.gpu.busy is not None and caps.gpu.busy.path == f"{KGSL}/gpubusy"
    assert caps.gpu.busy_format == "kgsl"
    assert caps.gpu.freq is not None and caps.gpu.freq.path == f"{KGSL}/devfreq/cur_freq"
    assert caps.gpu.freq_unit == "Hz"
    bat = caps.battery
    assert bat.dir == f"{PSY}/battery" and bat.status == "Discharging"
    assert bat.current_unit == "uA" and bat.current_sign is CurrentSign.NEGATIVE_DISCHARGING
    assert bat.current_samples == (-412000,) * 5
    assert bat.voltage_unit == "uV"
    assert [c.node.path for c in caps.charging] == [f"{PSY}/battery/input_suspend"]
    assert not caps.charging[0].writable  # root-owned 0644, probed as the shell user
    units = {z.type: z.unit for z in caps.thermal}
    assert units == {"cpu-0-0-usr": "mC", "gpuss-0-usr": "mC", "battery": "dC", "skin-therm": "C"}
    assert {z.type: z.celsius for z in caps.thermal}["battery"] == 30.2
    assert [p.policy for p in caps.cpu_policies] == ["policy0", "policy4"]
    assert caps.cpu_policies[1].cpus == "4 5 6 7" and caps.cpu_policies[0].governor == "walt"
    assert caps.mem_total_kb == 7901234
    assert caps.opencl_libraries == ("/vendor/lib64/libOpenCL.so",)
    assert not caps.root.adbd_root and caps.root.su_path is None
    names = {s.name for s in default_sources(caps)}
    want = {"battery.current_now", "battery.voltage_now", "gpu.busy", "gpu.freq", "thermal.gpuss-0-usr"}
    assert want <= names


def test_unreadable_gpubusy_falls_back_and_is_reported(agents: Agents, world_dir: Path) -> None:
    tree = adreno_tree(world_dir)
    tree.deny(f"{KGSL}/gpubusy")
    tree.deny("/sys/class/thermal/thermal_zone1/temp")
    caps = run_probe(agents, world_dir)
    assert caps.gpu.busy is not None and caps.gpu.busy.path == f"{KGSL}/gpu_busy_percentage"
    assert caps.gpu.busy_format == "pct"
    denied = {n.path: n for n in caps.gpu.candidates}[f"{KGSL}/gpubusy"]
    assert denied.present and not denied.readable and denied.error == "EACCES"
    zone1 = caps.thermal[1]
    assert zone1.type == "gpuss-0-usr" and zone1.node.error == "EACCES" and zone1.unit is None
    assert "thermal.gpuss-0-usr" not in {s.name for s in default_sources(caps)}


def test_mali_tree(agents: Agents, world_dir: Path) -> None:
    mali_tree(world_dir)
    caps = run_probe(agents, world_dir)
    assert caps.gpu.family is GpuFamily.MALI and caps.gpu.model == "Mali-G710"
    assert caps.gpu.busy is not None and caps.gpu.busy.path.endswith("mali0/device/utilization")
    assert caps.gpu.busy_format == "int"
    # the memory-interface devfreq is not the GPU's
    assert caps.gpu.freq is not None and caps.gpu.freq.path == "/sys/class/devfreq/1c500000.mali/cur_freq"
    assert caps.battery.current_unit == "mA" and caps.battery.voltage_unit == "mV"
    assert [c.node.path for c in caps.charging] == [f"{PSY}/battery/charge_disable"]


def test_mediatek_tree_finds_battery_by_type(agents: Agents, world_dir: Path) -> None:
    mediatek_tree(world_dir)
    caps = run_probe(agents, world_dir)
    assert caps.gpu.family is GpuFamily.MEDIATEK
    assert (caps.gpu.busy_format, caps.gpu.freq_unit) == ("pct", "kHz")
    assert caps.battery.dir == f"{PSY}/mtk-battery"
    # charging and positive: the ABI convention, so negative while discharging
    assert caps.battery.current_sign is CurrentSign.NEGATIVE_DISCHARGING


def test_positive_discharging_current(agents: Agents, world_dir: Path) -> None:
    adreno_tree(world_dir, current="350000")
    caps = run_probe(agents, world_dir)
    assert caps.battery.current_sign is CurrentSign.POSITIVE_DISCHARGING


def test_su_that_works_and_su_that_hangs(agents: Agents, world_dir: Path) -> None:
    tree = adreno_tree(world_dir)
    tree.write("/system/xbin/su", '#!/bin/sh\n[ "$1" = -c ] && echo "uid=0(root) gid=0(root)"', mode=0o755)
    caps = run_probe(agents, world_dir)
    assert caps.root.su_path == "/system/xbin/su" and caps.root.su_works is True and caps.root.available

    tree.write("/system/xbin/su", "#!/bin/sh\nsleep 30", mode=0o755)
    started = time.monotonic()
    caps = run_probe(agents, world_dir, "--su-timeout-ms=1000")  # default 15 s: a Magisk prompt
    took_s = time.monotonic() - started
    assert caps.root.su_works is False and not caps.root.available
    assert took_s < 5, "a hung su must be cut off by the probe's su timeout (1 s here)"


def test_bad_argument_is_one_line_and_exit_2(agents: Agents) -> None:
    done = subprocess.run(
        agents.command([str(agents.probe), "--frobnicate"]), capture_output=True, text=True, timeout=10
    )
    assert done.returncode == 2
    assert done.stdout == "" and done.stderr.count("\n") == 1 and "--frobnicate" in done.stderr
