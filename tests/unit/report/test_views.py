"""Declared tables: plain medians per phone or pooled with the between-phone range, and the
derived ones (relative_to, crossover, best_of), checked against the runs they come from."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from farm.errors import ConfigError
from farm.experiment import load_text
from farm.report.model import ReportData, TableSpec
from farm.report.render import render_html
from farm.report.tables import cells
from farm.report.views import render_table


def _latencies(data: ReportData, device: str, **factors: object) -> list[float]:
    return [
        r.metrics["latency_median_ms"]
        for r in data.runs
        if r.device_id == device and all(r.factors[k] == v for k, v in factors.items())
    ]


def test_a_speedup_table_is_the_ratio_of_the_runs_medians(report_data: ReportData) -> None:
    spec = TableSpec(rows=("hidden", "gpu_load"), relative_to=("backend", "cpu"), speedup=True)
    table = render_table(report_data, spec)
    assert table.columns[:5] == ("device", "hidden", "gpu_load", "backend", "speedup vs backend=cpu")
    assert len(table.rows) == 2 * 2 * 3
    device = "lab1/nexus6p-01"
    row = next(r for r in table.rows if r[:3] == (device, "128", "0.5"))
    cpu = np.median(_latencies(report_data, device, backend="cpu", hidden=128, gpu_load=0.5))
    gpu = np.median(_latencies(report_data, device, backend="gpu", hidden=128, gpu_load=0.5))
    assert float(row[4]) == pytest.approx(cpu / gpu, rel=5e-3)
    low, high = (float(x) for x in row[5].strip("[]").split(","))
    assert low <= float(row[4]) <= high


def test_the_crossover_table_finds_where_the_gpu_stops_winning(report_data: ReportData) -> None:
    spec = TableSpec(
        rows=("hidden", "gpu_load"), relative_to=("backend", "cpu"), speedup=True, crossover="gpu_load"
    )
    table = render_table(report_data, spec)
    # the sample's GPU is 3x faster at no load and loses 2x per unit of load: speedup 3 / (1 + 2 x)
    # is 1 at x = 1, past the last level (0.9), so most rows never cross
    assert {r[5] for r in table.rows} <= {"stays above 1", "falls below 1"}
    assert all(r[6] == "0..0.9" for r in table.rows)


def test_the_best_table_names_the_lowest_median_level(report_data: ReportData) -> None:
    table = render_table(report_data, TableSpec(rows=("hidden", "gpu_load"), best_of="backend"))
    assert {r[3] for r in table.rows if r[2] == "0"} == {"gpu"}


def test_a_table_pooled_over_phones_shows_the_between_phone_range(report_data: ReportData) -> None:
    spec = TableSpec(rows=("backend", "hidden", "gpu_load"), pool=("device",))
    table = render_table(report_data, spec)
    assert "between-phone range" in table.columns and "each row pools 2 phones" in table.caption
    per_phone = cells(report_data)
    row = next(r for r in table.rows if r[:3] == ("gpu", "32", "0.9"))
    medians = [
        c.values["latency_median_ms"][0]
        for c in per_phone
        if dict(c.factors) == {"backend": "gpu", "hidden": 32, "gpu_load": 0.9}
    ]
    assert row[-2] == "2"
    low, high = (float(x) for x in row[-1].strip("[]").split(","))
    assert low == pytest.approx(min(medians), rel=5e-3) and high == pytest.approx(max(medians), rel=5e-3)


def test_the_all_phones_table_carries_the_between_phone_range(report_data: ReportData) -> None:
    pooled = cells(report_data, by_device=False)
    per_phone = cells(report_data)
    for cell in pooled:
        medians = [c.values["latency_median_ms"][0] for c in per_phone if c.factors == cell.factors]
        low, high, phones = cell.spread["latency_median_ms"]
        assert (low, high, phones) == (pytest.approx(min(medians)), pytest.approx(max(medians)), 2)
    assert "All phones together (pooled)" in render_html(report_data, [])


def test_declared_tables_reach_the_html(report_data: ReportData) -> None:
    data = dataclasses.replace(
        report_data, tables=(TableSpec(rows=("backend",), title="Backends", pool=("hidden", "gpu_load")),)
    )
    html = render_html(data, [])
    assert "<h3>Backends</h3>" in html and "each row pools hidden (2 levels: 32, 128)" in html


SPEC = """\
name: x
benchmark: {program: lstm}
sweep: {backend: [cpu, gpu], gpu_load: [0, 0.5, 0.9], hidden: [32, 64]}
report:
  tables:
    - TABLE
"""


def test_derived_tables_load_and_name_their_factors() -> None:
    load_text(
        SPEC.replace(
            "TABLE",
            "{rows: [hidden, gpu_load], relative_to: {backend: cpu}, speedup: true, crossover: gpu_load}",
        ),
        "x.yaml",
    )
    load_text(SPEC.replace("TABLE", "{rows: [backend], pool: [gpu_load, hidden, device]}"), "x.yaml")
    with pytest.raises(ConfigError, match=r"x.yaml:6: report.tables\[0\].crossover: needs relative_to"):
        load_text(SPEC.replace("TABLE", "{rows: [hidden, gpu_load, backend], crossover: gpu_load}"), "x.yaml")
    with pytest.raises(ConfigError, match=r"report.tables\[0\]: gpu_load varies within each point"):
        load_text(SPEC.replace("TABLE", "{rows: [hidden], relative_to: {backend: cpu}}"), "x.yaml")
