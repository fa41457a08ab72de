"""Trepn Profiler CSV exports: a pure parser and the power metrics farm derives from them.

Layout as real exports have it (tests/fixtures/trepn/README.md): a preamble (`App,Package,Start
Time,...` and one row), a blank line, a header row in which every data point has its own
preceding `Time  [ms]` column (`Time  [ms],Battery Power* [uW],Time  [ms],GPU Load [%],...`),
sample rows where any metric's cell may be empty (each metric runs on its own clock, ~100 ms), and
a trailing `System Statistics:` block (`Sensor Id,Name,Type,Average,...`) that is not samples but
Trepn's own average of each data point (the plain mean of its samples). A metric's name is its
header up to `[`, its unit the text inside the brackets. The real exports the tests use are in
tests/fixtures/trepn/ (README there).
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from farm.analysis.power import energy_mj
from farm.analysis.series import Series, SeriesTrace
from farm.errors import ConfigError
from farm.metric import Metric

STATISTICS_MARKER = "System Statistics:"
_HEADER_RE = re.compile(r"^\s*(?P<name>[^\[]*?)\s*\[(?P<unit>[^\]]*)\]\s*(?P<rest>.*)$")
NS_PER_MS = 1_000_000
# Sample mean vs the statistics block: the Nexus 5 exports print the average with 10 significant digits.
STATISTICS_REL_TOL = 1e-6

# Trepn display names -> farm trace source names, with the factor to farm's unit for that source.
_SOURCE_OF: dict[str, tuple[str, dict[str, float]]] = {
    "Battery Power*": ("battery.power", {"uW": 1e-3, "mW": 1.0, "W": 1e3}),
    "Battery Power": ("battery.power", {"uW": 1e-3, "mW": 1.0, "W": 1e3}),
    "GPU Load": ("gpu.busy", {"%": 0.01}),
    "GPU Frequency": ("gpu.freq", {"KHz": 1e-3, "kHz": 1e-3, "MHz": 1.0, "Hz": 1e-6}),
}


@dataclass(frozen=True)
class TrepnMetric:
    """One data point's samples: times are ms since the recording started, as Trepn wrote them."""

    name: str
    unit: str
    series: Series  # t_ns = Trepn's ms x 1e6; values in `unit`


@dataclass(frozen=True)
class TrepnStatistic:
    """One row of the export's `System Statistics` block: Trepn's own average of a data point."""

    average: float  # in the data point's unit: the plain mean of its samples, as Trepn computes it
    line: int


@dataclass(frozen=True)
class Truncation:
    """How an export accepted with allow_truncated=True was cut."""

    source: str
    last_line: int  # the last line that was read
    dropped_line: int | None  # the cut last row that was dropped, if the file ended mid-row
    statistics: bool  # whether the statistics block was there (the cut fell inside it)

    @property
    def message(self) -> str:
        where = (
            "inside its System Statistics block" if self.statistics else "before its System Statistics block"
        )
        dropped = f"; dropped the cut row at line {self.dropped_line}" if self.dropped_line else ""
        return f"{self.source}: the export was cut {where} (read up to line {self.last_line}{dropped})"


@dataclass(frozen=True)
class TrepnExport:
    source: str
    preamble: dict[str, str]
    metrics: dict[str, TrepnMetric]
    statistics: dict[str, TrepnStatistic] = field(default_factory=dict)  # by data point name
    truncation: Truncation | None = None  # set only when a cut file was accepted

    def trace(self) -> SeriesTrace:
        """The export as a farm trace: battery.power in mW, gpu.busy as 0..1, gpu.freq in MHz."""
        sources: dict[str, Series] = {}
        for metric in self.metrics.values():
            mapping = _SOURCE_OF.get(metric.name)
            if mapping is None or metric.unit not in mapping[1]:
                continue
            source, factors = mapping
            sources[source] = metric.series.scaled(factors[metric.unit])
        return SeriesTrace(sources)


def split_header(header: str) -> tuple[str, str]:
    """`Battery Power* [uW] (Raw)` -> ("Battery Power*", "uW"); no brackets -> (header, "")."""
    match = _HEADER_RE.match(header)
    if match is None:
        return header.strip(), ""
    return match.group("name"), match.group("unit").strip()


def _is_time_header(cell: str) -> bool:
    name, unit = split_header(cell)
    return name.lower() == "time" and unit == "ms"


def parse_trepn_csv(text: str, source: str = "<trepn>", *, allow_truncated: bool = False) -> TrepnExport:
    """Parse one export. Raises ConfigError naming `source:line` for anything that is not Trepn's.

    A complete export ends with its statistics block and a newline. Anything less was cut (copied
    while Trepn was still writing, a partial download) and is refused unless `allow_truncated`,
    which drops a cut last row and records how the file was cut in `TrepnExport.truncation`.
    Every number must be finite, and the samples of the data points farm reads must average to
    what the statistics block says (else the file was edited or spliced).
    """
    rows = _rows(text, source)
    header_index = next((i for i, row in enumerate(rows) if row and _is_time_header(row[0])), None)
    if header_index is None:
        raise ConfigError(
            "no header row starting with `Time [ms]`: not a Trepn Profiler CSV export",
            location=f"{source}:1",
        )
    stats_index = next(
        (i for i, row in enumerate(rows) if i > header_index and row and row[0].strip() == STATISTICS_MARKER),
        None,
    )
    truncation = _truncation(text, rows, source, stats_index, allow_truncated)
    if truncation is not None and truncation.dropped_line is not None:
        if header_index == len(rows) - 1:
            raise ConfigError(
                "the export was cut inside its header row: it has no samples",
                location=f"{source}:{header_index + 1}",
                hint="export it again from Trepn",
            )
        rows = rows[:-1]
    preamble: dict[str, str] = {}
    if header_index >= 2:
        preamble = {
            k.strip(): v.strip() for k, v in zip(rows[0], rows[1], strict=False) if k.strip() and v.strip()
        }
    columns = _columns(rows[header_index], header_index + 1, source)
    samples: dict[int, tuple[list[float], list[float]]] = {col: ([], []) for col, _, _ in columns}
    sample_rows = rows[header_index + 1 : stats_index]
    for line, row in enumerate(sample_rows, start=header_index + 2):
        for column, name, _ in columns:
            time_cell = row[column - 1].strip() if column - 1 < len(row) else ""
            value_cell = row[column].strip() if column < len(row) else ""
            if not time_cell or not value_cell:
                continue
            times, values = samples[column]
            times.append(_number(time_cell, f"{name}: time", source, line))
            values.append(_number(value_cell, name, source, line))
    metrics = {
        name: TrepnMetric(
            name, unit, Series.of(np.round(np.array(samples[col][0]) * NS_PER_MS), samples[col][1])
        )
        for col, name, unit in columns
    }
    statistics = {} if stats_index is None else _statistics(rows, stats_index, source)
    _check_against_statistics(metrics, statistics, source)
    return TrepnExport(source, preamble, metrics, statistics, truncation)


def _rows(text: str, source: str) -> list[list[str]]:
    """The CSV rows; a field longer than the csv module takes (128 KiB) or a stray NUL is
    ConfigError naming its line."""
    reader = csv.reader(io.StringIO(text))
    try:
        return list(reader)
    except csv.Error as error:
        raise ConfigError(
            f"not a Trepn Profiler CSV export: {error}", location=f"{source}:{reader.line_num}"
        ) from None


def _truncation(
    text: str, rows: Sequence[Sequence[str]], source: str, stats_index: int | None, allowed: bool
) -> Truncation | None:
    ends_mid_row = bool(text) and not text.endswith(("\n", "\r"))
    if stats_index is not None and not ends_mid_row:
        return None
    last_line = len(rows)
    if not allowed:
        problem = (
            "the export ends mid-row"
            if stats_index is not None
            else "the export has no System Statistics block"
        )
        raise ConfigError(
            f"{problem}: it was cut (copied while Trepn was writing, or a partial download)",
            location=f"{source}:{last_line}",
            hint="export it again from Trepn, or pass --allow-truncated to use the samples before the cut",
        )
    dropped = last_line if ends_mid_row else None
    return Truncation(source, last_line - 1 if dropped else last_line, dropped, stats_index is not None)


def _columns(header: Sequence[str], line: int, source: str) -> list[tuple[int, str, str]]:
    """(value column, name, unit) of every data point in the header row."""
    columns: list[tuple[int, str, str]] = []
    for column in range(0, len(header) - 1, 2):
        if not header[column].strip() and not header[column + 1].strip():
            continue
        if not _is_time_header(header[column]):
            raise ConfigError(
                f"column {column + 1} is `{header[column]}`, expected `Time [ms]` before each data point",
                location=f"{source}:{line}",
            )
        name, unit = split_header(header[column + 1])
        columns.append((column + 1, name, unit))
    return columns


def _number(cell: str, what: str, source: str, line: int) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise ConfigError(
            f"{what}: `{cell}` is not a number",
            location=f"{source}:{line}",
            hint="is this file a complete Trepn CSV export?",
        ) from None
    if not math.isfinite(value):
        raise ConfigError(
            f"{what}: `{cell}` is not a finite number", location=f"{source}:{line}", hint="Trepn writes none"
        )
    return value


def _statistics(rows: Sequence[Sequence[str]], stats_index: int, source: str) -> dict[str, TrepnStatistic]:
    """Trepn's `Sensor Id,Name,Type,Average` block: name -> first average it printed."""
    result: dict[str, TrepnStatistic] = {}
    for line, row in enumerate(rows[stats_index + 1 :], start=stats_index + 2):
        if len(row) < 4 or not row[0].strip().isdigit():
            continue
        name = row[1].strip()
        result[name] = TrepnStatistic(_number(row[3].strip(), f"{name}: average", source, line), line)
    return result


def _check_against_statistics(
    metrics: dict[str, TrepnMetric], statistics: dict[str, TrepnStatistic], source: str
) -> None:
    """The data points farm reads average to Trepn's own figure (the Nexus 5 files print 10 digits)."""
    for name, metric in metrics.items():
        stat = statistics.get(name)
        if name not in _SOURCE_OF or stat is None or len(metric.series) == 0:
            continue
        mean = float(np.mean(metric.series.values))
        if not math.isclose(mean, stat.average, rel_tol=STATISTICS_REL_TOL, abs_tol=STATISTICS_REL_TOL):
            raise ConfigError(
                f"{name}: its {len(metric.series)} samples average {mean:.7g} {metric.unit} but the "
                f"System Statistics say {stat.average:.7g}: the samples were edited, spliced or cut",
                location=f"{source}:{stat.line}",
                hint="export it again from Trepn",
            )


def read_trepn_csv(path: Path, *, allow_truncated: bool = False) -> TrepnExport:
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as error:
        raise ConfigError(f"cannot read: {error.strerror}", location=str(path)) from error
    return parse_trepn_csv(text, str(path), allow_truncated=allow_truncated)


def trepn_power_metrics(
    export: TrepnExport, *, idle_power_mw: float | None = None, inferences: int | None = None
) -> list[Metric]:
    """Power metrics over the whole recording.

    power_mean_mw is Trepn's own average (the plain mean of its samples, what its statistics block
    prints); energy is integrated over Trepn's real power readings (its update points, each held
    until the next), and power_time_weighted_mw = energy_total_mj / duration_s. The two means differ
    by up to ~1% when readings come at uneven intervals. `idle_power_mw` (a time-weighted idle
    figure) is subtracted for energy_net_mj.
    """
    trace = export.trace()
    metrics: list[Metric] = []
    samples = trace.series("battery.power")
    if samples is not None and len(samples) > 1:
        power = samples.update_points()
        start_ns, end_ns = int(power.t_ns[0]), int(power.t_ns[-1])
        if end_ns > start_ns:
            duration_s = (end_ns - start_ns) / 1e9
            gross_mj = energy_mj(power, start_ns, end_ns)
            metrics += [
                Metric("duration_s", duration_s, "s"),
                # Trepn's own figure (its statistics block): the plain mean of every sample
                Metric("power_mean_mw", float(np.mean(samples.values)), "mW"),
                # what the energy is made of: each gauge reading held until the next one
                Metric("power_time_weighted_mw", gross_mj / duration_s, "mW"),
                Metric("power_max_mw", float(np.max(power.values)), "mW"),
                Metric("energy_total_mj", gross_mj, "mJ"),
            ]
            if idle_power_mw is not None:
                net_mj = gross_mj - idle_power_mw * duration_s
                metrics += [
                    Metric("power_idle_mw", idle_power_mw, "mW"),
                    Metric("energy_net_mj", net_mj, "mJ"),
                ]
                if inferences:
                    metrics.append(Metric("energy_per_inference_mj", net_mj / inferences, "mJ"))
            elif inferences:
                metrics.append(Metric("energy_per_inference_gross_mj", gross_mj / inferences, "mJ"))
    busy = trace.series("gpu.busy")
    if busy is not None and len(busy) > 0:
        metrics.append(Metric("gpu_load_mean", float(np.mean(busy.values)), "fraction"))
    freq = trace.series("gpu.freq")
    if freq is not None and len(freq) > 0:
        metrics.append(Metric("gpu_freq_mean_mhz", float(np.mean(freq.values)), "MHz"))
    return metrics
