"""The value object every metric is: a name that carries its unit, a value, and the unit itself."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    unit: str
