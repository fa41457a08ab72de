"""Proof that the battery alone powered the phone while a run measured (pure).

Switching charging off is not proof of that (shared/reference/real-phone-audit.md, finding 4):
some switches stop charging but keep the power path, so USB powers the phone, the battery idles
at ~0 mA and battery power reads ~0 mW (ACC's "battery idle mode"); others are unreliable or
undone by the charger driver. So energy counts only with evidence from the run itself: the
charger driver's `status` Discharging after the switch and at the end, a current of one steady
sign and a plausible size, and a level that did not rise. The same discharging samples are the
only ones the current's unit and sign are calibrated from (finding 5: a phone plugged in and full
reads a few mA of noise of either sign).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from farm.analysis.power import BatteryCalibration, calibrate

DISCHARGING = "Discharging"
# Below this the battery is not what powers an awake phone (audit finding 5: 0.05-15 W).
MIN_DISCHARGE_MW = 50.0
MAX_DISCHARGE_MW = 15_000.0
# The share of current samples that must have the discharge sign (gauge noise flips a few).
MIN_SIGN_SHARE = 0.9
# One reading after the gauge's first update is what a run's energy window waits for
# (farm.analysis.power: the window is extended until the gauge updated, capped).
MIN_CURRENT_SAMPLES = 1


@dataclass(frozen=True)
class BatteryState:
    """The charger driver's view at one moment: power_supply/battery `status` and `capacity`."""

    status: str | None
    level_pct: int | None


@dataclass(frozen=True)
class DischargeEvidence:
    """What a run saw after its charging switch: the battery's state right after the switch and
    at the end of the benchmark, and the run's raw gauge samples (current and voltage)."""

    after_switch: BatteryState | None
    at_end: BatteryState | None
    current_raw: tuple[float, ...]
    voltage_raw: tuple[float, ...]


@dataclass(frozen=True)
class DischargeProof:
    """proven: the battery powered the phone (energy counts); else `reason` says why not.
    `calibration`: the current's unit and sign from the run's own discharging samples."""

    proven: bool
    reason: str | None
    calibration: BatteryCalibration | None = None
    power_mw: float | None = None  # median battery power over the run's samples

    def to_json(self) -> dict[str, object]:
        return {"proven": self.proven, "reason": self.reason, "power_mw": self.power_mw}


def _refuse(reason: str) -> DischargeProof:
    return DischargeProof(False, reason)


def judge_discharge(evidence: DischargeEvidence) -> DischargeProof:
    """Whether the run's energy counts, and the calibration its samples give (see the module)."""
    states = [s for s in (evidence.after_switch, evidence.at_end) if s is not None]
    if not states:
        return _refuse("no battery status after the charging switch: discharge not proven")
    for state in states:
        if state.status != DISCHARGING:
            shown = state.status or "unreadable"
            if state.status in ("Not charging", "Full"):
                return _refuse(
                    f"battery status {shown} after the charging switch: USB powers the phone (battery idle)"
                )
            return _refuse(f"battery status {shown} after the charging switch, not Discharging")
    first, last = states[0].level_pct, states[-1].level_pct
    if first is not None and last is not None and last > first:
        return _refuse(f"battery level rose from {first}% to {last}% while charging was off")
    current = np.asarray(evidence.current_raw, dtype=np.float64)
    voltage = np.asarray(evidence.voltage_raw, dtype=np.float64)
    if current.size < MIN_CURRENT_SAMPLES or voltage.size == 0:
        return _refuse("too few battery current samples to prove discharge")
    try:
        calibration = calibrate(current, voltage)
    except ValueError as error:
        return _refuse(f"battery current does not show a discharge: {error}")
    share = float(np.mean(np.sign(current) == calibration.discharge_sign))
    if share < MIN_SIGN_SHARE:
        return _refuse(
            f"battery current changes sign ({share:.0%} of samples one way): not a steady discharge"
        )
    ua = calibration.current_ua(current)
    uv = calibration.voltage_uv(np.full(current.shape, float(np.median(voltage))))
    power_mw = float(np.median(ua * uv)) / 1e9
    if power_mw < MIN_DISCHARGE_MW:
        return DischargeProof(
            False,
            f"battery power {power_mw:.0f} mW is ~0: the charging switch leaves the battery idle",
            power_mw=power_mw,
        )
    if power_mw > MAX_DISCHARGE_MW:
        return DischargeProof(
            False, f"battery power {power_mw:.0f} mW is implausible: unit or sign wrong", power_mw=power_mw
        )
    return DischargeProof(True, None, calibration, power_mw)
