"""Fake sysfs trees and helpers for the device-agent tests on this host.

The fake trees hold the files at their real Android paths under a root directory; farm-probe
reads them through --sysfs-root, farm-sampler through explicit paths. When the tests run as
root, unreadable nodes are only unreadable to another user, so the probe then runs as uid 2000
(the adb shell user) via setpriv, just as on a phone.

The agents are built for this host and cross-built for the ARM ABIs (Debian's cross gcc); the
ARM ones run here under qemu-user, called explicitly (binfmt_misc may not be registered on CI).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
AGENTS_DIR = REPO / "device_agents"
SHELL_UID = 2000


@dataclass(frozen=True)
class Agents:
    """The built agents of one ABI; `emulator` is the qemu-user argv prefix for a foreign ABI."""

    abi: str
    probe: Path
    sampler: Path
    emulator: tuple[str, ...] = ()
    pagecache: Path | None = None

    def command(self, argv: list[str]) -> list[str]:
        """argv (starting with an agent's path) as this host runs it."""
        return [*self.emulator, *argv]


def as_shell_user(argv: list[str]) -> list[str]:
    """argv run as the adb shell uid when we are root, so EACCES nodes really are EACCES."""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot drop to the shell uid")
    return [setpriv, f"--reuid={SHELL_UID}", f"--regid={SHELL_UID}", "--clear-groups", *argv]


class FakeTree:
    """Files at phone paths under `root`; `write` keeps modes, `deny` makes a node mode 000."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, phone_path: str) -> Path:
        return self.root / phone_path.lstrip("/")

    def write(self, phone_path: str, text: str, *, mode: int = 0o644) -> Path:
        p = self.path(phone_path)
        p.parent.mkdir(parents=True, exist_ok=True)
        for parent in [p.parent, *p.parent.parents]:
            if parent == self.root.parent:
                break
            os.chmod(parent, 0o755)
        p.write_text(text + "\n")
        os.chmod(p, mode)
        return p

    def deny(self, phone_path: str) -> None:
        os.chmod(self.path(phone_path), 0o000)


KGSL = "/sys/class/kgsl/kgsl-3d0"
PSY = "/sys/class/power_supply"


def _common(t: FakeTree, zones: list[tuple[str, str]]) -> None:
    t.write("/proc/meminfo", "MemTotal:        7901234 kB\nMemFree:          123456 kB")
    t.write("/sys/devices/system/cpu/online", "0-7")
    for i, (first, gov) in enumerate([("0", "walt"), ("4", "walt")]):
        base = f"/sys/devices/system/cpu/cpufreq/policy{first}"
        t.write(f"{base}/related_cpus", " ".join(str(int(first) + k) for k in range(4)))
        t.write(f"{base}/scaling_governor", gov)
        t.write(f"{base}/scaling_cur_freq", str(1_000_000 + i))
        t.write(f"{base}/scaling_min_freq", "300000")
        t.write(f"{base}/scaling_max_freq", "2000000")
    for i, (kind, temp) in enumerate(zones):
        t.write(f"/sys/class/thermal/thermal_zone{i}/type", kind)
        t.write(f"/sys/class/thermal/thermal_zone{i}/temp", temp)
    t.write("/vendor/lib64/libOpenCL.so", "not really a library")


def adreno_tree(root: Path, *, current: str = "-412000", status: str = "Discharging") -> FakeTree:
    t = FakeTree(root)
    t.write(f"{KGSL}/gpubusy", "  250000  1000000")
    t.write(f"{KGSL}/gpu_busy_percentage", "25 %")
    t.write(f"{KGSL}/devfreq/cur_freq", "680000000")
    t.write(f"{KGSL}/gpu_model", "Adreno740v2")
    t.write(f"{PSY}/battery/status", status)
    t.write(f"{PSY}/battery/current_now", current)
    t.write(f"{PSY}/battery/voltage_now", "4012000")
    t.write(f"{PSY}/battery/charge_counter", "3100000")
    t.write(f"{PSY}/battery/capacity", "80")
    t.write(f"{PSY}/battery/temp", "285")
    t.write(f"{PSY}/battery/input_suspend", "0")
    _common(t, [("cpu-0-0-usr", "48200"), ("gpuss-0-usr", "45100"), ("battery", "302"), ("skin-therm", "33")])
    return t


def mali_tree(root: Path) -> FakeTree:
    t = FakeTree(root)
    t.write("/sys/class/misc/mali0/device/utilization", "37")
    t.write("/sys/kernel/gpu/gpu_busy", "37 %")
    t.write("/sys/kernel/gpu/gpu_model", "Mali-G710")
    t.write("/sys/class/devfreq/1c500000.mali/cur_freq", "572000000")
    t.write("/sys/class/devfreq/17000010.devfreq_mif/cur_freq", "2093000000")
    t.write(f"{PSY}/battery/status", "Discharging")
    t.write(f"{PSY}/battery/current_now", "-420")
    t.write(f"{PSY}/battery/voltage_now", "3987")
    t.write(f"{PSY}/battery/charge_disable", "0")
    _common(t, [("BIG", "52000"), ("G3D", "47000"), ("battery", "30000")])
    return t


def mediatek_tree(root: Path) -> FakeTree:
    t = FakeTree(root)
    t.write("/sys/kernel/ged/hal/current_freqency", "886000")
    t.write("/sys/kernel/gpu/gpu_busy", "12 %")
    t.write("/sys/kernel/gpu/gpu_clock", "886000")
    # no battery/ supply: the probe must find the one whose type is Battery
    t.write(f"{PSY}/usb/type", "USB")
    t.write(f"{PSY}/mtk-battery/type", "Battery")
    t.write(f"{PSY}/mtk-battery/status", "Charging")
    t.write(f"{PSY}/mtk-battery/current_now", "1500000")
    t.write(f"{PSY}/mtk-battery/voltage_now", "4300000")
    _common(t, [("mtktscpu", "61000")])
    return t
