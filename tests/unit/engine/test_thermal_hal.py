"""The thermal HAL's temperatures from `dumpsys thermalservice` (AOSP ThermalManagerService
dumpInternal, android.os.Temperature.toString) for the cooldown gate and the trace."""

from __future__ import annotations

from farm.device.android import THERMAL_HAL_SOURCE, parse_hal_temperatures
from farm.engine.steering import Block, Steering, SteeringPlan
from farm.engine.thermal import hal_temperature_trace, parse_sample

DUMP = """IsStatusOverride: false
Thermal Status: 1
Cached temperatures:
\tTemperature{mValue=99.0, mType=0, mName=stale, mStatus=3}
HAL Ready: true
HAL connection:
\tThermalHAL 2.0 connected: yes
Current temperatures from HAL:
\tTemperature{mValue=41.5, mType=0, mName=BIG, mStatus=0}
\tTemperature{mValue=3.7, mType=6, mName=vbat, mStatus=0}
\tTemperature{mValue=33.25, mType=3, mName=VIRTUAL-SKIN, mStatus=0}
Current cooling devices from HAL:
\tCoolingDevice{mValue=0, mType=2, mName=thermal-cpufreq-0}
"""


def test_only_the_current_hal_section_and_only_temperatures_count() -> None:
    # Not the cached values above it, not the battery current limiter's voltage (TYPE_BCL_VOLTAGE).
    assert parse_hal_temperatures(DUMP.splitlines()) == {"BIG": 41.5, "VIRTUAL-SKIN": 33.25}
    assert parse_hal_temperatures(["Thermal Status: 0"]) == {}


def test_the_cooldown_gate_reads_the_hottest_hal_sensor() -> None:
    plan = SteeringPlan(1.0, 10.0, 40.0, 60.0, None, 1.0, 0.1)
    steering = Steering(plan)
    reply = steering.on_event(Block("thermalhal", tuple(DUMP.splitlines())), 0.0)
    assert reply is None
    report = steering.report
    assert report.temperature_start_c == 41.5 and report.temperature_source == THERMAL_HAL_SOURCE


def test_the_throttle_samples_carry_the_trace() -> None:
    sample = parse_sample("cpu /p0 1800000\n" + DUMP)
    assert sample.thermal_status == 1 and sample.hal_temps_c["BIG"] == 41.5
    plain = parse_sample("cpu /p0 1800000\nThermal Status: 0\n")
    assert hal_temperature_trace([(0.0, sample), (1.0, plain), (5.0, sample)]) == [(0.0, 41.5), (5.0, 41.5)]
