"""A run's measurement-quality metrics, added to its computed metrics before they are stored:
what the throttle watch saw (farm.engine.thermal) and the validity flags (farm.analysis.validity)
judged against the experiment's requirements."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from farm.analysis.iterations import measured_iterations
from farm.analysis.sustained import sustained_metrics
from farm.analysis.validity import Requirements, assess
from farm.engine.collect import read_events
from farm.engine.model import PreparedPhone, RunResult
from farm.spec.clocks import ClockMode
from farm.spec.model import Experiment
from farm.spec.sections import PowerSource
from farm.store import Metric


def requirements_of(experiment: Experiment) -> Requirements:
    m = experiment.measurement
    if m.sustained_s is not None:  # a fixed window: its iterations are however many fit
        return Requirements(
            min_seconds=m.sustained_s, min_iterations=1, sustained=True, energy=_energy(experiment)
        )
    min_seconds, min_iterations = m.min_seconds, m.iterations
    if experiment.benchmark.external:
        # An external program is held to the measurement's counts only when it is given them.
        used = experiment.benchmark.placeholder_names()
        min_seconds = min_seconds if "min_seconds" in used else 0.0
        min_iterations = min_iterations if "iters" in used else 1
    return Requirements(min_seconds=min_seconds, min_iterations=min_iterations, energy=_energy(experiment))


def _energy(experiment: Experiment) -> bool:
    return experiment.telemetry.power is not PowerSource.NONE


def sustained_of(artifacts: Path) -> list[Metric]:
    """A sustained run's drift metrics from its iterations (farm.analysis.sustained)."""
    try:
        iterations = measured_iterations(read_events(artifacts / "stdout.jsonl"))
    except ValueError:
        return []
    return [Metric(m.name, m.value, m.unit) for m in sustained_metrics(iterations)]


def measurement_metrics(
    experiment: Experiment,
    prepared: PreparedPhone,
    result: RunResult,
    computed: Sequence[Metric],
    artifacts: Path | None = None,
) -> list[Metric]:
    """Throttling, sustained-run and validity metrics of one attempt."""
    extra = result.throttle.metrics() if result.throttle is not None else []
    if experiment.measurement.sustained_s is not None and artifacts is not None:
        extra += sustained_of(artifacts)
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
