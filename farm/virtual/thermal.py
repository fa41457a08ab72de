"""First-order thermal model of the phone: one lumped die/skin temperature driven by power.

dT/dt = (P * R - (T - T_amb)) / (R * C), solved exactly over each step (stable for any dt).
"""

from __future__ import annotations

import math

from farm.virtual.profile import ThermalSpec


def step_temperature_c(spec: ThermalSpec, temp_c: float, power_mw: float, dt_s: float) -> float:
    """Temperature after `dt_s` seconds at constant `power_mw`, starting from `temp_c`."""
    steady_c = spec.ambient_c + power_mw / 1000.0 * spec.r_c_per_w
    tau_s = spec.r_c_per_w * spec.c_j_per_c
    return steady_c + (temp_c - steady_c) * math.exp(-dt_s / tau_s)
