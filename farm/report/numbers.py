"""How a report writes a number, in tables and sentences alike (so a sentence's numbers can be
found in its tables)."""

from __future__ import annotations

from typing import Any


def number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        # Whole numbers from 100 up (power in mW, energy in mJ), three significant digits below.
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.{digits}g}"
    return str(value)


def interval(low: float, high: float) -> str:
    return f"[{number(low)}, {number(high)}]"
