"""The report's second I/O edge: what it reads from run folders rather than the store.

A sustained run's latency-over-time curve is in its stdout.jsonl (one event per iteration, or the
first iterations and a sample of the rest) and its clocks and temperature in its trace.bin; the
store keeps only their summary metrics. Folders that are not readable here (another coordinator's
disk) are passed over: the report says so elsewhere (farm.cli.report's artifacts note).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from farm.adapters.jsonl import parse_event_lines
from farm.analysis.iterations import measured_iterations
from farm.analysis.sustained import SustainedSeries, sustained_series
from farm.report.model import ReportData
from farm.telemetry.trace import Trace, TraceFormatError, parse_trace

STDOUT = "stdout.jsonl"  # farm.engine.collect's names in a run folder
TRACE = "trace.bin"


def _trace(folder: Path) -> Trace | None:
    try:
        return parse_trace((folder / TRACE).read_bytes())
    except (OSError, TraceFormatError):
        return None  # no telemetry on this run: the latency curve alone


def sustained_series_of(data: ReportData, folders: Mapping[str, Path]) -> dict[str, SustainedSeries]:
    """run_id -> series of every DONE sustained run whose folder (run_id -> path) is readable and
    whose latency counts; {} when the experiment is not sustained."""
    if data.spec is None or data.spec.measurement.sustained_s is None:
        return {}
    found = {}
    for run in data.done_runs:
        folder = folders.get(run.run_id)
        if folder is None or not data.counts(run, "latency_median_ms"):
            continue
        try:
            text = (folder / STDOUT).read_text(errors="replace")
            iterations = measured_iterations(parse_event_lines(text).events)
        except (OSError, ValueError):
            continue  # unreadable or malformed: the run's metrics already say what went wrong
        series = sustained_series(
            iterations, _trace(folder), time_to_throttle_s=run.metrics.get("time_to_throttle_s")
        )
        if series is not None:
            found[run.run_id] = series
    return found
