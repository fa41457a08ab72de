"""The `jsonl` adapter: farm's own event contract, so a program in any language can be farm-native.

The contract (architecture.md section 4, kernels/README.md "Output"): one JSON object a line on
stdout, times in CLOCK_MONOTONIC nanoseconds. `info` (once, first), `phase` (`warmup` |
`measure`, `t_ns`), `iter` (`i`, `t_start_ns`, `t_end_ns`, optional OpenCL split `h2d_ns`,
`kernel_ns`, `d2h_ns`), `result` (once, last: the program's own summary), `error` (`message`,
`exit_code`, before a non-zero exit). Only iterations of the measure phase count (see
farm.analysis.iterations). A program that caps its `iter` events (--iteration-events) adds
`iter_sample` and `iter_summary` events: `inferences` and the iterations' count then come from the
summary, and `latencies_ms` holds the printed iterations only (the first ones and the sample).
A program without `iter` events but with a `result` holding numbers is read as a summary.

    events = parse_event_lines(text).events      # what farm's own kernels' stdout.jsonl holds
    output = parse_jsonl(stdout, stderr)         # ProgramOutput, or OutputError
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from farm import safe_json
from farm.adapters.output import (
    FailureReason,
    Granularity,
    OutputError,
    ProgramOutput,
    require_text,
    stderr_tail,
)
from farm.analysis.benchmark_metrics import benchmark_metrics
from farm.analysis.iterations import event_kind, measured_iterations, result_event
from farm.metric import Metric

ADAPTER = "jsonl"
# The program's own `result` numbers are kept as program_<key>; the unit comes from the key's end.
RESULT_PREFIX = "program_"
_UNIT_SUFFIXES = (
    ("_ms", "ms"),
    ("_us", "us"),
    ("_ns", "ns"),
    ("_s", "s"),
    ("_mb", "MB"),
    ("_kb", "kB"),
    ("_mj", "mJ"),
    ("_mw", "mW"),
    ("_pct", "%"),
    ("gflops", "GFLOP/s"),
)
_KEY = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class EventLines:
    """The JSON objects of a JSON Lines text, and what was not one."""

    events: list[dict[str, Any]]
    bad_lines: tuple[int, ...]  # 1-based numbers of non-empty lines that are not a JSON object
    cut: bool  # the text ends inside a line that is not JSON: the writer was stopped mid-line


def parse_event_lines(text: str) -> EventLines:
    events: list[dict[str, Any]] = []
    bad: list[int] = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = safe_json.loads(line)
        except ValueError:
            bad.append(number)
            continue
        if isinstance(event, dict):
            events.append(event)
        else:
            bad.append(number)
    cut = bool(lines) and not text.endswith("\n") and bool(bad) and bad[-1] == len(lines)
    return EventLines(events, tuple(bad), cut)


def unit_of_key(key: str) -> str:
    return next((unit for suffix, unit in _UNIT_SUFFIXES if key.endswith(suffix)), "")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def result_metrics(result: Mapping[str, Any]) -> list[Metric]:
    """Every finite number of the `result` event, as program_<key> with the unit its name ends in."""
    metrics = []
    for key, value in result.items():
        number = _number(value)
        if number is not None and _KEY.match(key) and key != "event":
            metrics.append(Metric(RESULT_PREFIX + key, number, unit_of_key(key)))
    return metrics


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _inferences(result: Mapping[str, Any], measured: int) -> int | None:
    """`result.inferences` when the program says (a batch of N is N inferences), else one per
    measured iteration, else `result.iterations`."""
    given = _count(result.get("inferences"))
    if given is not None:
        return given
    return measured if measured > 0 else _count(result.get("iterations"))


def parse_jsonl(stdout: str, stderr: str = "") -> ProgramOutput:
    require_text(ADAPTER, stdout, stderr)
    lines = parse_event_lines(stdout)
    if not lines.events:
        first = stdout.strip().splitlines()[0][:80]
        raise OutputError(
            ADAPTER,
            FailureReason.MALFORMED,
            f"no line is a JSON object (line {lines.bad_lines[0]}: {first!r})",
        )
    errors = [e for e in lines.events if event_kind(e) == "error"]
    if errors:
        message = str(errors[-1].get("message", "")).strip() or stderr_tail(stderr)
        raise OutputError(ADAPTER, FailureReason.PROGRAM_ERROR, message)
    try:
        iterations = measured_iterations(lines.events)
    except ValueError as error:
        raise OutputError(ADAPTER, FailureReason.MALFORMED, str(error)) from error
    result = result_event(lines.events)
    if result is None:
        cut = " and its last line is cut" if lines.cut else ""
        raise OutputError(
            ADAPTER,
            FailureReason.TRUNCATED,
            f"no `result` event after {len(lines.events)} events ({len(iterations)} measured iterations)"
            f"{cut}: the program stopped before its end ({stderr_tail(stderr)})",
        )
    metrics = benchmark_metrics(lines.events) + result_metrics(result)
    if len(iterations) == 0 and not metrics:
        raise OutputError(
            ADAPTER, FailureReason.NO_METRIC, "no measured `iter` event and no number in `result`"
        )
    notes: tuple[str, ...] = ()
    if lines.bad_lines:
        notes = (f"{len(lines.bad_lines)} lines were not JSON objects (first: line {lines.bad_lines[0]})",)
    per_iteration = len(iterations) > 0
    return ProgramOutput(
        adapter=ADAPTER,
        granularity=Granularity.PER_ITERATION if per_iteration else Granularity.SUMMARY,
        latencies_ms=tuple(float(x) for x in iterations.latency_ms) if per_iteration else (),
        metrics=tuple(metrics),
        inferences=_inferences(result, len(iterations)),
        iterations=iterations if per_iteration else None,
        notes=notes,
    )
