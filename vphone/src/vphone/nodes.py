"""The phone's /sys telemetry tree at the profile's real Android paths, and how values are written.

Values are written IN PLACE (pwrite + ftruncate, same inode) rather than by rename: samplers on
real phones keep sysfs files open and re-read them with lseek/pread, and that must see new values.
Files are root-owned: shell can read (unless listed unreadable, mode 000) but not write; the
charging-control node and the clock nodes (clocknodes.py) are writable by the phone's root only.
This module has the battery, USB and GPU-load nodes; clocknodes.py the CPU/GPU clocks, hotplug
and thermal zones.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vphone import beneath as beneath_files
from vphone.profile import CurrentUnit, DischargeSign, GpuKind, Profile

BATTERY_DIR = "class/power_supply/battery"
USB_DIR = "class/power_supply/usb"
KGSL_DEVICE = "devices/platform/soc/3d00000.qcom,kgsl-3d0/kgsl/kgsl-3d0"
log = logging.getLogger(__name__)
RO_MODE = 0o444
NODE_MAX_BYTES = 4096  # a sysfs attribute is at most a page
RW_MODE = 0o644


@dataclass(frozen=True)
class Telemetry:
    """What the load and battery nodes show at one instant (in the phone's quirky conventions)."""

    gpu_busy_us: int  # over the last closed window
    gpu_total_us: int
    gpu_freq_hz: int
    battery_temp_mc: int  # millidegrees C
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


def kstrtol_store(data: bytes) -> str | None:
    """What a sysfs store that parses its value with kstrtol (power_supply_store_property,
    drivers/power/supply/power_supply_sysfs.c) keeps from ONE write(2): the integer as the node
    then reads it, or None when the kernel refuses the write (EINVAL). kstrtol takes an optional
    sign, digits and one trailing newline (lib/kstrtox.c, _kstrtoull); a lone "\n", which toybox
    0.8.5-0.8.10's printf "%s\n" sends as a second write(2), has no digits and is refused."""
    text = data.decode("ascii", errors="replace").removesuffix("\n")
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits.isdigit() or not digits.isascii():
        return None
    return str(int(text))


def write_node(path: Path, text: str, beneath: Path | None = None) -> None:
    """Replace a file's content keeping its inode (see the module doc). `beneath`: the tree the
    phone's root owns, below which no link is followed (vphone.beneath); a last-component link is
    never followed."""
    data = text.encode()
    flags = os.O_WRONLY | os.O_CREAT
    if beneath is not None:
        fd = beneath_files.open_file(beneath, str(path.relative_to(beneath)), flags, RO_MODE)
    else:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, RO_MODE)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


class NodeFiles:
    """Creates files and links under one sysfs root and rewrites those whose text changed."""

    def __init__(self, root: Path, root_owner: tuple[int, int] | None = None) -> None:
        self.root = root
        # Host uid/gid that the phone's root is: owner of the nodes root may write (rooted phones).
        self.root_owner = root_owner
        self._last: dict[str, str] = {}
        self._refused: set[str] = set()  # nodes the phone replaced: logged once
        # Told each text written, after its file (vphone.nodemirror serves them over FUSE).
        self.on_written: Callable[[str, str], None] | None = None

    def file(self, rel: str, text: str, mode: int = RO_MODE, *, root_writable: bool = False) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        path.write_text(text, encoding="utf-8")
        os.chmod(path, mode)
        if root_writable and self.root_owner is not None and os.geteuid() == 0:
            os.chown(path, *self.root_owner)
        self._last[rel] = text

    def link(self, rel: str, target: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        path.symlink_to(target)

    def write_changed(self, files: dict[str, str]) -> list[str]:
        """Rewrite the files whose content changed; returns their relative paths. A node the
        phone's root replaced by something else (a link, a FIFO, a directory) is skipped, said
        once in the log: the other nodes go on."""
        changed = []
        for rel, text in files.items():
            if self._last.get(rel) != text:
                try:
                    write_node(self.root / rel, text, beneath=self.root)
                except OSError as error:
                    if rel not in self._refused:
                        self._refused.add(rel)
                        log.warning("cannot write %s/%s: %s", self.root, rel, error.strerror or error)
                    continue
                self._refused.discard(rel)
                self._last[rel] = text
                if self.on_written is not None:
                    self.on_written(rel, text)
                changed.append(rel)
        return changed

    def write_guarded(self, rel: str, text: str, *, expected: str | None) -> bool:
        """Rewrite `rel` only if it still holds `expected` (someone else may write it too);
        the check and the write are microseconds apart, the best a plain file allows."""
        try:
            if beneath_files.read_text(self.root, rel) != expected:
                return False
        except OSError:
            return False
        write_node(self.root / rel, text, beneath=self.root)
        self._last[rel] = text
        if self.on_written is not None:
            self.on_written(rel, text)
        return True

    def last(self, rel: str) -> str | None:
        """What this object last wrote to `rel` (to tell our own writes from the phone's)."""
        return self._last.get(rel)

    def forget(self) -> None:
        self._last = {}


class TelemetryNodes:
    """Creates the battery/GPU-load tree once (`create`) and rewrites its dynamic files (`write`)."""

    def __init__(self, profile: Profile, files: NodeFiles) -> None:
        self.profile = profile
        self.files = files
        self.root = files.root

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
            f"{bat}/temp": f"{t.battery_temp_mc // 100}\n",
            f"{bat}/charge_counter": f"{t.charge_counter_uah}\n",
            f"{USB_DIR}/online": "1\n" if t.usb_online else "0\n",
        }
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
        else:
            dev = f"devices/platform/{p.gpu.devfreq_name}"
            files[f"{dev}/utilization"] = f"{pct}\n"
            files[f"{dev}/clock"] = f"{mhz}\n"
        return files

    def create(self, t: Telemetry) -> None:
        """Lay out the tree (static files, links, the dynamic files' first values)."""
        p = self.profile
        self.root.mkdir(parents=True, exist_ok=True)
        bat = BATTERY_DIR
        static = {
            f"{bat}/type": "Battery\n",
            f"{bat}/present": "1\n",
            f"{bat}/health": "Good\n",
            f"{bat}/technology": "Li-ion\n",
            f"{bat}/charge_full_design": f"{p.battery.capacity_mah * 1000}\n",
            f"{bat}/voltage_max_design": f"{p.battery.voltage_full_mv * 1000}\n",
            f"{USB_DIR}/type": "USB\n",
        }
        if p.gpu is not None:
            static.update(self._gpu_static())
        for rel, text in static.items():
            self.files.file(rel, text)
        for rel, text in self.dynamic_files(t).items():
            self.files.file(rel, text)
        if p.battery.charging_node is not None:
            rel = p.battery.charging_node.removeprefix("/sys/")
            self.files.file(rel, f"{p.battery.charging_node_resume}\n", RW_MODE, root_writable=True)
        if p.gpu is not None and p.gpu.kind is GpuKind.ADRENO:
            self.files.link("class/kgsl/kgsl-3d0", f"../../{KGSL_DEVICE}")
        elif p.gpu is not None:
            dev = f"devices/platform/{p.gpu.devfreq_name}"
            self.files.link("class/misc/mali0/device", f"../../../{dev}")

    def hide_unreadable(self) -> None:
        """Mode 000 for the profile's `unreadable` paths (after every tree is laid out)."""
        for phone_path in self.profile.unreadable:
            host = self.root / phone_path.removeprefix("/sys/")
            if not host.exists():
                self.files.file(str(Path(os.path.realpath(host)).relative_to(self.root.resolve())), "")
            os.chmod(os.path.realpath(host), 0)

    def _gpu_static(self) -> dict[str, str]:
        gpu = self.profile.gpu
        assert gpu is not None
        mhz = [f // 1_000_000 for f in gpu.freqs_hz]
        files = {
            "kernel/gpu/gpu_model": f"{gpu.model}\n",
            "kernel/gpu/gpu_max_clock": f"{mhz[-1]}\n",
            "kernel/gpu/gpu_min_clock": f"{mhz[0]}\n",
            "kernel/gpu/gpu_freq_table": " ".join(str(m) for m in mhz) + "\n",
        }
        if gpu.kind is GpuKind.ADRENO:
            files[f"{KGSL_DEVICE}/gpu_model"] = f"{gpu.model}\n"
        else:
            files[f"devices/platform/{gpu.devfreq_name}/gpuinfo"] = f"{gpu.model} MP7 r0p0 0x0\n"
        return files

    def write(self, t: Telemetry) -> None:
        """Rewrite the dynamic files whose content changed since the last write."""
        self.files.write_changed(self.dynamic_files(t))

    def charging_rel(self) -> str | None:
        """The charging switch's path below /sys (None: the profile has none)."""
        node = self.profile.battery.charging_node
        return None if node is None else node.removeprefix("/sys/")

    def store_charging_node(self, data: bytes) -> bool:
        """Root's write(2) to the charging switch, judged as its kernel store judges it; False:
        refused (EINVAL), the node keeps its value."""
        rel = self.charging_rel()
        value = kstrtol_store(data)
        if rel is None or value is None:
            return False
        self.files.write_changed({rel: f"{value}\n"})
        return True

    def read_charging_node(self) -> str | None:
        node = self.profile.battery.charging_node
        if node is None:
            return None
        # The phone's root owns /sys on rooted profiles: the node may be a link (to any host file)
        # or a FIFO by now, so it is read beneath the tree, without blocking, and bounded.
        try:
            return beneath_files.read_text(self.root, node.removeprefix("/sys/"), NODE_MAX_BYTES).strip()
        except OSError:
            return None
