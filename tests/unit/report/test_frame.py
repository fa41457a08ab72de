"""The tidy frame agrees with the report: its valid rows give the cell table's medians."""

from __future__ import annotations

import dataclasses

import pytest

from farm.report.frame import counted, tidy_frame
from farm.report.model import ReportData
from farm.report.tables import cells
from farm.store.runs import RunState


def test_the_frames_medians_are_the_cell_tables(report_data: ReportData) -> None:
    frame = counted(tidy_frame(report_data), report_data)
    latency = frame[frame.metric == "latency_median_ms"]
    medians = latency.groupby(["cell_id", "device"]).value.median()
    table = cells(report_data)
    assert len(table) == len(medians) == 24
    for cell in table:
        cell_id = next(r.cell_id for r in report_data.runs if tuple(r.factors.items()) == cell.factors)
        assert medians[(cell_id, cell.device_id)] == pytest.approx(cell.values["latency_median_ms"][0])


def test_invalid_runs_are_rows_marked_invalid_and_left_out_of_counted(report_data: ReportData) -> None:
    victim = report_data.runs[5]
    flagged = dataclasses.replace(victim, metrics={**victim.metrics, "valid_not_throttled": 0.0})
    data = dataclasses.replace(report_data, runs=(*report_data.runs[:5], flagged, *report_data.runs[6:]))
    frame = tidy_frame(data)
    assert set(frame.loc[~frame.valid, "run_id"]) == {victim.run_id}
    assert frame.loc[frame.run_id == victim.run_id, "valid_not_throttled"].eq(False).all()
    assert frame.loc[frame.run_id != victim.run_id, "valid_not_throttled"].isna().all()
    assert victim.run_id not in set(counted(frame, data).run_id)
    everything = dataclasses.replace(data, include_invalid=True)
    assert victim.run_id in set(counted(frame, everything).run_id)
    assert "valid_not_throttled" not in set(frame.metric)  # a flag is a column, not a metric row


def test_a_failed_runs_partial_metrics_are_rows_that_do_not_count(report_data: ReportData) -> None:
    failed = dataclasses.replace(report_data.runs[0], run_id="partial", state=RunState.FAILED)
    data = dataclasses.replace(report_data, runs=(*report_data.runs, failed))
    frame = tidy_frame(data)
    partial = frame[frame.run_id == "partial"]
    assert len(partial) > 0 and not partial.valid.any() and set(partial.state) == {"FAILED"}
    assert "partial" not in set(frame[frame.valid].run_id)
