"""The pure parts of the physics: power, thermal, battery, current_now quirks, frequencies."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from vphone.battery import BatteryState, battery_current_ma, step_battery, voltage_mv
from vphone.nodes import Telemetry, current_now_raw
from vphone.physics import meminfo_text
from vphone.power import pick_frequency, power_mw
from vphone.profiles import load_profile
from vphone.thermal import step_temperature_c

SD = load_profile("adreno-sd8gen2")
N6P = load_profile("adreno-nexus6p")
MALI = load_profile("mali-tensor")


def test_power_model_is_the_documented_sum() -> None:
    p = SD.power
    assert power_mw(p, 0, 0, screen_on=False) == p.idle_mw
    assert (
        power_mw(p, 2, 0.5, screen_on=True)
        == p.idle_mw + 2 * p.cpu_core_mw + 0.5 * p.gpu_busy_mw + p.screen_mw
    )
    assert power_mw(p, 0, 3.0, screen_on=False) == p.idle_mw + p.gpu_busy_mw  # busy clamps to 1


def test_thermal_step_matches_the_exact_solution_and_composes() -> None:
    spec = SD.thermal
    t_inf = spec.ambient_c + 3.0 * spec.r_c_per_w
    one = step_temperature_c(spec, spec.ambient_c, 3000, 10.0)
    assert math.isclose(
        one, t_inf + (spec.ambient_c - t_inf) * math.exp(-10 / (spec.r_c_per_w * spec.c_j_per_c))
    )
    t = spec.ambient_c
    for _ in range(100):
        t = step_temperature_c(spec, t, 3000, 0.1)
    assert math.isclose(t, one, rel_tol=1e-9)
    assert step_temperature_c(spec, 60.0, 0, 1.0) < 60.0  # cools toward ambient without power


@given(st.floats(0, 100))
def test_voltage_falls_with_level_within_design_range(level: float) -> None:
    v = voltage_mv(SD.battery, level)
    assert SD.battery.voltage_empty_mv <= v <= SD.battery.voltage_full_mv
    assert voltage_mv(SD.battery, max(0.0, level - 5)) <= v


def test_battery_drains_by_energy_and_charges_with_taper() -> None:
    spec = SD.battery
    s = BatteryState(50.0, charging=False, current_ma=0)
    drained = step_battery(spec, s, 4000, charging=False, dt_s=60)
    expected_ma = -4000 / (voltage_mv(spec, 50.0) / 1000)
    assert math.isclose(drained.current_ma, expected_ma)
    assert math.isclose(
        50 - drained.level_pct, -expected_ma / 60 / spec.capacity_mah * 100 * spec.level_time_scale
    )
    charged = step_battery(spec, s, 4000, charging=True, dt_s=60)
    assert charged.level_pct > 50 and charged.current_ma == spec.charge_current_ma
    assert battery_current_ma(spec, 95.0, 0, charging=True) == spec.charge_current_ma / 2
    assert battery_current_ma(spec, 100.0, 0, charging=True) == 0
    assert step_battery(spec, BatteryState(0.01, False, 0), 9000, charging=False, dt_s=600).level_pct == 0


def test_current_now_sign_and_unit_per_profile() -> None:
    assert current_now_raw(SD, -500.0) == -500_000  # uA, negative discharging
    assert current_now_raw(N6P, -500.0) == 500_000  # uA, positive discharging
    assert current_now_raw(MALI, -500.0) == -500  # mA


def test_frequency_follows_load() -> None:
    freqs = (100, 200, 400, 800)
    assert pick_frequency(freqs, 0.0) == 100
    assert pick_frequency(freqs, 0.3) == 400
    assert pick_frequency(freqs, 1.0) == 800


def test_gpu_percent_and_meminfo_scaling() -> None:
    t = Telemetry(250_000, 1_000_000, 1, 25000, 50, "Charging", 4_000_000, 0, 0, True)
    assert t.gpu_percent == 25
    small = meminfo_text(2048, 0)
    big = meminfo_text(2048, 500_000)
    assert small.splitlines()[0].split()[1] == str(2048 * 1024)
    assert int(big.splitlines()[1].split()[1]) < int(small.splitlines()[1].split()[1])
