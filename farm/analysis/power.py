"""Battery power and energy from fuel-gauge samples, after the phone's sign and unit calibration.

`current_now` differs by vendor in sign (negative when discharging per the ABI, positive on some,
always positive on others) and unit (µA per the ABI, mA on Samsung); `voltage_now` is µV or mV.
`BatteryCalibration` records one phone's convention; `calibrate` infers it from samples taken while
the phone is known to be discharging. Power is V x I on the gauge's real update points only
(`Series.update_points`), held between updates, and energy is its integral on the phone's clock.
Units: power in mW, energy in mJ (mW x s), times in ns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from farm.analysis.series import DEFAULT_SOURCES, Series, SourceNames, TraceLike, step_integral, step_mean

# |current| below this (in raw units) means the gauge reports mA, not µA: no phone draws < 20 mA
# while awake, and none draws > 20 A (adb-and-telemetry.md 4.1).
MILLIAMP_HINT_LIMIT = 20_000
# Plausible single-cell Li-ion voltage, used to tell µV from mV and to reject nonsense.
VOLTAGE_RANGE_V = (2.5, 5.0)
_CURRENT_UA_PER = {"uA": 1.0, "µA": 1.0, "mA": 1000.0}
_VOLTAGE_UV_PER = {"uV": 1.0, "µV": 1.0, "mV": 1000.0, "V": 1e6}


@dataclass(frozen=True)
class BatteryCalibration:
    """How to turn one phone's raw `current_now` / `voltage_now` into µA (discharge > 0) and µV.

    `discharge_sign` is the sign the raw current has while discharging (-1 per the ABI; +1 for
    phones that report positive or always-positive values). `gauge_trailing`: the gauge reports
    the average over the period that ends at its update (True) rather than an instantaneous
    reading (False); it decides whether a value holds before or after its update point.
    """

    discharge_sign: int = -1
    current_ua_per_unit: float = 1.0
    voltage_uv_per_unit: float = 1.0
    gauge_trailing: bool = False

    def __post_init__(self) -> None:
        if self.discharge_sign not in (-1, 1):
            raise ValueError(f"discharge_sign must be -1 or +1, got {self.discharge_sign}")

    @classmethod
    def from_conventions(
        cls,
        discharge_sign: int | None,
        current_unit: str | None,
        voltage_unit: str | None,
        *,
        gauge_trailing: bool = False,
    ) -> BatteryCalibration:
        """From what the probe found (farm.telemetry.probe.Battery): sign -1/+1, "uA"/"mA",
        "uV"/"mV"/"V". An unknown sign is an error: calibrate() from discharging samples instead."""
        if discharge_sign is None:
            raise ValueError("the battery current's sign while discharging is unknown: calibrate first")
        current_scale = _CURRENT_UA_PER.get(current_unit or "uA")
        voltage_scale = _VOLTAGE_UV_PER.get(voltage_unit or "uV")
        if current_scale is None:
            raise ValueError(f"unknown battery current unit {current_unit!r} (uA or mA)")
        if voltage_scale is None:
            raise ValueError(f"unknown battery voltage unit {voltage_unit!r} (uV, mV or V)")
        return cls(discharge_sign, current_scale, voltage_scale, gauge_trailing)

    def current_ua(self, raw: np.ndarray) -> np.ndarray:
        """Discharge current in µA, positive while the battery discharges."""
        return raw * self.current_ua_per_unit * self.discharge_sign

    def voltage_uv(self, raw: np.ndarray) -> np.ndarray:
        return raw * self.voltage_uv_per_unit


def calibrate(
    current_raw: np.ndarray, voltage_raw: np.ndarray, *, gauge_trailing: bool = False
) -> BatteryCalibration:
    """Infer sign and units from raw samples taken while the phone is known to be discharging."""
    currents = np.asarray(current_raw, dtype=np.float64)
    voltages = np.asarray(voltage_raw, dtype=np.float64)
    if currents.size == 0 or voltages.size == 0:
        raise ValueError("calibration needs current and voltage samples")
    typical_current = float(np.median(currents))
    if typical_current == 0.0:
        raise ValueError("battery current reads 0 while discharging: the phone is probably charging")
    sign = 1 if typical_current > 0 else -1
    current_scale = 1000.0 if abs(typical_current) < MILLIAMP_HINT_LIMIT else 1.0
    typical_voltage = float(np.median(voltages))
    for voltage_scale in (1.0, 1000.0):
        volts = typical_voltage * voltage_scale / 1e6
        if VOLTAGE_RANGE_V[0] <= volts <= VOLTAGE_RANGE_V[1]:
            return BatteryCalibration(sign, current_scale, voltage_scale, gauge_trailing)
    raise ValueError(f"battery voltage {typical_voltage:g} is neither a plausible µV nor mV reading")


def _hold_at(series: Series, at_ns: np.ndarray, *, trailing: bool) -> np.ndarray:
    """Value of a piecewise-constant series at each time (see step_integral for the two readings)."""
    if trailing:
        index = np.searchsorted(series.t_ns, at_ns, side="left")
    else:
        index = np.searchsorted(series.t_ns, at_ns, side="right") - 1
    return series.values[np.clip(index, 0, len(series) - 1)]


def battery_power(
    trace: TraceLike, calibration: BatteryCalibration | None, sources: SourceNames = DEFAULT_SOURCES
) -> Series | None:
    """Battery power in mW (positive while discharging) at the gauge's update points, or None.

    A trace that already carries power (Trepn, a ground-truth log) is used as is; otherwise current
    and voltage are calibrated and multiplied at the current's update points (the voltage held
    there): each point is one real reading of the gauge, which `window_power_mw` relies on.
    """
    direct = trace.series(sources.battery_power)
    if direct is not None and len(direct) > 0:
        return direct  # Trepn, ground truth: every sample is a reading
    current = trace.series(sources.battery_current)
    voltage = trace.series(sources.battery_voltage)
    if current is None or voltage is None or len(current) == 0 or len(voltage) == 0:
        return None
    if calibration is None:
        raise ValueError("battery current/voltage need a BatteryCalibration for this phone")
    current = current.readings()
    voltage = voltage.update_points()
    trailing = calibration.gauge_trailing
    times = current.t_ns
    current_ua = calibration.current_ua(_hold_at(current, times, trailing=trailing))
    voltage_uv = calibration.voltage_uv(_hold_at(voltage, times, trailing=trailing))
    return Series(times, current_ua * voltage_uv * 1e-9)


def energy_mj(power_mw: Series, start_ns: int, end_ns: int, *, trailing: bool = False) -> float:
    """Energy in mJ over [start_ns, end_ns] of a held power signal."""
    return step_integral(power_mw, start_ns, end_ns, trailing=trailing)


def window_power_mw(
    power_mw: Series, start_ns: int, end_ns: int, *, trailing: bool = False
) -> tuple[float, int]:
    """Mean power over [start_ns, end_ns) and how many gauge readings fell inside it.

    `power_mw` holds the gauge's readings (battery_power gives them). An instantaneous gauge
    (trailing=False) reports snapshots: the readings taken inside the window are samples of the
    power while it ran, so their mean estimates the window's mean, without the bias of holding a
    pre-window reading (idle, or from before charging was switched off) into it. No reading inside:
    NaN, nothing is known. A trailing (averaging) gauge's readings cover the intervals that end at
    them, so its held signal is integrated exactly.
    """
    inside = power_mw.values[(power_mw.t_ns >= start_ns) & (power_mw.t_ns < end_ns)]
    if trailing:
        return step_mean(power_mw, start_ns, end_ns, trailing=True), int(inside.size)
    if inside.size == 0:
        return float("nan"), 0
    return float(np.mean(inside)), int(inside.size)


def mean_power_mw(power_mw: Series, start_ns: int, end_ns: int, *, trailing: bool = False) -> float:
    return step_mean(power_mw, start_ns, end_ns, trailing=trailing)


def idle_baseline_mw(
    trace: TraceLike,
    calibration: BatteryCalibration | None,
    *,
    start_ns: int | None = None,
    end_ns: int | None = None,
    sources: SourceNames = DEFAULT_SOURCES,
) -> float:
    """Mean battery power of an idle recording (the phone awake, nothing of ours running).

    Measure it per phone per session: the idle draw drifts with screen, radio and temperature.
    Without a window, the whole recording between its first and last power update is used.
    """
    power = battery_power(trace, calibration, sources)
    if power is None or len(power) == 0:
        raise ValueError("the idle recording has no battery power samples")
    start = int(power.t_ns[0]) if start_ns is None else start_ns
    end = int(power.t_ns[-1]) + 1 if end_ns is None else end_ns  # the whole recording: its last reading too
    trailing = calibration.gauge_trailing if calibration else False
    mean_mw, readings = window_power_mw(power, start, max(end, start + 1), trailing=trailing)
    if readings == 0 and not trailing:
        raise ValueError("no battery power reading inside the idle window")
    return mean_mw


def per_window_energy_mj(
    power_mw: Series,
    starts_ns: np.ndarray,
    ends_ns: np.ndarray,
    *,
    idle_power_mw: float = 0.0,
    trailing: bool = False,
) -> np.ndarray:
    """Energy above the idle baseline in each [start, end] window (e.g. per iteration), in mJ."""
    return np.array(
        [
            energy_mj(power_mw, int(s), int(e), trailing=trailing) - idle_power_mw * (int(e) - int(s)) / 1e9
            for s, e in zip(starts_ns, ends_ns, strict=True)
        ],
        dtype=np.float64,
    )
