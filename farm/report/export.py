"""Tidy export: one row per run and metric, every factor as a column (pure; the CLI writes it).

Columns: experiment, run_id, cell_id, repetition, device, state, valid, <factors...>, metric, value,
unit. `valid` is 1 or 0 (farm.analysis.validity, for the row's metric), empty for runs not DONE.
A factor whose name clashes with a fixed column is written as `factor_<name>`. Runs without
metrics (failed, pending) have no rows: the report's plan-vs-done table lists them. Text cells go
through farm.safe_text.csv_cell (no formula can start a cell, no control character, one row per
line); numbers are written as numbers.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from farm.analysis.validity import usable
from farm.report.model import ReportData
from farm.safe_text import csv_cell
from farm.store.runs import RunState

FIXED_COLUMNS: tuple[str, ...] = ("experiment", "run_id", "cell_id", "repetition", "device", "state", "valid")
VALUE_COLUMNS: tuple[str, ...] = ("metric", "value", "unit")


def factor_columns(data: ReportData) -> list[tuple[str, str]]:
    """(factor name, column name) pairs."""
    taken = set(FIXED_COLUMNS) | set(VALUE_COLUMNS)
    return [(name, f"factor_{name}" if name in taken else name) for name in data.factor_names]


def tidy_rows(data: ReportData) -> list[dict[str, Any]]:
    factors = factor_columns(data)
    rows = []
    for run in data.runs:
        base: dict[str, Any] = {
            "experiment": data.experiment,
            "run_id": run.run_id,
            "cell_id": run.cell_id,
            "repetition": run.repetition,
            "device": run.device_id or "",
            "state": run.state.value,
        }
        base.update({column: run.factors.get(name, "") for name, column in factors})
        for metric in sorted(run.metrics):
            valid = (1 if usable(run.metrics, metric) else 0) if run.state is RunState.DONE else ""
            rows.append(
                {
                    **base,
                    "valid": valid,
                    "metric": metric,
                    "value": run.metrics[metric],
                    "unit": run.units.get(metric, ""),
                }
            )
    return rows


def tidy_csv(data: ReportData) -> str:
    columns = [*FIXED_COLUMNS, *(column for _, column in factor_columns(data)), *VALUE_COLUMNS]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in tidy_rows(data):
        writer.writerow({k: csv_cell(v) for k, v in row.items()})
    return buffer.getvalue()
