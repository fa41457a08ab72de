"""The `regex` adapter: named groups of the user's patterns become metrics with units (pure).

A RegexSpec is a frozen pydantic model, so an experiment file can hold it as it is and its
errors carry the file's line through farm.experiment's messages:

    output:
      adapter: regex
      patterns: ['^iter \\d+: (?P<ms>[0-9.]+) ms$', 'peak rss: (?P<rss>\\d+) kB']
      metrics: {ms: {name: latency, unit: ms}, rss: {name: rss_peak_kb, unit: kB}}
      latency: ms          # per iteration: every line the `ms` pattern matches is one iteration

Each pattern (Python `re` syntax) is searched in every line of the chosen stream(s). With
`latency` set, the output is PER_ITERATION: each match of that group is one iteration's
latency, converted to ms from its unit (ns, us, ms, s); the other metrics are the mean over their
matches. Without it, the output is a SUMMARY and each metric is its group's last match (a
program that prints progress and then a final figure is read at the end). `inferences` names a
group holding the inference count (else: one per iteration, when per iteration).

Validation (ValueError inside pydantic's ValidationError): a pattern that does not compile, a
metrics key that is no named group of any pattern, a group in two patterns, `latency` or
`inferences` not among the metrics, a latency unit that is not a time unit.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from farm.adapters.output import (
    MS_PER_UNIT,
    FailureReason,
    Granularity,
    OutputError,
    ProgramOutput,
    numbered_lines,
    require_text,
    stderr_tail,
)
from farm.metric import Metric

ADAPTER = "regex"
MetricName = Annotated[str, StringConstraints(strict=True, pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]
Unit = Annotated[str, StringConstraints(strict=True, max_length=16)]


class Stream(StrEnum):
    STDOUT = "stdout"
    STDERR = "stderr"
    BOTH = "both"  # stdout's lines, then stderr's


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class RegexMetric(_Frozen):
    name: MetricName
    unit: Unit = ""


class RegexSpec(_Frozen):
    patterns: Annotated[tuple[str, ...], Field(min_length=1)]
    metrics: Annotated[dict[str, RegexMetric], Field(min_length=1)]
    latency: str | None = None
    inferences: str | None = None
    stream: Stream = Stream.BOTH

    @field_validator("patterns", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                compiled = re.compile(pattern)
            except re.error as error:
                raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {error}") from error
            if not compiled.groupindex:
                raise ValueError(
                    f"pattern {pattern!r} has no named group (?P<name>...) to take a metric from"
                )
        return patterns

    @model_validator(mode="after")
    def _groups_exist(self) -> RegexSpec:
        owners: dict[str, str] = {}
        for pattern in self.patterns:
            for group in re.compile(pattern).groupindex:
                if group in owners:
                    raise ValueError(f"group {group!r} is in two patterns: {owners[group]!r} and {pattern!r}")
                owners[group] = pattern
        for group in self.metrics:
            if group not in owners:
                known = ", ".join(sorted(owners))
                raise ValueError(
                    f"metrics: {group!r} is not a named group of the patterns (they have: {known})"
                )
        for role in ("latency", "inferences"):
            group = getattr(self, role)
            if group is not None and group not in self.metrics:
                raise ValueError(f"{role}: {group!r} is not one of the metrics ({', '.join(self.metrics)})")
        if self.latency is not None and self.metrics[self.latency].unit not in MS_PER_UNIT:
            unit = self.metrics[self.latency].unit
            raise ValueError(f"latency: unit {unit!r} is not a time unit ({', '.join(MS_PER_UNIT)})")
        names = [m.name for m in self.metrics.values()]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"metrics: the name {duplicates[0]!r} is given to two groups")
        return self

    @property
    def granularity(self) -> Granularity:
        return Granularity.PER_ITERATION if self.latency is not None else Granularity.SUMMARY


def _streams(spec: RegexSpec, stdout: str, stderr: str) -> list[tuple[str, str]]:
    if spec.stream is Stream.STDOUT:
        return [("stdout", stdout)]
    if spec.stream is Stream.STDERR:
        return [("stderr", stderr)]
    return [("stdout", stdout), ("stderr", stderr)]


def _float(text: str, place: str, group: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if value != value or abs(value) == float("inf"):
        raise OutputError(
            ADAPTER, FailureReason.MALFORMED, f"{place}: group {group!r} matched {text!r}, not a number"
        )
    return value


def parse_regex(spec: RegexSpec, stdout: str, stderr: str = "") -> ProgramOutput:
    streams = _streams(spec, stdout, stderr)
    where = " or ".join(name for name, _ in streams)
    require_text(
        ADAPTER, "".join(text for _, text in streams), stderr if spec.stream is Stream.STDOUT else "", where
    )
    compiled = [re.compile(p) for p in spec.patterns]
    values: dict[str, list[float]] = {group: [] for group in spec.metrics}
    lines = numbered_lines(streams)
    for place, line in lines:
        for pattern in compiled:
            match = pattern.search(line)
            if match is None:
                continue
            for group, raw in match.groupdict().items():
                if group in values and raw is not None:
                    values[group].append(_float(raw, place, group))
    found = {group: got for group, got in values.items() if got}
    if not found:
        raise OutputError(
            ADAPTER,
            FailureReason.NO_METRIC,
            f"none of the {len(compiled)} patterns matched any of the {len(lines)} lines on {where} "
            f"({stderr_tail(stderr)})",
        )
    per_iteration = spec.latency is not None
    if per_iteration and spec.latency not in found:
        raise OutputError(
            ADAPTER, FailureReason.NO_METRIC, f"the latency group {spec.latency!r} matched no line on {where}"
        )
    metrics = []
    for group, got in found.items():
        if group == spec.latency:
            continue
        target = spec.metrics[group]
        value = sum(got) / len(got) if per_iteration else got[-1]
        metrics.append(Metric(target.name, value, target.unit))
    latencies: tuple[float, ...] = ()
    if spec.latency is not None:
        factor = MS_PER_UNIT[spec.metrics[spec.latency].unit]
        latencies = tuple(v * factor for v in found[spec.latency])
    inferences: int | None = len(latencies) or None
    if spec.inferences is not None and spec.inferences in found:
        inferences = int(found[spec.inferences][-1])
    return ProgramOutput(
        adapter=ADAPTER,
        granularity=spec.granularity,
        latencies_ms=latencies,
        metrics=tuple(metrics),
        inferences=inferences,
        missing=tuple(spec.metrics[g].name for g in spec.metrics if g not in found),
    )
