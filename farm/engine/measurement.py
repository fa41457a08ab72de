"""A run's measurement-quality metrics, added to its computed metrics before they are stored:
what the throttle watch saw (farm.engine.thermal) and the validity flags (farm.analysis.validity)
judged against the experiment's requirements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from farm.analysis.iterations import measured_iterations
from farm.analysis.layers import LayerResult, parse_layers
from farm.analysis.sustained import sustained_metrics
from farm.analysis.validity import Requirements, assess
from farm.engine.affinity import AffinityReadback
from farm.engine.collect import read_events
from farm.engine.model import IdleBaseline, PreparedPhone, RunResult
from farm.engine.pagecache import cold_start_metrics
from farm.experiment.clocks import ClockMode
from farm.experiment.model import Experiment
from farm.experiment.sections import PowerSource
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


@dataclass(frozen=True)
class EnergyWindow:
    """How long a run measures at least: measurement.min_seconds, or longer when battery power is
    measured and the phone's fuel gauge is slow, so the window holds `telemetry.gauge_updates`
    gauge updates (capped by measurement.max_seconds: then `capped`, and the report's data-quality
    notes still name runs with too few readings)."""

    min_seconds: float
    extended: bool = False
    capped: bool = False
    gauge_interval_s: float | None = None  # None: not known (no idle baseline), or no energy
    wanted_s: float | None = None  # gauge_updates x gauge_interval_s

    def to_metrics(self) -> list[Metric]:
        if self.gauge_interval_s is None:
            return []
        return [
            Metric("energy_window_extended", float(self.extended), "bool"),
            Metric("energy_window_capped", float(self.capped), "bool"),
            Metric("energy_window_min_s", self.min_seconds, "s"),
            Metric("gauge_interval_s", self.gauge_interval_s, "s"),
        ]


def gauge_interval_s(baseline: IdleBaseline | None) -> float | None:
    """The fuel gauge's update interval, from the idle baseline (the calibration farm does on each
    phone): the median gap between the updates it saw; with a single update, its window over its
    readings, an upper bound that errs on the side of a longer measuring window."""
    if baseline is None or baseline.power_mw is None:
        return None
    if baseline.gauge_interval_s is not None and baseline.gauge_interval_s > 0:
        return baseline.gauge_interval_s
    if baseline.readings < 1 or baseline.sampled_s <= 0:
        return None
    return baseline.sampled_s / baseline.readings


def energy_window(
    min_seconds: float, max_seconds: float, *, energy: bool, interval_s: float | None, updates: int
) -> EnergyWindow:
    """Pure: the measuring window a run needs (see EnergyWindow)."""
    if not energy or interval_s is None:
        return EnergyWindow(min_seconds)
    wanted = updates * interval_s
    if wanted <= min_seconds:
        return EnergyWindow(min_seconds, gauge_interval_s=interval_s, wanted_s=wanted)
    return EnergyWindow(
        min(wanted, max_seconds),
        extended=min(wanted, max_seconds) > min_seconds,
        capped=wanted > max_seconds,
        gauge_interval_s=interval_s,
        wanted_s=wanted,
    )


def energy_window_of(experiment: Experiment, prepared: PreparedPhone) -> EnergyWindow:
    m = experiment.measurement
    if m.sustained_s is not None:  # a fixed window: it is what the experiment asks for
        return EnergyWindow(m.sustained_s)
    return energy_window(
        m.min_seconds,
        m.max_seconds,
        energy=_energy(experiment),
        interval_s=gauge_interval_s(prepared.idle_baseline),
        updates=experiment.telemetry.gauge_updates,
    )


def sustained_of(artifacts: Path) -> list[Metric]:
    """A sustained run's drift metrics from its iterations (farm.analysis.sustained)."""
    try:
        iterations = measured_iterations(read_events(artifacts / "stdout.jsonl"))
    except ValueError:
        return []
    return [Metric(m.name, m.value, m.unit) for m in sustained_metrics(iterations)]


def layers_of(artifacts: Path) -> tuple[LayerResult, ...]:
    """The per-layer results of a program that reports layers (cnn), for the layers table."""
    return parse_layers(read_events(artifacts / "stdout.jsonl"))


def affinity_as_requested(readback: AffinityReadback | None) -> bool | None:
    """The flag of a run pinned with taskset: its mask read back as asked (None: no judgement)."""
    narrowed = readback.narrowed if readback is not None else None
    return None if narrowed is None else not narrowed


def measurement_metrics(
    experiment: Experiment,
    prepared: PreparedPhone,
    result: RunResult,
    computed: Sequence[Metric],
    artifacts: Path | None = None,
) -> list[Metric]:
    """Throttling, sustained-run, energy-window and validity metrics of one attempt."""
    extra = result.throttle.metrics() if result.throttle is not None else []
    extra += energy_window_of(experiment, prepared).to_metrics()
    extra += cold_start_metrics(result.page_cache, {m.name: m.value for m in computed})
    if experiment.measurement.sustained_s is not None and artifacts is not None:
        extra += sustained_of(artifacts)
    values = {m.name: m.value for m in [*computed, *extra] if m.measured}
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
        clocks_held=result.clock_hold.held if result.clock_hold is not None else None,
        affinity_as_requested=affinity_as_requested(result.affinity),
    )
    return [*extra, *(Metric(m.name, float(m.value), m.unit) for m in validity.to_metrics())]
