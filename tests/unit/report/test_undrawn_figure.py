"""A declared figure that no run can be drawn in says so in the report, with why; one that can be
drawn does not."""

from __future__ import annotations

import dataclasses

from farm.report.figures import undrawn_notes
from farm.report.model import FigureSpec
from farm.report.render import render_html
from tests.unit.report.report_sample import build_report_data

ENERGY = FigureSpec(x="gpu_load", y="energy_per_inference_mj", color="backend", title="Energy per inference")
LATENCY = FigureSpec(x="hidden", y="latency_median_ms", color="backend", title="Latency")
MISSING = FigureSpec(x="hidden", y="memory_peak_mb", color="backend", title="Peak memory")


def _no_valid_energy(declared: tuple[FigureSpec, ...]):  # type: ignore[no-untyped-def]
    """Every run's energy measured but invalid: too few fuel-gauge readings."""
    data = build_report_data(declared=declared)
    runs = tuple(
        dataclasses.replace(r, metrics={**r.metrics, "valid_fuel_gauge_readings": 0.0, "valid_energy": 0.0})
        for r in data.runs
    )
    return dataclasses.replace(data, runs=runs)


def test_a_declared_figure_without_valid_data_is_named_with_why() -> None:
    data = _no_valid_energy((LATENCY, ENERGY, MISSING))
    notes = undrawn_notes(data)
    assert len(notes) == 2, notes
    energy, missing = notes
    measured = sum(1 for r in data.done_runs if "energy_per_inference_mj" in r.metrics)
    assert measured > 0
    assert energy.startswith(
        f"Figure 'Energy per inference' is not drawn: {measured} run(s) measured energy_per_inference_mj"
    )
    assert missing == "Figure 'Peak memory' is not drawn: no finished run has memory_peak_mb."
    html = render_html(data)
    assert "Figure &#39;Energy per inference&#39; is not drawn" in html


def test_a_drawable_figure_has_no_such_note() -> None:
    assert undrawn_notes(build_report_data(declared=(LATENCY, ENERGY))) == []
