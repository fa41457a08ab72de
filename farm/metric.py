"""The value object every metric is, from the program's output to the store and the report.

A value that could not be measured is NaN, never None: PostgreSQL stores NaN as it is, and SQLite
turns it into NULL, which the store reads back as NaN (`farm.store.runs.get_metrics`), so one
type holds on both backends and through the outbox's JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """One named value of one run; the name carries its unit too (`latency_median_ms`)."""

    name: str
    value: float
    unit: str

    @property
    def measured(self) -> bool:
        """False for a value that could not be measured (NaN)."""
        return not math.isnan(self.value)


def value_of(stored: float | None) -> float:
    """A stored value as a metric's value: a NULL (SQLite's NaN) is NaN."""
    return math.nan if stored is None else float(stored)
