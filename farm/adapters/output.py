"""What an output adapter returns, and how it fails: the value types every adapter shares (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from farm.analysis.iterations import Iterations
from farm.errors import FarmError
from farm.metric import Metric

# How much of stderr a failure quotes: the end, where a crashing program says why.
STDERR_TAIL_CHARS = 300
# The store metric that says how a program's latencies were measured: 1 one per iteration, 0 only
# summary figures (the report tells readers which).
GRANULARITY_METRIC = "latency_per_iteration"
# Time units a latency may be given in, as factors to milliseconds.
MS_PER_UNIT = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3}


class Granularity(StrEnum):
    """Whether the program gave one latency per iteration or only summary figures."""

    PER_ITERATION = "per_iteration"
    SUMMARY = "summary"


class FailureReason(StrEnum):
    EMPTY = "empty output"
    TRUNCATED = "truncated output"
    MALFORMED = "malformed output"
    NO_METRIC = "no metric matched"
    PROGRAM_ERROR = "the program reported an error"


class OutputError(FarmError):
    """The program's output gave no usable result; `reason` says which way, `detail` the specifics.

    Not retryable by itself: the caller knows whether the program was killed (then a retry may
    help) or exited on its own."""

    def __init__(self, adapter: str, reason: FailureReason, detail: str) -> None:
        super().__init__(f"{adapter} output: {reason.value}: {detail}")
        self.adapter = adapter
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class ProgramOutput:
    """A program's results as its adapter read them.

    `latencies_ms` holds one latency per measured iteration in program order when `granularity`
    is PER_ITERATION (and is empty for SUMMARY); `iterations` adds their start/end on the phone's
    clock when the program stamped them (jsonl). `metrics` are the figures the program printed
    about itself; with SUMMARY they stand in for per-iteration statistics, under the same names
    farm uses (latency_mean_ms, latency_p90_ms, iterations_measured, ...). `inferences` is the
    number of inferences the measured part ran, when known (energy per inference needs it).
    `missing` names configured metrics the output did not contain (regex); `notes` says what was
    passed over (lines that were not events, ...), for the run's record."""

    adapter: str
    granularity: Granularity
    latencies_ms: tuple[float, ...]
    metrics: tuple[Metric, ...]
    inferences: int | None
    iterations: Iterations | None = None
    missing: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)


def stderr_tail(stderr: str) -> str:
    """The end of stderr as one line for a failure message, or a note that there was none."""
    text = " | ".join(line.strip() for line in stderr.strip().splitlines() if line.strip())
    if not text:
        return "stderr is empty"
    return "stderr ends: " + (text if len(text) <= STDERR_TAIL_CHARS else "..." + text[-STDERR_TAIL_CHARS:])


def require_text(adapter: str, text: str, stderr: str, what: str = "stdout") -> None:
    """Fails with EMPTY when `text` holds nothing but whitespace."""
    if not text.strip():
        raise OutputError(adapter, FailureReason.EMPTY, f"nothing on {what} ({stderr_tail(stderr)})")


def numbered_lines(streams: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(place, line) for each line of each (stream name, text), place being `stderr line 12`,
    so a failure points at the line in the stream a user will open."""
    return [
        (f"{name} line {n}", line) for name, text in streams for n, line in enumerate(text.splitlines(), 1)
    ]
