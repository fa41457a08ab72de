"""A run's measurement-quality metrics, added to its computed metrics before they are stored:
what the throttle watch saw (farm.engine.thermal) and the validity flags (farm.analysis.validity)
judged against the experiment's requirements."""

from __future__ import annotations

from collections.abc import Sequence

from farm.analysis.validity import Requirements, assess
from farm.engine.model import PreparedPhone, RunResult
from farm.spec.clocks import ClockMode
from farm.spec.model import Experiment
from farm.spec.sections import PowerSource
from farm.store import Metric


def requirements_of(experiment: Experiment) -> Requirements:
    m = experiment.measurement
    return Requirements(
        min_seconds=m.min_seconds,
        min_iterations=m.iterations,
        energy=experiment.telemetry.power is not PowerSource.NONE,
    )


def measurement_metrics(
    experiment: Experiment, prepared: PreparedPhone, result: RunResult, computed: Sequence[Metric]
) -> list[Metric]:
    """Throttling and validity metrics of one attempt (pure over what the attempt recorded)."""
    extra = result.throttle.metrics() if result.throttle is not None else []
    values = {m.name: m.value for m in [*computed, *extra] if m.value is not None}
    if result.throttle is not None:
        # Any sign counts: the GPU clock drop in the trace, a CPU or GPU cap, the thermal status.
        values["throttled"] = float(values.get("throttled", 0.0) >= 0.5 or result.throttle.throttled)
    clocks = prepared.clocks
    validity = assess(
        values,
        requirements_of(experiment),
        charging_disabled=result.charging_disabled,
        clocks_ok=clocks.as_requested
        if clocks is not None and clocks.requested is not ClockMode.NONE
        else None,
    )
    return [*extra, *(Metric(m.name, float(m.value), m.unit) for m in validity.to_metrics())]
