"""Energy in the report: runs measured while charging have no energy and are named for it (not
lumped with runs that lack a power source); an energy below zero never reaches a figure."""

from __future__ import annotations

import dataclasses

from farm.report.figures import render_figure
from farm.report.model import FigureSpec, ReportData
from farm.report.tables import quality_notes

ENERGY_FIGURE = FigureSpec(x="gpu_load", y="energy_per_inference_mj", color="backend")


def with_metrics(data: ReportData, changes: dict[str, dict[str, float | None]]) -> ReportData:
    """The data with some runs' metrics changed (None removes a metric)."""
    runs = []
    for run in data.runs:
        metrics = dict(run.metrics)
        for name, value in changes.get(run.run_id, {}).items():
            if value is None:
                metrics.pop(name, None)
            else:
                metrics[name] = value
        runs.append(dataclasses.replace(run, metrics=metrics))
    return dataclasses.replace(data, runs=tuple(runs))


def only(data: ReportData, run_ids: set[str]) -> ReportData:
    return dataclasses.replace(data, runs=tuple(r for r in data.runs if r.run_id in run_ids))


def test_charging_runs_are_named_for_charging_not_for_a_missing_power_source(
    report_data: ReportData,
) -> None:
    no_energy = {"power_mean_mw": None, "energy_per_inference_mj": None}
    data = with_metrics(report_data, {"r000": {**no_energy, "charging_disabled": 0.0}, "r001": no_energy})
    notes = quality_notes(data)
    charging = [n for n in notes if n.startswith("Charging could not be disabled in")]
    assert len(charging) == 1 and "r000" in charging[0] and "no power or energy" in charging[0]
    missing = [n for n in notes if "have no battery power samples" in n]
    assert len(missing) == 1 and missing[0].startswith("1 run(s)")


def test_energy_below_zero_is_left_out_of_figures_and_noted(report_data: ReportData) -> None:
    data = with_metrics(report_data, {"r000": {"energy_per_inference_mj": -3.0, "energy_net_mj": -30.0}})
    assert any("less than the phone's idle power" in n and "r000" in n for n in quality_notes(data))
    assert render_figure(only(data, {"r000"}), ENERGY_FIGURE) is None
    assert render_figure(only(data, {"r000", "r001"}), ENERGY_FIGURE) is not None
