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


NO_INTERVAL = "– (1 run)"


def interval_of(low: float, high: float, runs: int) -> str:
    """A CI over runs as text; a single run has none (a zero-width interval would read as certainty)."""
    return interval(low, high) if runs > 1 else NO_INTERVAL


def estimate(value: str, ci: str) -> str:
    """`0.476 [0.41, 0.52]` for a sentence, or `0.476 (1 run)` where there is no interval."""
    return f"{value} (1 run)" if ci == NO_INTERVAL else f"{value} {ci}"
