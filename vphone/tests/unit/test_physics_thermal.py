"""Heat: trip points, the step_wise governor, the thermal HAL status and `dumpsys thermalservice`
(pure; the closed loop of power -> temperature -> caps -> quota -> power is simulated)."""

from __future__ import annotations

import math
import re

from vphone.power import power_mw
from vphone.profile import Profile
from vphone.profiles import available_profiles, load_profile
from vphone.socmodel import SocModel
from vphone.thermal import (
    initial_cooling,
    step_cooling,
    step_temperature_c,
    thermal_status,
    zone_temp_c,
)
from vphone.thermalservice import dump_thermalservice, java_float

HOT = load_profile("adreno-sd888-hot")
TICK_NS = 100_000_000


def _idle_c(p: Profile) -> float:
    return p.thermal.ambient_c + power_mw(p.power, 0, 0, screen_on=True) / 1000 * p.thermal.r_c_per_w


def _run(
    p: Profile, model: SocModel, temp_c: float, seconds: float, busy_cores: float, t0_ns: int
) -> tuple[float, int, list[tuple[float, float]]]:
    """Closed loop: the load uses at most its CPU quota; returns (temp, t_ns, [(t_s, speed)])."""
    t_ns, trace = t0_ns, []
    for _ in range(round(seconds * 1e9 / TICK_NS)):
        quota = model.quotas({}).cpu
        used = min(busy_cores, quota)
        temp_c = step_temperature_c(
            p.thermal, temp_c, power_mw(p.power, used, 0, screen_on=True), TICK_NS / 1e9
        )
        t_ns += TICK_NS
        model.advance(t_ns, TICK_NS, temp_c, used / max(quota, 1e-6), 0.0)
        trace.append((t_ns / 1e9, model.soc.cpu_speed(model.state)))
    return temp_c, t_ns, trace


def test_hot_profile_throttles_within_seconds_holds_the_trip_and_recovers() -> None:
    model = SocModel(HOT)
    temp = _idle_c(HOT)
    model.reset_heat(temp)
    trip = HOT.thermal.zones[0].trips[0].temp_c
    assert temp < trip
    temp, t_ns, trace = _run(HOT, model, temp, 20.0, busy_cores=1.0, t0_ns=0)
    first = next(t for t, speed in trace if speed < 1.0)
    assert first < 5.0, first  # a heavy load throttles within seconds on this profile
    assert min(speed for _, speed in trace) < 0.7  # deep enough to see in latency
    unthrottled_c = HOT.thermal.ambient_c + power_mw(HOT.power, 1.0, 0, True) / 1000 * HOT.thermal.r_c_per_w
    assert trip < temp < trip + 0.3 * (unthrottled_c - trip)  # held near the trip (step_wise overshoots)
    assert model.cooling.device_steps[0] > 0
    status_hot = thermal_status(HOT.thermal, temp)
    assert status_hot >= 1
    temp, _, trace = _run(HOT, model, temp, 20.0, busy_cores=0.0, t0_ns=t_ns)
    assert trace[-1][1] == 1.0 and all(s == 0 for s in model.cooling.device_steps)  # caps released
    assert temp < trip - 3 and thermal_status(HOT.thermal, temp) < status_hot


def test_realistic_profiles_throttle_within_minutes_not_seconds() -> None:
    for name in ("adreno-sd865", "adreno-sd8gen2", "mali-tensor"):
        p = load_profile(name)
        model = SocModel(p)
        temp = _idle_c(p)
        model.reset_heat(temp)
        t_ns, first = 0, None
        for _ in range(600):  # 10 min in 1 s steps, CPU core and GPU busy
            power = power_mw(p.power, min(1.0, model.quotas({}).cpu), model.soc.gpu_speed(model.state), True)
            temp = step_temperature_c(p.thermal, temp, power, 1.0)
            t_ns += 1_000_000_000
            model.advance(t_ns, 1_000_000_000, temp, 1.0, 1.0)
            if first is None and model.soc.cpu_speed(model.state) < 1.0:
                first = t_ns / 1e9
        assert first is not None and 20 < first < 300, (name, first)


def test_step_wise_steps_one_state_per_poll_and_honours_hysteresis() -> None:
    spec, devices = HOT.thermal, SocModel(HOT).devices
    trip = spec.zones[0].trips[0]
    state = initial_cooling(spec, devices, trip.temp_c - 5)
    for k, t in enumerate((trip.temp_c + 0.1, trip.temp_c + 0.2, trip.temp_c + 0.3), 1):
        state = step_cooling(spec, devices, state, t)
        assert state.device_steps[0] == k  # rising above the trip: one state deeper per poll
    state = step_cooling(spec, devices, state, trip.temp_c + 0.3)
    assert state.device_steps[0] == 3  # stable above the trip: held
    state = step_cooling(spec, devices, state, trip.temp_c - trip.hyst_c / 2)
    assert state.device_steps[0] == 2  # falling inside the hysteresis: one state back
    state = step_cooling(spec, devices, state, trip.temp_c - trip.hyst_c - 1)
    state = step_cooling(spec, devices, state, trip.temp_c - trip.hyst_c - 1)
    assert state.device_steps[0] == 0
    gpu = [i for i, d in enumerate(devices) if d.cooled.value == "gpu"]
    assert gpu and state.device_steps[gpu[0]] == 0  # the GPU trip (48 C) was never crossed


def test_zone_temperatures_and_hal_status_follow_the_profile() -> None:
    spec = HOT.thermal
    skin = next(z for z in spec.zones if z.sensor.value == "skin")
    die = 45.0
    assert math.isclose(zone_temp_c(spec, skin, die), spec.ambient_c + skin.gain * (die - spec.ambient_c))
    levels = [thermal_status(spec, (t - spec.ambient_c) / skin.gain + spec.ambient_c) for t in skin.status_c]
    assert levels == [1, 2, 3, 4, 5, 6]
    assert thermal_status(spec, _idle_c(HOT)) == 0


def test_dumpsys_thermalservice_has_the_framework_layout() -> None:
    model = SocModel(HOT)
    steps = (3, 3, 3, 1)
    text = dump_thermalservice(HOT, 46.0, model.devices, steps, None)
    lines = text.splitlines()
    assert lines[0] == "IsStatusOverride: false"
    order = [
        "ThermalEventListeners:",
        "ThermalStatusListeners:",
        "Cached temperatures:",
        "HAL Ready: true",
        "HAL connection:",
        "Current temperatures from HAL:",
        "Current cooling devices from HAL:",
        "Temperature static thresholds from HAL:",
    ]  # Android 13: AIDL HAL with thresholds
    assert [lines.index(h) for h in order] == sorted(lines.index(h) for h in order)
    assert "\tThermalHAL AIDL 1  connected: yes" in lines
    status = int(re.search(r"^Thermal Status: (\d)$", text, re.M).group(1))  # type: ignore[union-attr]
    assert status == thermal_status(HOT.thermal, 46.0) == 1  # skin 41.8 C: past LIGHT (40), not MODERATE (43)
    temps = re.findall(r"Temperature\{mValue=([\d.]+), mType=(-?\d), mName=([^,]+), mStatus=(\d)\}", text)
    assert {(name, int(t)) for _, t, name, _ in temps} == {
        (z.type, z.sensor.hal_type) for z in HOT.thermal.zones
    }
    assert "\tCoolingDevice{mValue=3, mType=2, mName=cpufreq-cpu0}" in lines
    assert "\tCoolingDevice{mValue=1, mType=3, mName=thermal-devfreq-0}" in lines
    assert any(
        ln.startswith(
            "\tTemperatureThreshold{mType=3, mName=skin-therm, mHotThrottlingThresholds=[NaN, 40.0, 43.0"
        )
        for ln in lines
    )
    overridden = dump_thermalservice(HOT, 30.0, model.devices, steps, 5)
    assert "IsStatusOverride: true" in overridden and "Thermal Status: 5" in overridden
    old = load_profile("adreno-sd865")  # Android 12: the HIDL 2.0 HAL, no thresholds section
    text12 = dump_thermalservice(old, 30.0, SocModel(old).devices, (0, 0, 0, 0), None)
    assert "\tThermalHAL 2.0 connected: yes" in text12 and "thresholds" not in text12
    assert "mName=thermal-cpufreq-7" in text12


def test_java_float_matches_float_to_string() -> None:
    assert java_float(45.0) == "45.0" and java_float(44.812) == "44.812" and java_float(math.nan) == "NaN"


def test_every_profile_has_trips_in_order_and_a_skin_sensor() -> None:
    for name in available_profiles():
        zones = load_profile(name).thermal.zones
        assert any(z.sensor.value == "skin" and z.status_c for z in zones), name
        assert any(z.cools for z in zones), name
