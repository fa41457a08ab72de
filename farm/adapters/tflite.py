"""The `tflite` adapter: TensorFlow Lite's benchmark_model text output (summary figures only).

benchmark_model (tensorflow/lite/tools/benchmark, documented in its README and on the LiteRT
"performance measurement" page) logs, on stderr or stdout depending on the build, so both are read:

    The input model file size (MB): 4.27678
    Initialized session in 3.04ms.
    Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if ...
    count=86 first=6890 curr=5765 min=5650 max=6890 avg=5836.2 std=176
    Running benchmark for at least 50 iterations and at least 1 seconds but terminate if ...
    count=183 first=5765 curr=5446 min=5410 max=6126 avg=5455.27 std=86
    Inference timings in us: Init: 3043, First inference: 6890, Warmup (avg): 5836.2, Inference (avg): 5455.27
    Memory footprint delta from the start of the tool (MB): init=3.59766 overall=4.51953
    Overall peak memory footprint (MB) via periodic monitoring: 12.5   (--report_peak_memory_footprint)

The first `count=` line is the warm-up, the last one the measured runs (times in microseconds);
percentiles (`p5=`, `median=`, `p95=`, ...) are read where a build prints them. Older builds
end with `Average inference timings in us: Warmup: 83235, Init: 38467, Inference: 79760.9`. The
per-operator tables of --enable_op_profiling (`Timings (microseconds): count=...`) are not
runs and are passed over. Metrics (ms, MB, count):

    latency_mean_ms latency_std_ms latency_min_ms latency_max_ms latency_median_ms latency_p<q>_ms
    iterations_measured  warmup_mean_ms warmup_std_ms warmup_iterations  init_ms first_inference_ms
    model_size_mb memory_init_delta_mb memory_overall_delta_mb memory_peak_mb

The tool prints no per-run latency, so the result is always a SUMMARY; `inferences` is the
measured count. Output that starts runs but has no "Inference timings" line is TRUNCATED.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from farm.adapters.output import (
    FailureReason,
    Granularity,
    OutputError,
    ProgramOutput,
    numbered_lines,
    require_text,
    stderr_tail,
)
from farm.metric import Metric

ADAPTER = "tflite"
US_PER_MS = 1000.0

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_STAT_LINE = re.compile(r"^count=")  # the runs' statistics start their line; the op profiler's do not
_KEY_VALUE = re.compile(r"(\w+)=(\S+)")
_SUMMARY = re.compile(r"inference timings in us:(.*)$", re.IGNORECASE)
_SUMMARY_ITEM = re.compile(r"^\s*([A-Za-z][A-Za-z ()]*?)\s*:\s*(\S+)\s*$")
_RUNNING = re.compile(r"^Running benchmark for at least")
_MODEL_SIZE = re.compile(r"input model file size \(MB\):\s*(\S+)", re.IGNORECASE)
_SESSION = re.compile(r"Initialized session in\s*(\S+?)\s*ms", re.IGNORECASE)
_FOOTPRINT = re.compile(r"memory footprint delta.*\(MB\):(.*)$", re.IGNORECASE)
_PEAK = re.compile(r"peak memory footprint \(MB\)[^:]*:\s*(\S+)", re.IGNORECASE)
_PERCENTILE = re.compile(r"^p(\d+(?:\.\d+)?)$")
_ERROR_LINE = re.compile(r"\b(error|failed|failure|aborted)\b", re.IGNORECASE)

# "Inference timings in us" items -> metric names (new and old wording)
_SUMMARY_NAMES = {
    "init": "init_ms",
    "first inference": "first_inference_ms",
    "warmup (avg)": "warmup_mean_ms",
    "warmup": "warmup_mean_ms",
    "inference (avg)": "latency_mean_ms",
    "inference": "latency_mean_ms",
}


def _value(text: str, place: str, what: str) -> float:
    cleaned = text.rstrip(".,;")
    if not re.fullmatch(_NUMBER, cleaned):
        raise OutputError(ADAPTER, FailureReason.MALFORMED, f"{place}: {what} {text!r} is not a number")
    return float(cleaned)


def _stat(line: str, place: str) -> dict[str, float]:
    return {key: _value(raw, place, key) for key, raw in _KEY_VALUE.findall(line)}


def _stat_metrics(stat: dict[str, float], prefix: str, *, percentiles: bool) -> list[Metric]:
    names = {"avg": "mean", "std": "std", "min": "min", "max": "max", "median": "median"}
    metrics = [Metric(f"{prefix}_{names[k]}_ms", v / US_PER_MS, "ms") for k, v in stat.items() if k in names]
    if percentiles:
        for key, value in stat.items():
            match = _PERCENTILE.match(key)
            if match:
                metrics.append(Metric(f"{prefix}_p{float(match[1]):g}_ms", value / US_PER_MS, "ms"))
    return metrics


def _summary(items: str, place: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for item in items.split(","):
        match = _SUMMARY_ITEM.match(item)
        if match and match[1].lower() in _SUMMARY_NAMES:
            found[_SUMMARY_NAMES[match[1].lower()]] = _value(match[2], place, match[1]) / US_PER_MS
    return found


@dataclass
class _Scan:
    """What one pass over the lines found."""

    stats: list[dict[str, float]] = field(default_factory=list)  # the `count=` lines, in order
    summary: dict[str, float] | None = None  # the "Inference timings in us" items, in ms
    extra: dict[str, Metric] = field(default_factory=dict)  # model size, session init, memory
    runs_started: int = 0
    errors: list[str] = field(default_factory=list)


def _scan(stdout: str, stderr: str) -> _Scan:
    found = _Scan()
    for place, raw in numbered_lines([("stdout", stdout), ("stderr", stderr)]):
        line = raw.strip()
        if _STAT_LINE.match(line):
            found.stats.append(_stat(line, place))
        elif _RUNNING.match(line):
            found.runs_started += 1
        elif match := _SUMMARY.search(line):
            found.summary = _summary(match[1], place)
        elif match := _MODEL_SIZE.search(line):
            found.extra["model_size_mb"] = Metric(
                "model_size_mb", _value(match[1], place, "model size"), "MB"
            )
        elif match := _SESSION.search(line):
            found.extra.setdefault(
                "init_ms", Metric("init_ms", _value(match[1], place, "session init"), "ms")
            )
        elif match := _FOOTPRINT.search(line):
            for key, raw_value in _KEY_VALUE.findall(match[1]):
                name = f"memory_{key.lower()}_delta_mb"
                found.extra[name] = Metric(name, _value(raw_value, place, key), "MB")
        elif match := _PEAK.search(line):
            found.extra["memory_peak_mb"] = Metric(
                "memory_peak_mb", _value(match[1], place, "peak memory"), "MB"
            )
        elif _ERROR_LINE.search(line):
            found.errors.append(line)
    return found


def parse_tflite(stdout: str, stderr: str = "") -> ProgramOutput:
    require_text(ADAPTER, stdout + stderr, "", "stdout or stderr")
    found = _scan(stdout, stderr)
    if found.summary is None:
        if found.stats or found.runs_started:
            raise OutputError(
                ADAPTER,
                FailureReason.TRUNCATED,
                f"{len(found.stats)} timing lines and no 'Inference timings' summary: benchmark_model "
                f"stopped before its end ({stderr_tail(stderr)})",
            )
        said = f"; it says: {found.errors[-1][:200]}" if found.errors else f" ({stderr_tail(stderr)})"
        raise OutputError(ADAPTER, FailureReason.NO_METRIC, f"no benchmark_model timing line{said}")
    warmup, measured = _split_runs(found.stats, found.summary)
    metrics: dict[str, Metric] = {}
    if measured is not None:
        for metric in _stat_metrics(measured, "latency", percentiles=True):
            metrics[metric.name] = metric
        if "count" in measured:
            metrics["iterations_measured"] = Metric("iterations_measured", measured["count"], "count")
    if warmup is not None:
        for metric in _stat_metrics(warmup, "warmup", percentiles=False):
            if metric.name in ("warmup_mean_ms", "warmup_std_ms"):
                metrics[metric.name] = metric
        if "count" in warmup:
            metrics["warmup_iterations"] = Metric("warmup_iterations", warmup["count"], "count")
    for name, value in found.summary.items():
        # the summary's microseconds are the tool's own rounding of the same figures; the
        # stats lines win where both exist, but Init and First inference are only here
        metrics.setdefault(name, Metric(name, value, "ms"))
    for name, metric in found.extra.items():
        if name == "init_ms" and name in metrics:
            continue  # "Init:" in microseconds is finer than "Initialized session in 3.04ms"
        metrics[name] = metric
    count = measured.get("count") if measured is not None else None
    return ProgramOutput(
        adapter=ADAPTER,
        granularity=Granularity.SUMMARY,
        latencies_ms=(),
        metrics=tuple(metrics.values()),
        inferences=int(count) if count is not None else None,
    )


def _split_runs(
    stats: list[dict[str, float]], summary: dict[str, float]
) -> tuple[dict[str, float] | None, dict[str, float] | None]:
    """(warm-up, measured) statistics: the first and the last line; a single line is the one
    whose mean is the summary's inference mean (else the warm-up's)."""
    if len(stats) >= 2:
        return stats[0], stats[-1]
    if not stats:
        return None, None
    only = stats[0]
    inference, warmup = summary.get("latency_mean_ms"), summary.get("warmup_mean_ms")
    mean_ms = only.get("avg", float("nan")) / US_PER_MS
    if inference is not None and (warmup is None or abs(mean_ms - inference) <= abs(mean_ms - warmup)):
        return None, only
    return only, None
