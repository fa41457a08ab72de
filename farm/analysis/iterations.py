"""Benchmark iterations from a benchmark's JSON Lines events (architecture.md section 4).

Events are dicts as parsed from stdout: `{"event": "phase", "phase": "measure", "t_ns": ...}`,
`{"event": "iter", "i": 3, "t_start_ns": ..., "t_end_ns": ..., "h2d_ns": ..., "kernel_ns": ...,
"d2h_ns": ...}`. Only iterations of the measure phase count: an iter event that names its phase is
taken at its word; otherwise it belongs to the phase announced last before it; with no phase events
at all, every iteration is measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

MEASURE_PHASE = "measure"


def event_kind(event: Mapping[str, Any]) -> str:
    return str(event.get("event", event.get("type", "")))


def _phase_name(event: Mapping[str, Any]) -> str:
    return str(event.get("phase", event.get("name", "")))


@dataclass(frozen=True)
class Iterations:
    """The measured iterations of one run, on the phone's clock (ns). OpenCL splits may be absent."""

    t_start_ns: NDArray[np.int64]
    t_end_ns: NDArray[np.int64]
    h2d_ns: NDArray[np.float64] | None
    kernel_ns: NDArray[np.float64] | None
    d2h_ns: NDArray[np.float64] | None

    def __len__(self) -> int:
        return int(self.t_start_ns.size)

    @property
    def latency_ms(self) -> NDArray[np.float64]:
        return (self.t_end_ns - self.t_start_ns).astype(np.float64) / 1e6

    @property
    def window_ns(self) -> tuple[int, int]:
        """From the first measured iteration's start to the last one's end."""
        return int(self.t_start_ns.min()), int(self.t_end_ns.max())


def _split(iters: Sequence[Mapping[str, Any]], key: str) -> NDArray[np.float64] | None:
    if not iters or any(it.get(key) is None for it in iters):
        return None
    return np.array([float(it[key]) for it in iters], dtype=np.float64)


def measured_iterations(events: Sequence[Mapping[str, Any]]) -> Iterations:
    """The iterations of the measure phase; raises ValueError naming the bad event if malformed."""
    has_phases = any(event_kind(e) == "phase" for e in events)
    current_phase = "" if has_phases else MEASURE_PHASE
    measured: list[Mapping[str, Any]] = []
    for number, event in enumerate(events, start=1):
        kind = event_kind(event)
        if kind == "phase":
            current_phase = _phase_name(event)
        elif kind == "iter":
            phase = str(event["phase"]) if "phase" in event else current_phase
            if phase != MEASURE_PHASE:
                continue
            if not isinstance(event.get("t_start_ns"), int) or not isinstance(event.get("t_end_ns"), int):
                raise ValueError(f"event {number}: iter without integer t_start_ns / t_end_ns")
            if event["t_end_ns"] < event["t_start_ns"]:
                raise ValueError(f"event {number}: iter ends before it starts")
            measured.append(event)
    return Iterations(
        t_start_ns=np.array([int(e["t_start_ns"]) for e in measured], dtype=np.int64),
        t_end_ns=np.array([int(e["t_end_ns"]) for e in measured], dtype=np.int64),
        h2d_ns=_split(measured, "h2d_ns"),
        kernel_ns=_split(measured, "kernel_ns"),
        d2h_ns=_split(measured, "d2h_ns"),
    )


def result_event(events: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The last `result` event, if the benchmark got that far."""
    results = [e for e in events if event_kind(e) == "result"]
    return results[-1] if results else None
