"""The idle baseline's pure parts: from an idle recording to a power (or a reason for none), and
how runs find it in their env.json."""

from __future__ import annotations

import pytest

from farm.analysis.power import BatteryCalibration
from farm.analysis.series import DEFAULT_SOURCES, Series, SeriesTrace
from farm.engine.baseline import (
    CHARGING_NOTE,
    NO_UPDATE_NOTE,
    IdleBaseline,
    baseline_of_trace,
    idle_power_mw_of,
)
from farm.engine.collect import charging_disabled_of

ABI = BatteryCalibration(discharge_sign=-1)  # µA, negative while discharging; µV
S = 1_000_000_000


def gauge_trace(readings_ua: list[float], *, gauge_s: float = 1.0, rate_hz: float = 10.0) -> SeriesTrace:
    """A 10 Hz sampler over a gauge that takes a new value every gauge_s (held in between)."""
    per = int(gauge_s * rate_hz)
    times = [int(i * S / rate_hz) for i in range(len(readings_ua) * per)]
    current = [readings_ua[i // per] for i in range(len(times))]
    return SeriesTrace(
        {
            DEFAULT_SOURCES.battery_current: Series.of(times, current),
            DEFAULT_SOURCES.battery_voltage: Series.of(times, [4_000_000.0] * len(times)),
        }
    )


def test_the_first_reading_is_left_out_and_the_rest_averaged() -> None:
    # The first value is from before charging went off (charging: negative power); then 250 and
    # 350 mA at 4 V: 1000 and 1400 mW.
    trace = gauge_trace([+500_000.0, -250_000.0, -350_000.0, -250_000.0, -350_000.0])
    baseline = baseline_of_trace(trace, ABI, charging_disabled=True)
    assert baseline.power_mw == pytest.approx(1200.0)
    assert baseline.readings == 4
    assert baseline.start_ns is not None and baseline.end_ns is not None
    assert baseline.start_ns > 0 and baseline.end_ns > 4 * S
    assert baseline.note is None


def test_no_baseline_while_charging_even_with_readings() -> None:
    trace = gauge_trace([-250_000.0, -260_000.0, -270_000.0])
    baseline = baseline_of_trace(trace, ABI, charging_disabled=False)
    assert baseline.power_mw is None and baseline.note == CHARGING_NOTE


def test_a_gauge_that_never_updated_gives_no_baseline() -> None:
    trace = gauge_trace([-250_000.0], gauge_s=5.0)  # one reading: the one left out
    baseline = baseline_of_trace(trace, ABI, charging_disabled=True)
    assert baseline.power_mw is None and baseline.note == NO_UPDATE_NOTE


def test_no_power_source_and_no_calibration_are_notes_not_numbers() -> None:
    empty = SeriesTrace({DEFAULT_SOURCES.gpu_busy: Series.of([0, S], [0.1, 0.2])})
    assert baseline_of_trace(empty, ABI, charging_disabled=True).power_mw is None
    uncalibrated = baseline_of_trace(gauge_trace([-1.0, -2.0]), None, charging_disabled=True)
    assert uncalibrated.power_mw is None and "calibration" in (uncalibrated.note or "").lower()


def test_runs_read_the_baseline_and_charging_state_from_env() -> None:
    baseline = IdleBaseline(812.5, 4, 5.0, 1, 2, True)
    assert idle_power_mw_of({"idle_baseline": baseline.to_json()}) == 812.5
    assert idle_power_mw_of({"idle_baseline": IdleBaseline(None, note="x").to_json()}) is None
    assert idle_power_mw_of({}) is None
    assert charging_disabled_of({"charging_disabled": False, "charging_restored": True}) is False
    assert charging_disabled_of({"charging_restored": True}) is True  # older runs
    assert charging_disabled_of({}) is None


def test_the_gauge_interval_is_the_median_gap_between_its_updates() -> None:
    # A slow gauge: a new value every 2.5 s; the run windows lengthen by it (engine.measurement).
    trace = gauge_trace([-250_000.0, -350_000.0, -250_000.0, -300_000.0], gauge_s=2.5)
    baseline = baseline_of_trace(trace, ABI, charging_disabled=True)
    assert baseline.gauge_interval_s == pytest.approx(2.5)
    assert baseline.to_json()["gauge_interval_s"] == pytest.approx(2.5)
