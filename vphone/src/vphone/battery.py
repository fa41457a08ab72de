"""Battery model: level, voltage and the true battery current from power and the charger.

Sign convention inside farm: battery_current_ma > 0 flows INTO the battery (charging), as in
Android's BatteryManager; nodes.current_now_raw() turns it into the profile's quirky current_now.
"""

from __future__ import annotations

from dataclasses import dataclass

from vphone.profile import BatterySpec, ChargingEffect

# Above this level the charger tapers its current linearly down to zero at 100 %.
TAPER_START_PCT = 90.0


@dataclass(frozen=True)
class BatteryState:
    level_pct: float  # 0..100, fractional; sysfs shows the rounded-down integer
    charging: bool  # current really flows in (cable in and the charging node not stopping it)
    current_ma: float  # true battery current, > 0 into the battery
    idle: bool = False  # charging stopped but USB powers the phone (a "battery idle" switch)

    def status(self) -> str:
        """POWER_SUPPLY_PROP_STATUS as the charger driver reports it (the cable is always in:
        the phone is on adb)."""
        if self.charging:
            return "Full" if self.level_pct >= 100.0 else "Charging"
        return "Not charging" if self.idle else "Discharging"


def voltage_mv(spec: BatterySpec, level_pct: float) -> float:
    """Open-circuit voltage: falls slowly with level (a gentle curve, steeper when nearly empty)."""
    x = max(0.0, min(1.0, level_pct / 100.0))
    span = spec.voltage_full_mv - spec.voltage_empty_mv
    return spec.voltage_empty_mv + span * (0.15 * x**0.25 + 0.85 * x)


def battery_current_ma(spec: BatterySpec, level_pct: float, power_mw: float, charging: bool) -> float:
    """True current into the battery: the charger's (tapered) current, none while a "battery
    idle" switch lets USB power the phone, or the load's drain."""
    if not charging and spec.charging_effect is ChargingEffect.BATTERY_IDLE:
        return 0.0
    if charging:
        if level_pct >= 100.0:
            return 0.0
        taper = min(1.0, (100.0 - level_pct) / (100.0 - TAPER_START_PCT))
        return spec.charge_current_ma * taper
    return -power_mw / (voltage_mv(spec, level_pct) / 1000.0)


def step_battery(
    spec: BatterySpec, state: BatteryState, power_mw: float, charging: bool, dt_s: float
) -> BatteryState:
    """Integrate the charge over `dt_s`; the level moves `level_time_scale` times faster than the
    true energy would move it, so drain and charge are visible within minutes."""
    current = battery_current_ma(spec, state.level_pct, power_mw, charging)
    delta_pct = current * dt_s / 3600.0 / spec.capacity_mah * 100.0 * spec.level_time_scale
    level = max(0.0, min(100.0, state.level_pct + delta_pct))
    idle = not charging and spec.charging_effect is ChargingEffect.BATTERY_IDLE
    return BatteryState(level_pct=level, charging=charging, current_ma=current, idle=idle)
