"""The newest readings of a trace, as the live view shows them (farm.analysis.latest)."""

from __future__ import annotations

import pytest

from farm.analysis.latest import Readings, newest_readings
from farm.analysis.power import BatteryCalibration
from farm.analysis.series import DEFAULT_SOURCES, Series, SeriesTrace

S = 1_000_000_000


def test_the_last_value_of_each_source_in_the_runs_own_units() -> None:
    trace = SeriesTrace(
        {
            DEFAULT_SOURCES.gpu_busy: Series.of([0, S, 2 * S], [10.0, 35.0, 62.0]),  # percent
            DEFAULT_SOURCES.battery_current: Series.of([0, S], [-300_000.0, -500_000.0]),  # µA
            DEFAULT_SOURCES.battery_voltage: Series.of([0, S], [4_000_000.0, 3_900_000.0]),  # µV
            "thermal.battery": Series.of([0, 3 * S], [30_500.0, 41_250.0]),  # m°C
        }
    )
    readings = newest_readings(trace, BatteryCalibration(discharge_sign=-1))
    assert readings.gpu_busy == pytest.approx(0.62)
    assert readings.power_mw == pytest.approx(0.5 * 3.9 * 1000)  # 500 mA at 3.9 V
    assert readings.temperature_c == pytest.approx(41.25)
    assert readings.t_ns == 3 * S


def test_power_needs_a_calibration_and_an_empty_trace_has_nothing() -> None:
    trace = SeriesTrace(
        {
            DEFAULT_SOURCES.battery_current: Series.of([0], [-300_000.0]),
            DEFAULT_SOURCES.battery_voltage: Series.of([0], [4_000_000.0]),
        }
    )
    assert newest_readings(trace, None) == Readings(t_ns=None)
    assert newest_readings(SeriesTrace({}), BatteryCalibration(discharge_sign=-1)) == Readings()
