"""Heat (pure): one lumped die temperature driven by power, the thermal zones that show it, and
the kernel's step_wise governor that throttles the cooling devices bound to passive trips.

Temperature: dT/dt = (P * R - (T - T_amb)) / (R * C), solved exactly over each step (stable for
any dt). A zone reads ambient + gain * (T - ambient): the skin and the battery run cooler.

Cooling (Linux drivers/thermal/gov_step_wise.c, 6.x): each poll, for every (passive trip, cooling
device) binding of a zone: above the trip (or within its hysteresis once crossed) and rising ->
one state deeper; above and falling -> one state back; below -> one state back. A device's state
is the deepest any binding asks for. A cpufreq cooling device in state s caps its policy at the
table entry s steps below the top (devfreq likewise), which the physics turns into a lower CPU
quota, less power and, eventually, a temperature that hovers at the trip.

Thermal HAL status (what `dumpsys thermalservice` reports): a zone's status is the number of its
status_c thresholds (LIGHT..SHUTDOWN) it has reached; Thermal Status is the max over SKIN zones,
as ThermalManagerService computes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vphone.profile import Cooled, SensorType, ThermalSpec, TripType, ZoneSpec


def step_temperature_c(spec: ThermalSpec, temp_c: float, power_mw: float, dt_s: float) -> float:
    """Temperature after `dt_s` seconds at constant `power_mw`, starting from `temp_c`."""
    steady_c = spec.ambient_c + power_mw / 1000.0 * spec.r_c_per_w
    tau_s = spec.r_c_per_w * spec.c_j_per_c
    return steady_c + (temp_c - steady_c) * math.exp(-dt_s / tau_s)


def zone_temp_c(spec: ThermalSpec, zone: ZoneSpec, die_c: float) -> float:
    return spec.ambient_c + zone.gain * (die_c - spec.ambient_c)


def zone_status(zone: ZoneSpec, temp_c: float) -> int:
    """The thermal HAL's throttling status of one sensor: 0 NONE .. 6 SHUTDOWN."""
    return sum(1 for threshold in zone.status_c if temp_c >= threshold)


def thermal_status(spec: ThermalSpec, die_c: float) -> int:
    """IThermalService's Thermal Status: the highest status among the SKIN sensors."""
    statuses = [
        zone_status(z, zone_temp_c(spec, z, die_c)) for z in spec.zones if z.sensor is SensorType.SKIN
    ]
    return max(statuses, default=0)


@dataclass(frozen=True)
class CoolingDevice:
    """cooling_deviceN: `max_state` steps; which trips drive it is in the bindings."""

    name: str  # its sysfs `type`, e.g. thermal-cpufreq-0
    cooled: Cooled
    max_state: int
    index: int  # which policy for CPU devices; 0 for the GPU


@dataclass(frozen=True)
class Binding:
    zone: int
    trip: int
    device: int


@dataclass(frozen=True)
class CoolingState:
    """What step_wise remembers between polls."""

    instance_steps: tuple[int, ...]  # per binding
    crossed: tuple[bool, ...]  # per binding: above its trip at the last poll (hysteresis)
    last_zone_c: tuple[float, ...]  # per zone, for the trend
    device_steps: tuple[int, ...]  # per cooling device: its cur_state


def bindings_for(spec: ThermalSpec, devices: tuple[CoolingDevice, ...]) -> tuple[Binding, ...]:
    """Every passive trip of a zone is bound to every device of the kinds the zone cools."""
    out = []
    for zi, zone in enumerate(spec.zones):
        for ti, trip in enumerate(zone.trips):
            if trip.type is not TripType.PASSIVE:
                continue
            for di, dev in enumerate(devices):
                if dev.cooled in zone.cools:
                    out.append(Binding(zi, ti, di))
    return tuple(out)


def initial_cooling(spec: ThermalSpec, devices: tuple[CoolingDevice, ...], die_c: float) -> CoolingState:
    n = len(bindings_for(spec, devices))
    return CoolingState(
        instance_steps=(0,) * n,
        crossed=(False,) * n,
        last_zone_c=tuple(zone_temp_c(spec, z, die_c) for z in spec.zones),
        device_steps=(0,) * len(devices),
    )


def step_cooling(
    spec: ThermalSpec, devices: tuple[CoolingDevice, ...], state: CoolingState, die_c: float
) -> CoolingState:
    """One poll of the step_wise governor over every zone."""
    bindings = bindings_for(spec, devices)
    temps = tuple(zone_temp_c(spec, z, die_c) for z in spec.zones)
    steps, crossed = list(state.instance_steps), list(state.crossed)
    for k, b in enumerate(bindings):
        trip = spec.zones[b.zone].trips[b.trip]
        temp, last = temps[b.zone], state.last_zone_c[b.zone]
        throttle = temp >= trip.temp_c or (crossed[k] and temp > trip.temp_c - trip.hyst_c)
        upper = devices[b.device].max_state
        if throttle and temp > last:
            steps[k] = min(steps[k] + 1, upper)
        elif steps[k] > 0 and (not throttle or temp < last):
            steps[k] -= 1
        crossed[k] = throttle
    device_steps = [0] * len(devices)
    for k, b in enumerate(bindings):
        device_steps[b.device] = max(device_steps[b.device], steps[k])
    return CoolingState(tuple(steps), tuple(crossed), temps, tuple(device_steps))
