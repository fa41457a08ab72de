"""Benchmark iterations from a benchmark's JSON Lines events (architecture.md section 4).

Events are dicts as parsed from stdout: `{"event": "phase", "phase": "measure", "t_ns": ...}`,
`{"event": "iter", "i": 3, "t_start_ns": ..., "t_end_ns": ..., "h2d_ns": ..., "kernel_ns": ...,
"d2h_ns": ...}`. Only iterations of the measure phase count: an iter event that names its phase is
taken at its word; otherwise it belongs to the phase announced last before it; with no phase events
at all, every iteration is measured.

A program that stops printing `iter` events after its first --iteration-events iterations prints
`iter_sample` events (a uniform sample of the rest, measured by definition) and an `iter_summary`
(farm.analysis.iteration_summary). Then `Iterations` holds the printed iterations, each with its
weight (1 for the first ones, unprinted / samples for a sample), and the summary, which gives the
count, window, split sums and latency statistics; without a summary, or when it says every
iteration was printed, the events alone give them, exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from farm.analysis import stats
from farm.analysis.iteration_summary import IterationSummary, parse_iteration_summary

MEASURE_PHASE = "measure"


def event_kind(event: Mapping[str, Any]) -> str:
    return str(event.get("event", event.get("type", "")))


def _phase_name(event: Mapping[str, Any]) -> str:
    return str(event.get("phase", event.get("name", "")))


@dataclass(frozen=True)
class Iterations:
    """The measured iterations of one run, on the phone's clock (ns). OpenCL splits may be absent.

    The arrays hold the printed iterations in time order; with a truncating `summary`, `weight`
    says how many measured iterations each stands for, and len() is the summary's exact count."""

    t_start_ns: NDArray[np.int64]
    t_end_ns: NDArray[np.int64]
    h2d_ns: NDArray[np.float64] | None
    kernel_ns: NDArray[np.float64] | None
    d2h_ns: NDArray[np.float64] | None
    weight: NDArray[np.float64] | None = None  # None: every iteration printed, weight 1
    summary: IterationSummary | None = None  # only when it covers unprinted iterations

    def __len__(self) -> int:
        return self.summary.iterations if self.summary is not None else int(self.t_start_ns.size)

    @property
    def printed(self) -> int:
        """How many iterations the arrays hold."""
        return int(self.t_start_ns.size)

    def latency_summary(self) -> stats.Summary:
        """Latency statistics of every measured iteration (the summary's within its stated errors)."""
        if self.summary is not None:
            return self.summary.latency_summary()
        return stats.summarise(self.latency_ms)

    def split_totals_ns(self) -> dict[str, float | None]:
        """h2d / kernel / d2h summed over every measured iteration; None where not measured."""
        if self.summary is not None:
            s = self.summary
            return {"h2d": s.h2d_ns_sum, "kernel": s.kernel_ns_sum, "d2h": s.d2h_ns_sum}
        parts = {"h2d": self.h2d_ns, "kernel": self.kernel_ns, "d2h": self.d2h_ns}
        return {name: None if values is None else float(np.sum(values)) for name, values in parts.items()}

    @property
    def latency_ms(self) -> NDArray[np.float64]:
        return (self.t_end_ns - self.t_start_ns).astype(np.float64) / 1e6

    @property
    def window_ns(self) -> tuple[int, int]:
        """From the first measured iteration's start to the last one's end."""
        if self.summary is not None:
            return self.summary.t_start_ns, self.summary.t_end_ns
        return int(self.t_start_ns.min()), int(self.t_end_ns.max())


def _split(iters: Sequence[Mapping[str, Any]], key: str) -> NDArray[np.float64] | None:
    if not iters or any(it.get(key) is None for it in iters):
        return None
    return np.array([float(it[key]) for it in iters], dtype=np.float64)


def _checked(event: Mapping[str, Any], number: int) -> Mapping[str, Any]:
    if not isinstance(event.get("t_start_ns"), int) or not isinstance(event.get("t_end_ns"), int):
        raise ValueError(f"event {number}: {event_kind(event)} without integer t_start_ns / t_end_ns")
    if event["t_end_ns"] < event["t_start_ns"]:
        raise ValueError(f"event {number}: {event_kind(event)} ends before it starts")
    return event


def measured_iterations(events: Sequence[Mapping[str, Any]]) -> Iterations:
    """The iterations of the measure phase; raises ValueError naming the bad event if malformed."""
    has_phases = any(event_kind(e) == "phase" for e in events)
    current_phase = "" if has_phases else MEASURE_PHASE
    measured: list[Mapping[str, Any]] = []
    sampled: list[Mapping[str, Any]] = []
    summary: IterationSummary | None = None
    for number, event in enumerate(events, start=1):
        kind = event_kind(event)
        if kind == "phase":
            current_phase = _phase_name(event)
        elif kind == "iter":
            phase = str(event["phase"]) if "phase" in event else current_phase
            if phase != MEASURE_PHASE:
                continue
            measured.append(_checked(event, number))
        elif kind == "iter_sample":
            sampled.append(_checked(event, number))
        elif kind == "iter_summary":
            try:
                summary = parse_iteration_summary(event)
            except ValueError as error:
                raise ValueError(f"event {number}: {error}") from error
    weight: NDArray[np.float64] | None = None
    if summary is not None and summary.iterations > len(measured) and sampled:
        unprinted = summary.iterations - len(measured)
        weight = np.concatenate([np.ones(len(measured)), np.full(len(sampled), unprinted / len(sampled))])
        measured = measured + sampled
    elif summary is None or summary.iterations <= len(measured):
        summary = None  # every iteration was printed: the events are exact
    return Iterations(
        t_start_ns=np.array([int(e["t_start_ns"]) for e in measured], dtype=np.int64),
        t_end_ns=np.array([int(e["t_end_ns"]) for e in measured], dtype=np.int64),
        h2d_ns=_split(measured, "h2d_ns"),
        kernel_ns=_split(measured, "kernel_ns"),
        d2h_ns=_split(measured, "d2h_ns"),
        weight=weight,
        summary=summary,
    )


def result_event(events: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The last `result` event, if the benchmark got that far."""
    results = [e for e in events if event_kind(e) == "result"]
    return results[-1] if results else None
