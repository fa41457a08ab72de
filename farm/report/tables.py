"""Tables and notes of a report, computed from ReportData alone (pure)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from farm.adapters.output import GRANULARITY_METRIC
from farm.analysis.aggregate import Observation, aggregate
from farm.analysis.metrics import GPU_LOAD_TOLERANCE_PP as TOLERANCE_PP
from farm.analysis.validity import Validity
from farm.report.model import OWN_CI, ReportData
from farm.report.numbers import number
from farm.store.results import StoredResult
from farm.store.runs import RunState

# The metrics a cell table shows, when any run has them.
TABLE_METRICS: tuple[str, ...] = (
    "latency_median_ms",
    "latency_p90_ms",
    "throughput_per_s",
    "energy_per_inference_mj",
    "power_mean_mw",
    "gpu_load_mean",
    "data_movement_share",
    "rss_peak_mb",
    "temperature_max_c",
)
# Fewer fuel-gauge readings than this inside a run's measured window make its energy uncertain.
FEW_POWER_READINGS = 3
STATES: tuple[RunState, ...] = (
    RunState.DONE,
    RunState.FAILED,
    RunState.SKIPPED,
    RunState.RUNNING,
    RunState.PENDING,
)


@dataclass(frozen=True)
class Cell:
    """One cell on one phone: its runs' medians with a CI across repetitions."""

    factors: tuple[tuple[str, Any], ...]
    device_id: str | None
    done: int
    failed: int
    values: dict[str, tuple[float, float, float]]  # metric -> (median, ci_low, ci_high)
    # Pooled over phones (device_id None): metric -> (lowest, highest) of the per-phone medians,
    # and how many phones had a value; empty per phone.
    spread: dict[str, tuple[float, float, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Failure:
    run_id: str
    cell_id: str
    device_id: str | None
    reason: str


def table_metrics(data: ReportData) -> list[str]:
    present = {name for run in data.done_runs for name in run.metrics}
    return [name for name in TABLE_METRICS if name in present]


def cells(data: ReportData, *, by_device: bool = True) -> list[Cell]:
    """One Cell per cell and phone, or per cell over all phones (device_id None) when not by_device."""
    groups: dict[tuple[str, str | None], list[StoredResult]] = {}
    for run in data.runs:
        groups.setdefault((run.cell_id, run.device_id if by_device else None), []).append(run)
    metrics = table_metrics(data)
    result = []
    for (_, device_id), runs in groups.items():
        done = [r for r in runs if r.state is RunState.DONE]
        values: dict[str, tuple[float, float, float]] = {}
        for metric in metrics:
            observations = [
                _observation(r, metric) for r in done if metric in r.metrics and data.counts(r, metric)
            ]
            if observations:
                stat = aggregate(observations)[0]
                values[metric] = (stat.median, stat.ci_low, stat.ci_high)
        factors = tuple((name, runs[0].factors.get(name)) for name in data.factor_names)
        failed = sum(1 for r in runs if r.state is RunState.FAILED)
        spread = {} if by_device else _between_phones(data, done, metrics)
        result.append(Cell(factors, device_id, len(done), failed, values, spread))
    result.sort(key=lambda c: (str(c.device_id), [_order(v) for _, v in c.factors]))
    return result


def _between_phones(
    data: ReportData, done: list[StoredResult], metrics: list[str]
) -> dict[str, tuple[float, float, int]]:
    """Per metric, the lowest and highest per-phone median of a pooled cell, and the phone count."""
    spread = {}
    for metric in metrics:
        by_phone: dict[str | None, list[float]] = {}
        for run in done:
            if metric in run.metrics and data.counts(run, metric):
                by_phone.setdefault(run.device_id, []).append(run.metrics[metric])
        if by_phone:
            medians = [float(np.median(values)) for values in by_phone.values()]
            spread[metric] = (min(medians), max(medians), len(medians))
    return spread


def _order(value: Any) -> tuple[int, float, str]:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def _observation(run: StoredResult, metric: str) -> Observation:
    own = OWN_CI.get(metric)
    own_ci = None
    if own and own[0] in run.metrics and own[1] in run.metrics:
        own_ci = (run.metrics[own[0]], run.metrics[own[1]])
    key: tuple[Hashable, ...] = ()
    return Observation(key, run.metrics[metric], own_ci)


def state_counts(data: ReportData) -> dict[RunState, int]:
    counts = Counter(run.state for run in data.runs)
    return {state: counts.get(state, 0) for state in STATES}


def failures(data: ReportData) -> list[Failure]:
    return [
        Failure(run.run_id, run.cell_id, run.device_id, run.reason or "no reason recorded")
        for run in data.runs
        if run.state in (RunState.FAILED, RunState.SKIPPED)
    ]


def _flagged(data: ReportData, metric: str, value: float) -> list[StoredResult]:
    return [run for run in data.done_runs if run.metrics.get(metric) == value]


def _some(runs: list[StoredResult], limit: int = 5) -> str:
    names = [f"{run.run_id} ({run.device_id})" for run in runs[:limit]]
    return ", ".join(names) + (f" and {len(runs) - limit} more" if len(runs) > limit else "")


def _load_miss(run: StoredResult) -> str:
    target = run.metrics.get("gpu_load_target", run.factors.get("gpu_load"))
    achieved = run.metrics.get("gpu_load_mean")
    target_text = number(float(target)) if isinstance(target, int | float) else "?"
    achieved_text = number(achieved) if achieved is not None else "?"
    return f"{run.run_id} ({run.device_id}): target {target_text}, achieved {achieved_text}"


def _load_notes(missed: list[StoredResult]) -> list[str]:
    """Runs whose background GPU load was off its target (gpu_load_mean, the tables' number), short
    of it or beyond it: an overshoot is not "not reached"."""

    def above(run: StoredResult) -> bool:
        target = run.metrics.get("gpu_load_target", run.factors.get("gpu_load"))
        achieved = run.metrics.get("gpu_load_mean")
        return isinstance(target, int | float) and achieved is not None and achieved > float(target)

    notes = []
    for over, (what, why) in {
        False: ("fell short of their background GPU load target", "the load generator could not hold it"),
        True: ("overshot their background GPU load target", "the GPU was busier than asked"),
    }.items():
        runs = [run for run in missed if above(run) is over]
        if runs:
            shown = "; ".join(_load_miss(run) for run in runs[:5])
            more = f" and {len(runs) - 5} more" if len(runs) > 5 else ""
            off = f"by more than {TOLERANCE_PP:g} pp ({why})"
            notes.append(f"{len(runs)} run(s) {what} {off}: {shown}{more}.")
    return notes


def quality_notes(data: ReportData) -> list[str]:
    """What a reader must know before trusting the numbers."""
    notes = [note.line() for note in data.notes]
    throttled = _flagged(data, "throttled", 1.0)
    if throttled:
        notes.append(f"{len(throttled)} run(s) throttled (GPU clock fell under load): {_some(throttled)}.")
    capped = [
        run
        for run in data.done_runs
        if run.metrics.get("throttled_cpu_cap") == 1.0 or run.metrics.get("throttled_gpu_cap") == 1.0
    ]
    if capped:
        notes.append(
            f"{len(capped)} run(s) ran with a thermal cap on the CPU or GPU clocks (the kernel lowered "
            f"their maximum, or kgsl's thermal power level): {_some(capped)}."
        )
    notes += _load_notes(_flagged(data, "gpu_load_reached", 0.0))
    charging = _flagged(data, "charging_disabled", 0.0)
    if charging:
        notes.append(
            f"Charging could not be disabled in {len(charging)} run(s), so their battery power is not the "
            f"phone's consumption and no power or energy is reported for them: {_some(charging)}."
        )
    sparse = [
        run
        for run in data.done_runs
        if 0 < run.metrics.get("power_readings", FEW_POWER_READINGS) < FEW_POWER_READINGS
    ]
    if sparse:
        notes.append(
            f"{len(sparse)} run(s) saw fewer than {FEW_POWER_READINGS} fuel-gauge readings while measuring, "
            f"so their energy rests on few samples (slow gauge: raise measurement.min_seconds): "
            f"{_some(sparse)}."
        )
    negative = [run for run in data.done_runs if run.metrics.get("power_mean_mw", 0.0) < 0]
    if negative:
        notes.append(
            f"{len(negative)} run(s) show negative battery power: the battery was charging while they "
            f"measured (charging not disabled, or the gauge not yet updated): {_some(negative)}."
        )
    below_idle = [run for run in data.done_runs if run.metrics.get("energy_net_mj", 0.0) < 0]
    if below_idle:
        notes.append(
            f"{len(below_idle)} run(s) measured less than the phone's idle power, so their net energy is "
            f"not shown (idle draw drifted, or too few gauge readings): {_some(below_idle)}."
        )
    no_power = [
        run
        for run in data.done_runs
        if "power_mean_mw" not in run.metrics and run.metrics.get("charging_disabled") != 0.0
    ]
    if data.done_runs and no_power:
        unread = [run for run in no_power if run.metrics.get("power_readings") == 0]
        if unread:
            notes.append(
                f"{len(unread)} run(s) ended before the fuel gauge updated, so they have no power or energy "
                f"(raise measurement.min_seconds above the gauge's update interval): {_some(unread)}."
            )
        if len(unread) < len(no_power):
            notes.append(
                f"{len(no_power) - len(unread)} run(s) have no battery power samples: no energy for them."
            )
    notes += _granularity_notes(data)
    notes += _validity_notes(data)
    virtual = sorted(phone.device_id for phone in data.phones if phone.virtual)
    if virtual:
        notes.append(
            "Virtual phones (" + ", ".join(virtual) + "): OpenCL runs on PoCL on the host CPU, so their "
            "timings are this machine's, not a phone's; power and temperature come from a model."
        )
    return notes


def _granularity_notes(data: ReportData) -> list[str]:
    """For an external program: whether its latencies are per iteration or its own summary."""
    summary = _flagged(data, GRANULARITY_METRIC, 0.0)
    per_iteration = _flagged(data, GRANULARITY_METRIC, 1.0)
    if summary:
        return [
            f"{len(summary)} run(s) of the external program printed summary figures only, no latency per "
            f"iteration: their latency columns are the program's own figures (no median CI, percentiles "
            f"only where it printed them): {_some(summary)}."
            + (f" {len(per_iteration)} run(s) have latencies per iteration." if per_iteration else "")
        ]
    if per_iteration:
        return [f"Latencies of the external program: one per iteration in all {len(per_iteration)} run(s)."]
    return []


def _validity_notes(data: ReportData) -> list[str]:
    """How many DONE runs failed which validity check, and whether they are left out."""
    invalid = data.invalid_runs
    if not invalid:
        return []
    failed = Counter(check.value for run in invalid for check in Validity.from_metrics(run.metrics).failed())
    checks = ", ".join(f"{name} {count}" for name, count in sorted(failed.items()))
    use = (
        "they are included (--include-invalid)"
        if data.include_invalid
        else "figures and cell statistics leave them out (--include-invalid to use them)"
    )
    return [
        f"{len(invalid)} of {len(data.done_runs)} done run(s) are not valid ({checks}): {use}: "
        f"{_some(list(invalid))}."
    ]
