import numpy as np
import pytest

from farm.analysis.power import (
    BatteryCalibration,
    battery_power,
    calibrate,
    energy_mj,
    idle_baseline_mw,
    per_window_energy_mj,
)
from farm.analysis.series import Series, SeriesTrace, step_integral

S = 1_000_000_000  # ns per second


def test_update_points_keep_only_changes() -> None:
    series = Series.of([0, 1, 2, 3, 4, 5], [5, 5, 5, 7, 7, 5])
    points = series.update_points()
    assert points.t_ns.tolist() == [0, 3, 5]
    assert points.values.tolist() == [5, 7, 5]


def test_step_integral_forward_and_trailing() -> None:
    series = Series.of([0, 2 * S, 4 * S], [10.0, 20.0, 30.0])
    # forward hold: [0,2)=10, [2,4)=20, [4,5]=30 -> 20 + 40 + 30
    assert step_integral(series, 0, 5 * S, trailing=False) == pytest.approx(90.0)
    # trailing: (-inf,0]=10, (0,2]=20, (2,4]=30, after=30 -> 40 + 60 + 30
    assert step_integral(series, 0, 5 * S, trailing=True) == pytest.approx(130.0)
    # windows inside one segment
    assert step_integral(series, 1 * S, 1 * S + S // 2, trailing=False) == pytest.approx(5.0)


def test_calibrate_conventions() -> None:
    # ABI: negative µA while discharging, µV
    abi = calibrate(np.array([-400_000.0, -420_000.0]), np.array([3_900_000.0]))
    assert (abi.discharge_sign, abi.current_ua_per_unit, abi.voltage_uv_per_unit) == (-1, 1.0, 1.0)
    # Samsung-like: positive mA while discharging, mV
    samsung = calibrate(np.array([410.0, 395.0]), np.array([3900.0]))
    assert (samsung.discharge_sign, samsung.current_ua_per_unit, samsung.voltage_uv_per_unit) == (
        1,
        1000.0,
        1000.0,
    )
    with pytest.raises(ValueError):
        calibrate(np.array([-400_000.0]), np.array([12.0]))
    with pytest.raises(ValueError):
        calibrate(np.array([0.0]), np.array([3_900_000.0]))


def _gauge_trace(current_raw: float, voltage_raw: float, sample_hz: int, update_s: float, seconds: float):
    """A gauge updating every update_s, sampled at sample_hz: repeats between updates."""
    t = np.arange(0, int(seconds * sample_hz)) * (S // sample_hz)
    update_index = np.floor(t / (update_s * S))
    # alternate the current slightly between updates so every update is a real change
    current = current_raw * (1.0 + 0.1 * (update_index % 2))
    voltage = np.full(t.size, voltage_raw)
    return SeriesTrace(
        {"battery.current_now": Series.of(t, current), "battery.voltage_now": Series.of(t, voltage)}
    ), t


def test_power_from_samples_known_answer_with_calibration() -> None:
    # Positive-discharge mA gauge: 500 mA / 550 mA alternating every second at 4.0 V (mV units).
    trace, _ = _gauge_trace(500.0, 4000.0, sample_hz=100, update_s=1.0, seconds=10.0)
    calibration = BatteryCalibration(discharge_sign=1, current_ua_per_unit=1000.0, voltage_uv_per_unit=1000.0)
    power = battery_power(trace, calibration)
    assert power is not None
    # only the real update points remain: one a second
    assert len(power) == 10
    assert set(np.round(power.values).tolist()) == {2000.0, 2200.0}
    # energy over [0, 10 s]: five seconds at 2000 mW + five at 2200 mW
    assert energy_mj(power, 0, 10 * S) == pytest.approx(21_000.0)


def test_negative_abi_sign_gives_positive_power() -> None:
    trace, _ = _gauge_trace(-500_000.0, 4_000_000.0, sample_hz=50, update_s=0.5, seconds=4.0)
    power = battery_power(trace, BatteryCalibration())
    assert power is not None
    assert np.all(power.values > 0)
    assert float(np.mean(power.values)) == pytest.approx(2100.0)


def test_missing_calibration_is_an_error_and_missing_sources_none() -> None:
    trace, _ = _gauge_trace(-500_000.0, 4_000_000.0, sample_hz=10, update_s=1.0, seconds=2.0)
    with pytest.raises(ValueError):
        battery_power(trace, None)
    assert battery_power(SeriesTrace({}), BatteryCalibration()) is None


def test_idle_baseline_and_per_iteration_energy() -> None:
    power = Series.of([0, 1 * S, 2 * S, 3 * S], [1000.0, 1000.0, 3000.0, 1000.0]).update_points()
    trace = SeriesTrace({"battery.power": power})
    assert (
        idle_baseline_mw(SeriesTrace({"battery.power": Series.of([0, 5 * S], [800.0, 800.0])}), None) == 800.0
    )
    assert idle_baseline_mw(trace, None, start_ns=0, end_ns=2 * S) == pytest.approx(1000.0)
    energies = per_window_energy_mj(
        power, np.array([0, 2 * S]), np.array([1 * S, 3 * S]), idle_power_mw=1000.0
    )
    assert energies.tolist() == pytest.approx([0.0, 2000.0])


def test_calibration_from_probe_conventions() -> None:
    calibration = BatteryCalibration.from_conventions(1, "mA", "mV")
    assert calibration.current_ua(np.array([500.0])).tolist() == [500_000.0]
    assert calibration.voltage_uv(np.array([4000.0])).tolist() == [4_000_000.0]
    assert BatteryCalibration.from_conventions(-1, None, None) == BatteryCalibration()
    with pytest.raises(ValueError, match="sign"):
        BatteryCalibration.from_conventions(None, "uA", "uV")
    with pytest.raises(ValueError, match="unit"):
        BatteryCalibration.from_conventions(-1, "nA", "uV")


def test_readings_restore_silent_rereads_of_an_unchanged_value() -> None:
    # a 1 s gauge sampled at 10 Hz: 5, 6, 7, then 7 again (silent), 7 (silent), 8
    t = np.arange(0, 60) * (S // 10)
    values = np.array([5] * 10 + [6] * 10 + [7] * 30 + [8] * 10, dtype=float)
    series = Series.of(t, values)
    assert series.update_period_ns() == S
    readings = series.readings()
    assert readings.t_ns.tolist() == [0, S, 2 * S, 3 * S, 4 * S, 5 * S]
    assert readings.values.tolist() == [5, 6, 7, 7, 7, 8]
    # the first sample marks the start of sampling, not an update: it does not set the period
    late = Series.of([0, S // 10, S + S // 10, 2 * S + S // 10], [1.0, 2.0, 3.0, 4.0])
    assert late.update_period_ns() == S


def test_steady_current_still_counts_as_readings() -> None:
    """A deterministic gauge under a steady load repeats its value: those are real readings."""
    t = np.arange(0, 200) * (S // 20)  # 10 s at 20 Hz
    second = t // S
    current = np.where(second < 3, -300_000.0 - 1_000 * second, -600_000.0)  # steady from 3 s on
    trace = SeriesTrace(
        {
            "battery.current_now": Series.of(t, current),
            "battery.voltage_now": Series.of(t, np.full(t.size, 4e6)),
        }
    )
    power = battery_power(trace, BatteryCalibration())
    assert power is not None
    inside = power.within(4 * S, 9 * S - 1)
    assert len(inside) == 5 and set(inside.values.tolist()) == {2400.0}


def test_update_period_ignores_a_single_glitch() -> None:
    # a 1 s gauge over 30 s, sampled at 100 Hz, with one mid-update glitch 10 ms long
    t = np.arange(0, 3000) * (S // 100)
    values = (t // S).astype(float)
    values[1501] = 99.0
    assert Series.of(t, values).update_period_ns() == pytest.approx(S, rel=0.03)
