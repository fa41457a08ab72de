"""judge_discharge: energy counts only with proof that the battery fed the phone (issue 28)."""

from __future__ import annotations

from farm.analysis.discharge import BatteryState, DischargeEvidence, judge_discharge

DISCHARGING = BatteryState("Discharging", 80)
VOLTS_UV = (3_900_000.0,) * 4


def _judge(after: BatteryState | None, end: BatteryState | None, current: tuple[float, ...]):  # type: ignore[no-untyped-def]
    return judge_discharge(DischargeEvidence(after, end, current, VOLTS_UV))


def test_a_steady_discharge_is_proven_and_calibrates_unit_and_sign() -> None:
    proof = _judge(DISCHARGING, BatteryState("Discharging", 79), (-250_000.0, -260_000.0, -255_000.0))
    assert proof.proven and proof.reason is None
    assert proof.calibration is not None and proof.calibration.discharge_sign == -1
    assert proof.calibration.current_ua_per_unit == 1.0
    assert proof.power_mw is not None and 950 < proof.power_mw < 1050  # 0.255 A x 3.9 V


def test_battery_idle_status_is_refused_with_the_reason() -> None:
    proof = _judge(BatteryState("Not charging", 80), BatteryState("Not charging", 80), (0.0, 0.0, 0.0))
    assert not proof.proven and proof.reason is not None and "battery idle" in proof.reason


def test_a_current_near_zero_is_refused_even_when_status_says_discharging() -> None:
    proof = _judge(DISCHARGING, DISCHARGING, (-3.0, -2.0, -4.0))  # 3 mA: the battery idles
    assert not proof.proven and proof.reason is not None and "~0" in proof.reason


def test_a_current_that_changes_sign_or_a_rising_level_is_refused() -> None:
    flipping = _judge(DISCHARGING, DISCHARGING, (-250_000.0, 240_000.0, -250_000.0, 245_000.0, -251_000.0))
    assert not flipping.proven and flipping.reason is not None and "sign" in flipping.reason
    rising = _judge(DISCHARGING, BatteryState("Discharging", 82), (-250_000.0, -251_000.0))
    assert not rising.proven and rising.reason is not None and "rose" in rising.reason


def test_no_state_or_too_few_samples_proves_nothing() -> None:
    assert not _judge(None, None, (-250_000.0, -251_000.0)).proven
    assert not _judge(DISCHARGING, DISCHARGING, ()).proven  # the gauge never updated
