"""Trepn Profiler CSV exports: a pure parser and the power metrics farm derives from them.

Layout as real exports have it (shared/data/trepn/README.md): a preamble (`App,Package,Start
Time,...` and one row), a blank line, a header row in which every data point has its own
preceding `Time  [ms]` column (`Time  [ms],Battery Power* [uW],Time  [ms],GPU Load [%],...`),
sample rows where any metric's cell may be empty (each metric runs on its own clock, ~100 ms), and
a trailing `System Statistics:` block (`Sensor Id,Name,Type,Average,...`) that is not samples.
A metric's name is its header up to `[`, its unit the text inside the brackets.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from farm.analysis.metrics import Metric
from farm.analysis.power import energy_mj, mean_power_mw
from farm.analysis.series import Series, SeriesTrace
from farm.errors import ConfigError

STATISTICS_MARKER = "System Statistics:"
_HEADER_RE = re.compile(r"^\s*(?P<name>[^\[]*?)\s*\[(?P<unit>[^\]]*)\]\s*(?P<rest>.*)$")
NS_PER_MS = 1_000_000

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
class TrepnExport:
    source: str
    preamble: dict[str, str]
    metrics: dict[str, TrepnMetric]
    statistics: dict[str, float] = field(default_factory=dict)  # Trepn's own averages, by name

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


def parse_trepn_csv(text: str, source: str = "<trepn>") -> TrepnExport:
    """Parse one export. Raises ConfigError naming `source:line` for anything that is not Trepn's."""
    rows = list(csv.reader(io.StringIO(text)))
    header_index = next((i for i, row in enumerate(rows) if row and _is_time_header(row[0])), None)
    if header_index is None:
        raise ConfigError(
            "no header row starting with `Time [ms]`: not a Trepn Profiler CSV export",
            location=f"{source}:1",
        )
    preamble: dict[str, str] = {}
    if header_index >= 2:
        preamble = {
            k.strip(): v.strip() for k, v in zip(rows[0], rows[1], strict=False) if k.strip() and v.strip()
        }
    header = rows[header_index]
    columns: list[tuple[int, str, str]] = []  # (value column, name, unit)
    for column in range(0, len(header) - 1, 2):
        if not header[column].strip() and not header[column + 1].strip():
            continue
        if not _is_time_header(header[column]):
            raise ConfigError(
                f"column {column + 1} is `{header[column]}`, expected `Time [ms]` before each data point",
                location=f"{source}:{header_index + 1}",
            )
        name, unit = split_header(header[column + 1])
        columns.append((column + 1, name, unit))
    samples: dict[int, tuple[list[float], list[float]]] = {col: ([], []) for col, _, _ in columns}
    statistics: dict[str, float] = {}
    line = header_index + 1
    for line, row in enumerate(rows[header_index + 1 :], start=header_index + 2):
        if row and row[0].strip() == STATISTICS_MARKER:
            statistics = _statistics(rows[line:])
            break
        for column, name, _ in columns:
            time_cell = row[column - 1].strip() if column - 1 < len(row) else ""
            value_cell = row[column].strip() if column < len(row) else ""
            if not time_cell or not value_cell:
                continue
            try:
                times, values = samples[column]
                times.append(float(time_cell))
                values.append(float(value_cell))
            except ValueError:
                raise ConfigError(
                    f"{name}: `{time_cell}`, `{value_cell}` is not a number pair",
                    location=f"{source}:{line}",
                    hint="is this file a complete Trepn CSV export?",
                ) from None
    metrics = {
        name: TrepnMetric(
            name, unit, Series.of(np.round(np.array(samples[col][0]) * NS_PER_MS), samples[col][1])
        )
        for col, name, unit in columns
    }
    return TrepnExport(source, preamble, metrics, statistics)


def _statistics(rows: Sequence[Sequence[str]]) -> dict[str, float]:
    """Trepn's `Sensor Id,Name,Type,Average` block: name -> first average it printed."""
    result: dict[str, float] = {}
    for row in rows:
        if len(row) < 4 or not row[0].strip().isdigit():
            continue
        try:
            result[row[1].strip()] = float(row[3])
        except ValueError:
            continue
    return result


def read_trepn_csv(path: Path) -> TrepnExport:
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as error:
        raise ConfigError(f"cannot read: {error.strerror}", location=str(path)) from error
    return parse_trepn_csv(text, str(path))


def trepn_power_metrics(
    export: TrepnExport, *, idle_power_mw: float | None = None, inferences: int | None = None
) -> list[Metric]:
    """Power metrics over the whole recording, on Trepn's real power samples (its update points)."""
    trace = export.trace()
    metrics: list[Metric] = []
    power = trace.series("battery.power")
    if power is not None and len(power) > 1:
        power = power.update_points()
        start_ns, end_ns = int(power.t_ns[0]), int(power.t_ns[-1])
        if end_ns > start_ns:
            duration_s = (end_ns - start_ns) / 1e9
            gross_mj = energy_mj(power, start_ns, end_ns)
            metrics += [
                Metric("duration_s", duration_s, "s"),
                Metric("power_mean_mw", mean_power_mw(power, start_ns, end_ns), "mW"),
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
