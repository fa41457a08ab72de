"""The phone's /sys telemetry tree at the profile's real Android paths, and how values are written.

Values are written IN PLACE (pwrite + ftruncate, same inode) rather than by rename: samplers on
real phones keep sysfs files open and re-read them with lseek/pread, and that must see new values.
Files are root-owned: shell can read (unless listed unreadable, mode 000) but not write; the
charging-control node is writable by root only.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from farm.virtual.profile import CurrentUnit, DischargeSign, GpuKind, Profile

BATTERY_DIR = "class/power_supply/battery"
USB_DIR = "class/power_supply/usb"
KGSL_DEVICE = "devices/platform/soc/3d00000.qcom,kgsl-3d0/kgsl/kgsl-3d0"
CPU_DIR = "devices/system/cpu"
# Host CPU/NUMA topology copied into the phone's /sys: PoCL's hwloc aborts without it.
HOST_TOPOLOGY_GLOBS = (
    "devices/system/cpu/cpu[0-9]*/topology/*",
    "devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/*",
    "devices/system/cpu/kernel_max",
    "devices/system/node/node[0-9]*/cpumap",
    "devices/system/node/node[0-9]*/cpulist",
    "devices/system/node/node[0-9]*/meminfo",
    "devices/system/node/online",
    "devices/system/node/possible",
)
RO_MODE = 0o444
RW_MODE = 0o644


@dataclass(frozen=True)
class Telemetry:
    """What the sysfs nodes show at one instant (already in the phone's quirky conventions)."""

    gpu_busy_us: int  # over the last closed window
    gpu_total_us: int
    gpu_freq_hz: int
    cpu_freq_khz: int
    temp_mc: int  # millidegrees C
    battery_level: int
    battery_status: str  # Charging / Discharging / Not charging / Full
    voltage_uv: int
    current_raw: int  # value of current_now in the profile's sign and unit
    charge_counter_uah: int
    usb_online: bool

    @property
    def gpu_percent(self) -> int:
        return round(100 * self.gpu_busy_us / self.gpu_total_us) if self.gpu_total_us else 0


def current_now_raw(profile: Profile, battery_current_ma: float) -> int:
    """Encode the true battery current (mA, positive = into the battery) as this phone's
    current_now: the profile decides the unit (uA/mA) and which sign discharging has."""
    value = battery_current_ma
    if profile.battery.discharge_sign is DischargeSign.POSITIVE:
        value = -value
    if profile.battery.current_unit is CurrentUnit.UA:
        value *= 1000
    return round(value)


def write_node(path: Path, text: str) -> None:
    """Replace a file's content keeping its inode (see the module doc)."""
    data = text.encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, RO_MODE)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


class TelemetryNodes:
    """Creates the tree once (`create`) and rewrites the dynamic files (`write`)."""

    def __init__(self, profile: Profile, sys_root: Path) -> None:
        self.profile = profile
        self.root = sys_root
        self._last: dict[str, str] = {}

    def _file(self, rel: str, text: str, mode: int = RO_MODE) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        path.write_text(text, encoding="utf-8")
        os.chmod(path, mode)

    def _copy_host_topology(self, host_sys: Path = Path("/sys")) -> None:
        for pattern in HOST_TOPOLOGY_GLOBS:
            for src in host_sys.glob(pattern):
                if src.is_symlink() or not src.is_file():
                    continue
                try:
                    text = src.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                self._file(str(src.relative_to(host_sys)), text)

    def _link(self, rel: str, target: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)

    def dynamic_files(self, t: Telemetry) -> dict[str, str]:
        """Relative path -> content of every file that changes with the physics."""
        p = self.profile
        bat = BATTERY_DIR
        files = {
            f"{bat}/capacity": f"{t.battery_level}\n",
            f"{bat}/status": f"{t.battery_status}\n",
            f"{bat}/voltage_now": f"{t.voltage_uv}\n",
            f"{bat}/current_now": f"{t.current_raw}\n",
            f"{bat}/current_avg": f"{t.current_raw}\n",
            f"{bat}/temp": f"{t.temp_mc // 100}\n",
            f"{bat}/charge_counter": f"{t.charge_counter_uah}\n",
            f"{USB_DIR}/online": "1\n" if t.usb_online else "0\n",
        }
        for i, _zone in enumerate(p.thermal.zones):
            files[f"class/thermal/thermal_zone{i}/temp"] = f"{t.temp_mc}\n"
        for cpu in range(os.cpu_count() or 1):
            files[f"{CPU_DIR}/cpu{cpu}/cpufreq/scaling_cur_freq"] = f"{t.cpu_freq_khz}\n"
            files[f"{CPU_DIR}/cpu{cpu}/cpufreq/cpuinfo_cur_freq"] = f"{t.cpu_freq_khz}\n"
        if p.gpu is None:
            return files
        pct = t.gpu_percent
        mhz = t.gpu_freq_hz // 1_000_000
        files["kernel/gpu/gpu_busy"] = f"{pct} %\n"
        files["kernel/gpu/gpu_clock"] = f"{mhz}\n"
        if p.gpu.kind is GpuKind.ADRENO:
            k = KGSL_DEVICE
            files[f"{k}/gpubusy"] = f"{t.gpu_busy_us:7d} {t.gpu_total_us:7d}\n"
            files[f"{k}/gpu_busy_percentage"] = f"{pct} %\n"
            files[f"{k}/devfreq/cur_freq"] = f"{t.gpu_freq_hz}\n"
            files[f"{k}/gpuclk"] = f"{t.gpu_freq_hz}\n"
            files[f"{k}/clock_mhz"] = f"{mhz}\n"
            files[f"{k}/temp"] = f"{t.temp_mc}\n"
        else:
            dev = f"devices/platform/{p.gpu.devfreq_name}"
            files[f"{dev}/utilization"] = f"{pct}\n"
            files[f"{dev}/clock"] = f"{mhz}\n"
            files[f"{dev}/devfreq/{p.gpu.devfreq_name}/cur_freq"] = f"{t.gpu_freq_hz}\n"
        return files

    def create(self, t: Telemetry) -> None:
        """Lay out the whole tree (static files, links, the dynamic files' first values)."""
        p = self.profile
        self.root.mkdir(parents=True, exist_ok=True)
        ncpu = os.cpu_count() or 1
        bat = BATTERY_DIR
        static = {
            f"{bat}/type": "Battery\n",
            f"{bat}/present": "1\n",
            f"{bat}/health": "Good\n",
            f"{bat}/technology": "Li-ion\n",
            f"{bat}/charge_full_design": f"{p.battery.capacity_mah * 1000}\n",
            f"{bat}/voltage_max_design": f"{p.battery.voltage_full_mv * 1000}\n",
            f"{USB_DIR}/type": "USB\n",
            f"{CPU_DIR}/online": f"0-{ncpu - 1}\n",
            f"{CPU_DIR}/possible": f"0-{ncpu - 1}\n",
            f"{CPU_DIR}/present": f"0-{ncpu - 1}\n",
        }
        freqs = " ".join(str(f) for f in p.cpu.freqs_khz)
        for cpu in range(ncpu):
            d = f"{CPU_DIR}/cpu{cpu}/cpufreq"
            static[f"{d}/scaling_available_frequencies"] = f"{freqs} \n"
            static[f"{d}/scaling_governor"] = f"{p.cpu.governor}\n"
            static[f"{d}/cpuinfo_min_freq"] = f"{p.cpu.freqs_khz[0]}\n"
            static[f"{d}/cpuinfo_max_freq"] = f"{p.cpu.freqs_khz[-1]}\n"
            static[f"{d}/related_cpus"] = " ".join(str(c) for c in range(ncpu)) + "\n"
        for i, zone in enumerate(p.thermal.zones):
            static[f"class/thermal/thermal_zone{i}/type"] = f"{zone}\n"
            static[f"class/thermal/thermal_zone{i}/mode"] = "enabled\n"
        if p.gpu is not None:
            static.update(self._gpu_static())
        self._copy_host_topology()
        for rel, text in static.items():
            self._file(rel, text)
        for cpu in range(ncpu):
            d = f"{CPU_DIR}/cpu{cpu}/cpufreq"
            self._file(f"{d}/scaling_min_freq", f"{p.cpu.freqs_khz[0]}\n", RW_MODE)
            self._file(f"{d}/scaling_max_freq", f"{p.cpu.freqs_khz[-1]}\n", RW_MODE)
        for cpu in range(ncpu):
            self._link(f"{CPU_DIR}/cpufreq/policy{cpu}", f"../cpu{cpu}/cpufreq")
        if p.battery.charging_node is not None:
            rel = p.battery.charging_node.removeprefix("/sys/")
            self._file(rel, f"{p.battery.charging_node_resume}\n", RW_MODE)
        if p.gpu is not None and p.gpu.kind is GpuKind.ADRENO:
            self._link("class/kgsl/kgsl-3d0", f"../../{KGSL_DEVICE}")
        elif p.gpu is not None:
            dev = f"devices/platform/{p.gpu.devfreq_name}"
            self._link("class/misc/mali0/device", f"../../../{dev}")
            self._link(f"class/devfreq/{p.gpu.devfreq_name}", f"../../{dev}/devfreq/{p.gpu.devfreq_name}")
        self._last = {}
        self.write(t)
        for rel in ("devices/system/cpu/cpu0/cpufreq/cpuinfo_cur_freq",):
            os.chmod(self.root / rel, 0o400)
        for phone_path in p.unreadable:
            rel = phone_path.removeprefix("/sys/")
            host = self.root / rel
            if not host.exists():
                self._file(str(Path(os.path.realpath(host)).relative_to(self.root.resolve())), "")
            os.chmod(os.path.realpath(host), 0)

    def _gpu_static(self) -> dict[str, str]:
        gpu = self.profile.gpu
        assert gpu is not None
        hz = " ".join(str(f) for f in gpu.freqs_hz)
        mhz = [f // 1_000_000 for f in gpu.freqs_hz]
        files = {
            "kernel/gpu/gpu_model": f"{gpu.model}\n",
            "kernel/gpu/gpu_max_clock": f"{mhz[-1]}\n",
            "kernel/gpu/gpu_min_clock": f"{mhz[0]}\n",
            "kernel/gpu/gpu_freq_table": " ".join(str(m) for m in mhz) + "\n",
        }
        if gpu.kind is GpuKind.ADRENO:
            k = KGSL_DEVICE
            files.update(
                {
                    f"{k}/gpu_model": f"{gpu.model}\n",
                    f"{k}/devfreq/min_freq": f"{gpu.freqs_hz[0]}\n",
                    f"{k}/devfreq/max_freq": f"{gpu.freqs_hz[-1]}\n",
                    f"{k}/devfreq/available_frequencies": f"{hz}\n",
                    f"{k}/devfreq/governor": "msm-adreno-tz\n",
                    f"{k}/devfreq/trans_stat": "",
                    f"{k}/max_gpuclk": f"{gpu.freqs_hz[-1]}\n",
                    f"{k}/max_clock_mhz": f"{mhz[-1]}\n",
                    f"{k}/min_clock_mhz": f"{mhz[0]}\n",
                    f"{k}/freq_table_mhz": " ".join(str(m) for m in reversed(mhz)) + "\n",
                    f"{k}/gpu_available_frequencies": " ".join(str(f) for f in reversed(gpu.freqs_hz)) + "\n",
                }
            )
        else:
            dev = f"devices/platform/{gpu.devfreq_name}"
            df = f"{dev}/devfreq/{gpu.devfreq_name}"
            files.update(
                {
                    f"{dev}/gpuinfo": f"{gpu.model} MP7 r0p0 0x0\n",
                    f"{df}/min_freq": f"{gpu.freqs_hz[0]}\n",
                    f"{df}/max_freq": f"{gpu.freqs_hz[-1]}\n",
                    f"{df}/available_frequencies": f"{hz}\n",
                    f"{df}/governor": "simple_ondemand\n",
                    f"{df}/trans_stat": "",
                }
            )
        return files

    def write(self, t: Telemetry) -> None:
        """Rewrite the dynamic files whose content changed since the last write."""
        for rel, text in self.dynamic_files(t).items():
            if self._last.get(rel) != text:
                write_node(self.root / rel, text)
                self._last[rel] = text

    def read_charging_node(self) -> str | None:
        node = self.profile.battery.charging_node
        if node is None:
            return None
        try:
            return (self.root / node.removeprefix("/sys/")).read_text(encoding="utf-8").strip()
        except OSError:
            return None
