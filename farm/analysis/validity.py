"""Whether a run's numbers can be trusted, MLPerf-style: one flag per condition, `valid` their
conjunction for the metrics they concern (pure).

    validity = assess(metrics_by_name, Requirements(min_seconds=1.0, min_iterations=50, ...))
    validity.valid(Concern.LATENCY)  # min duration, iterations, load, throttling, clocks
    validity.valid(Concern.ENERGY)   # all of those, and charging off, enough fuel-gauge readings
    validity.to_metrics()            # stored with the run's metrics (`valid_<check>` 1/0, `valid`)
    Validity.from_metrics(stored)    # back from the store, for reports, exports and compare

A flag that does not apply (no background load asked, no clock control asked, no power measured)
is absent, not true: it neither makes a run valid nor invalid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from farm.metric import Metric

FLAG_PREFIX = "valid_"
VALID = "valid"  # the latency conjunction; what figures and cell statistics filter on
VALID_ENERGY = "valid_energy"
FLAG_UNIT = "bool"
# Fewer distinct fuel-gauge readings than this over a run is not an energy measurement (a gauge
# updates every 1-10 s; field-practices.md).
MIN_FUEL_GAUGE_READINGS = 3


class Check(StrEnum):
    MIN_DURATION = "min_duration"  # measured at least measurement.min_seconds
    MIN_ITERATIONS = "min_iterations"  # measured at least measurement.iterations
    LOAD_REACHED = "load_reached"  # the background GPU load was within tolerance
    NOT_THROTTLED = "not_throttled"  # no clock cap under load (not checked in sustained mode)
    CLOCKS_AS_REQUESTED = "clocks_as_requested"  # the clock control asked is the one applied
    CLOCKS_HELD = "clocks_held"  # every pinned clock node read its pin all through the run
    AFFINITY_AS_REQUESTED = "affinity_as_requested"  # the benchmark's CPU mask was the one asked
    CHARGING_DISABLED = "charging_disabled"  # the battery alone powered the phone
    FUEL_GAUGE_READINGS = "fuel_gauge_readings"  # enough fuel-gauge readings for an energy figure


class Concern(StrEnum):
    LATENCY = "latency"
    ENERGY = "energy"


LATENCY_CHECKS = (
    Check.MIN_DURATION,
    Check.MIN_ITERATIONS,
    Check.LOAD_REACHED,
    Check.NOT_THROTTLED,
    Check.CLOCKS_AS_REQUESTED,
    Check.CLOCKS_HELD,
    Check.AFFINITY_AS_REQUESTED,
)
CONCERNS: Mapping[Concern, tuple[Check, ...]] = {
    Concern.LATENCY: LATENCY_CHECKS,
    Concern.ENERGY: (*LATENCY_CHECKS, Check.CHARGING_DISABLED, Check.FUEL_GAUGE_READINGS),
}
_SUMMARY = {Concern.LATENCY: VALID, Concern.ENERGY: VALID_ENERGY}


def concern_of(metric: str) -> Concern:
    """Which validity a metric needs: energy and power need the energy checks too."""
    return Concern.ENERGY if metric.startswith(("energy", "power")) else Concern.LATENCY


def below_zero(metrics: Mapping[str, float], metric: str) -> bool:
    """An energy or power below zero: net energy under the idle baseline's noise, or battery power
    while the battery charged. It is no measurement of the run and is never shown as a result."""
    value = metrics.get(metric)
    return value is not None and value < 0 and metric.startswith(("energy_", "power_"))


def usable(metrics: Mapping[str, float], metric: str) -> bool:
    """Whether a run with these stored metrics counts for `metric` (its concern's flags hold, and
    it is not an energy or power below zero)."""
    return Validity.from_metrics(metrics).valid(concern_of(metric)) and not below_zero(metrics, metric)


@dataclass(frozen=True)
class Requirements:
    """What the experiment asked of every run."""

    min_seconds: float
    min_iterations: int
    sustained: bool = False  # throttling is what a sustained run measures
    energy: bool = False  # power is measured: charging and the fuel gauge matter


@dataclass(frozen=True)
class Validity:
    flags: Mapping[Check, bool] = field(default_factory=dict)  # absent: does not apply

    def valid(self, concern: Concern = Concern.LATENCY) -> bool:
        return all(self.flags.get(check, True) for check in CONCERNS[concern])

    def failed(self, concern: Concern = Concern.ENERGY) -> tuple[Check, ...]:
        return tuple(check for check in CONCERNS[concern] if self.flags.get(check) is False)

    def to_metrics(self) -> list[Metric]:
        metrics = [
            Metric(f"{FLAG_PREFIX}{check.value}", float(ok), FLAG_UNIT) for check, ok in self.flags.items()
        ]
        metrics += [Metric(name, float(self.valid(concern)), FLAG_UNIT) for concern, name in _SUMMARY.items()]
        return metrics

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, float]) -> Validity:
        """From a run's stored metrics; a run stored before validity existed has no flags (valid)."""
        flags = {}
        for check in Check:
            value = metrics.get(f"{FLAG_PREFIX}{check.value}")
            if value is not None:
                flags[check] = value >= 0.5
        return cls(flags)


def assess(
    metrics: Mapping[str, float],
    required: Requirements,
    *,
    charging_disabled: bool | None,
    clocks_ok: bool | None,
    clocks_held: bool | None = None,
    affinity_as_requested: bool | None = None,
) -> Validity:
    """The flags of one run from its metrics (farm.analysis.metrics names) and what the engine knows
    of its conditions (None: does not apply)."""
    flags: dict[Check, bool] = {}
    measured_s = metrics.get("measured_s")
    if measured_s is not None:
        # The benchmark stops at min_seconds at the earliest; allow the clocks' rounding.
        flags[Check.MIN_DURATION] = measured_s >= required.min_seconds * 0.99
    iterations = metrics.get("iterations_measured")
    if iterations is not None:
        flags[Check.MIN_ITERATIONS] = iterations >= required.min_iterations
    reached = metrics.get("gpu_load_reached")
    if reached is not None:
        flags[Check.LOAD_REACHED] = reached >= 0.5
    throttled = metrics.get("throttled")
    if throttled is not None and not required.sustained:
        flags[Check.NOT_THROTTLED] = throttled < 0.5
    if clocks_ok is not None:
        flags[Check.CLOCKS_AS_REQUESTED] = clocks_ok
    if clocks_held is not None:
        flags[Check.CLOCKS_HELD] = clocks_held
    if affinity_as_requested is not None:
        flags[Check.AFFINITY_AS_REQUESTED] = affinity_as_requested
    if required.energy:
        if charging_disabled is not None:
            flags[Check.CHARGING_DISABLED] = charging_disabled
        readings = metrics.get("power_readings")
        if readings is not None:
            flags[Check.FUEL_GAUGE_READINGS] = readings >= MIN_FUEL_GAUGE_READINGS
    return Validity(flags)
