"""The telemetry physics of one phone: an asyncio task (~10 Hz) that measures what really runs on
the phone and drives its sysfs nodes, /proc/meminfo, the battery state and the ground-truth log.

Per tick: CPU time of the phone's processes (procscan) -> GPU busy (PoCL worker threads, divided
by wall time x gpu cores) and CPU busy cores (everything else) -> power (power.py, the profile's
model) -> temperature (thermal.py) and battery (battery.py) -> nodes in the profile's conventions.
Adreno's gpubusy is published per ~1 s window; current_now only at the fuel-gauge interval.
No random numbers anywhere: the same load gives the same telemetry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass

from farm.virtual import ctlfiles
from farm.virtual.battery import BatteryState, battery_current_ma, step_battery, voltage_mv
from farm.virtual.groundtruth import GroundTruthLog, TruthRow
from farm.virtual.nodes import Telemetry, TelemetryNodes, current_now_raw, write_node
from farm.virtual.power import pick_frequency, power_mw
from farm.virtual.procscan import ProcScanner
from farm.virtual.profile import Profile
from farm.virtual.sandbox import Sandbox, StateLayout
from farm.virtual.thermal import step_temperature_c

log = logging.getLogger(__name__)

TICK_S = 0.1
GPU_WINDOW_NS = 1_000_000_000  # kgsl closes a gpubusy window once its total passes 1 s
SLOW_EVERY_TICKS = 10  # battery state for dumpsys, meminfo, screen state: ~1 Hz
# /proc/meminfo: the phone's RAM, of which Android itself uses a fixed share and caches another.
SYSTEM_USED_FRACTION = 0.35
CACHED_FRACTION = 0.25


@dataclass(frozen=True)
class Sample:
    """One tick's measured load."""

    gpu_busy: float
    cpu_busy_cores: float
    rss_kb: int


def meminfo_text(ram_mb: int, phone_rss_kb: int) -> str:
    """A /proc/meminfo scaled to the profile's RAM; used memory grows with the phone's real RSS."""
    total = ram_mb * 1024
    cached = int(total * CACHED_FRACTION)
    used = int(total * SYSTEM_USED_FRACTION) + phone_rss_kb
    free = max(int(total * 0.02), total - used - cached)
    available = free + int(cached * 0.8)
    swap = total // 2
    rows = [
        ("MemTotal", total),
        ("MemFree", free),
        ("MemAvailable", available),
        ("Buffers", total // 200),
        ("Cached", cached),
        ("SwapCached", 0),
        ("Active", used // 2),
        ("Inactive", cached),
        ("SwapTotal", swap),
        ("SwapFree", swap),
        ("Dirty", 0),
        ("AnonPages", phone_rss_kb),
        ("Mapped", cached // 4),
        ("Shmem", total // 100),
    ]
    return "".join(f"{k + ':':<16}{v:>8} kB\n" for k, v in rows)


class Physics:
    """Owns the telemetry files of one phone. `prepare` lays them out; `start`/`stop` the task."""

    def __init__(
        self,
        profile: Profile,
        layout: StateLayout,
        sandbox: Sandbox,
        *,
        on_reboot_request: Callable[[], None] | None = None,
    ) -> None:
        self.profile = profile
        self.layout = layout
        self.sandbox = sandbox
        self.nodes = TelemetryNodes(profile, layout.sys)
        self.on_reboot_request = on_reboot_request
        self.log = GroundTruthLog(layout.ground_truth)
        self._task: asyncio.Task[None] | None = None
        self._scanner: ProcScanner | None = None
        # A phone that has been on for a while: at the steady temperature of idle with screen on.
        idle_mw = power_mw(profile.power, 0.0, 0.0, screen_on=True)
        self.temp_c = profile.thermal.ambient_c + idle_mw / 1000.0 * profile.thermal.r_c_per_w
        self.battery = BatteryState(float(profile.battery.initial_level), charging=True, current_ma=0.0)
        self.last_sample = Sample(0.0, 0.0, 0)
        self.last_power_mw = 0.0
        self._win_busy_ns = 0
        self._win_total_ns = 0
        self._gpubusy = (0, 0)
        self._gauge_at_ns = 0
        self._current_raw = 0
        self._screen_on = True
        self._tick_count = 0

    # -- lifecycle --------------------------------------------------------------------------------

    def prepare(self) -> None:
        """(Re)create the /sys tree and /proc/meminfo with idle values; before the sandbox starts."""
        shutil.rmtree(self.layout.sys, ignore_errors=True)
        bat = self.profile.battery
        idle_mw = power_mw(self.profile.power, 0.0, 0.0, self._screen_on)
        current = battery_current_ma(bat, self.battery.level_pct, idle_mw, self.battery.charging)
        self._current_raw = current_now_raw(self.profile, current)
        self._gauge_at_ns = time.monotonic_ns()
        self.nodes.create(self._telemetry(time.monotonic_ns(), self.profile.cpu.freqs_khz[0]))
        write_node(self.layout.meminfo, meminfo_text(self.profile.ram_mb, 0))
        self._write_battery_state()

    async def start(self) -> None:
        self._scanner = ProcScanner(self.sandbox.pidns)
        self._scanner.scan(time.monotonic(), 0)
        self.log.open()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"physics-{self.sandbox.serial}"
        )

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.log.close()

    async def _run(self) -> None:
        last_ns = time.monotonic_ns()
        while True:
            await asyncio.sleep(TICK_S)
            now_ns = time.monotonic_ns()
            try:
                self.tick(now_ns, now_ns - last_ns)
            except OSError as exc:
                # A vanished process or a state file mid-replace must not end the phone's physics.
                log.warning("%s: physics tick failed: %s", self.sandbox.serial, exc)
            last_ns = now_ns

    # -- one step ---------------------------------------------------------------------------------

    def measure(self, dt_ns: int) -> Sample:
        assert self._scanner is not None
        ncpu = os.cpu_count() or 1
        cpu = self._scanner.scan(time.monotonic(), dt_ns * ncpu)
        cores = self.profile.gpu.cores if self.profile.gpu else 1
        gpu_busy = min(1.0, cpu.pocl_ns / (dt_ns * cores)) if dt_ns > 0 else 0.0
        cpu_busy = min(float(ncpu), cpu.other_ns / dt_ns) if dt_ns > 0 else 0.0
        return Sample(gpu_busy=gpu_busy, cpu_busy_cores=cpu_busy, rss_kb=cpu.rss_kb)

    def tick(self, now_ns: int, dt_ns: int) -> None:
        p = self.profile
        dt_s = dt_ns / 1e9
        sample = self.measure(dt_ns)
        self.last_sample = sample
        slow = self._tick_count % SLOW_EVERY_TICKS == 0
        self._tick_count += 1
        if slow:
            self._screen_on = bool(
                ctlfiles.read_json(self.layout.ctl, ctlfiles.POWER, {}).get("screen_on", True)
            )
        charging = self.nodes.read_charging_node() != p.battery.charging_node_stop
        power = power_mw(p.power, sample.cpu_busy_cores, sample.gpu_busy, self._screen_on)
        self.last_power_mw = power
        self.temp_c = step_temperature_c(p.thermal, self.temp_c, power, dt_s)
        self.battery = step_battery(p.battery, self.battery, power, charging, dt_s)
        self._win_busy_ns += int(sample.gpu_busy * dt_ns)
        self._win_total_ns += dt_ns
        if self._win_total_ns >= GPU_WINDOW_NS:
            self._gpubusy = (self._win_busy_ns // 1000, self._win_total_ns // 1000)
            self._win_busy_ns = self._win_total_ns = 0
        if now_ns - self._gauge_at_ns >= p.battery.fuel_gauge_interval_s * 1e9:
            self._current_raw = current_now_raw(p, self.battery.current_ma)
            self._gauge_at_ns = now_ns
        ncpu = os.cpu_count() or 1
        cpu_freq = pick_frequency(p.cpu.freqs_khz, (sample.cpu_busy_cores + sample.gpu_busy) / ncpu)
        self.nodes.write(self._telemetry(now_ns, cpu_freq))
        if slow:
            self._write_battery_state()
            write_node(self.layout.meminfo, meminfo_text(p.ram_mb, sample.rss_kb))
            if (self.layout.ctl / ctlfiles.REBOOT_REQUEST).exists() and self.on_reboot_request:
                self.on_reboot_request()
        self.log.write(
            TruthRow(
                t_ns=now_ns,
                power_mw=power,
                gpu_busy=sample.gpu_busy,
                cpu_busy_cores=sample.cpu_busy_cores,
                temp_c=self.temp_c,
                charging=charging,
                level_pct=self.battery.level_pct,
                current_ma=self.battery.current_ma,
                voltage_mv=voltage_mv(p.battery, self.battery.level_pct),
                screen_on=self._screen_on,
            )
        )

    def _telemetry(self, now_ns: int, cpu_freq_khz: int) -> Telemetry:
        p = self.profile
        gpu_freq = 0
        if p.gpu is not None:
            busy, total = self._gpubusy
            gpu_freq = pick_frequency(p.gpu.freqs_hz, busy / total if total else 0.0)
        level = int(self.battery.level_pct)
        return Telemetry(
            gpu_busy_us=self._gpubusy[0],
            gpu_total_us=self._gpubusy[1],
            gpu_freq_hz=gpu_freq,
            cpu_freq_khz=cpu_freq_khz,
            temp_mc=round(self.temp_c * 1000),
            battery_level=level,
            battery_status=self._status(),
            voltage_uv=round(voltage_mv(p.battery, self.battery.level_pct) * 1000),
            current_raw=self._current_raw,
            charge_counter_uah=round(self.battery.level_pct / 100 * p.battery.capacity_mah * 1000),
            usb_online=True,
        )

    def _status(self) -> str:
        # The cable is always in (the phone is on adb); a stopped charger shows "Not charging".
        return self.battery.status() if self.battery.charging else "Not charging"

    def _write_battery_state(self) -> None:
        """What BatteryService would read from the HAL, for `dumpsys battery` inside the phone."""
        codes = {"Charging": 2, "Discharging": 3, "Not charging": 4, "Full": 5}
        state = {
            "ac": False,
            "usb": True,
            "wireless": False,
            "dock": False,
            "max_charging_current_ua": 500000,
            "max_charging_voltage_uv": 5000000,
            "charge_counter_uah": round(
                self.battery.level_pct / 100 * self.profile.battery.capacity_mah * 1000
            ),
            "status": codes[self._status()],
            "health": 2,
            "present": True,
            "level": int(self.battery.level_pct),
            "scale": 100,
            "voltage_mv": round(voltage_mv(self.profile.battery, self.battery.level_pct)),
            "temperature_dc": round(self.temp_c * 10),
            "technology": "Li-ion",
        }
        ctlfiles.write_json(self.layout.ctl, ctlfiles.BATTERY_STATE, state)
