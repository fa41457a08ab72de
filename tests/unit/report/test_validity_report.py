"""Invalid runs in reports and exports: left out of figures and cell statistics unless asked,
counted in the data-quality notes, marked in the tidy CSV; one colour per factor level."""

from __future__ import annotations

import csv
import dataclasses
import io

import numpy as np
import pytest
from report_sample import build_report_data

from farm.analysis.validity import Check, Validity
from farm.experiment.sections import FigureKind
from farm.report.export import tidy_csv
from farm.report.figures import level_colors, render_figure
from farm.report.model import FigureSpec, ReportData
from farm.report.tables import cells, quality_notes

FLAGGED = Validity({Check.NOT_THROTTLED: False, Check.MIN_DURATION: True})


def _with_an_invalid_outlier() -> tuple[ReportData, str]:
    """The sample study with one run 1000x slower, flagged not valid (throttled)."""
    data = build_report_data()
    victim = next(r for r in data.runs if r.factors["backend"] == "cpu" and r.repetition == 0)
    flags = {m.name: m.value for m in FLAGGED.to_metrics() if m.measured}
    slow = {**victim.metrics, "latency_median_ms": victim.metrics["latency_median_ms"] * 1000, **flags}
    runs = tuple(dataclasses.replace(r, metrics=slow) if r is victim else r for r in data.runs)
    return dataclasses.replace(data, runs=runs), victim.run_id


def _cell_of(data: ReportData, run_id: str) -> tuple[float, int, list[float]]:
    run = next(r for r in data.runs if r.run_id == run_id)
    (cell,) = [
        c for c in cells(data) if c.device_id == run.device_id and dict(c.factors) == dict(run.factors)
    ]
    same = [r for r in data.runs if r.device_id == run.device_id and r.factors == run.factors]
    return cell.values["latency_median_ms"][0], cell.done, [r.metrics["latency_median_ms"] for r in same]


def test_cell_statistics_leave_the_invalid_run_out_unless_asked() -> None:
    data, victim = _with_an_invalid_outlier()
    median, done, values = _cell_of(data, victim)
    everything, _, _ = _cell_of(dataclasses.replace(data, include_invalid=True), victim)
    outlier = max(values)
    assert done == 3  # the run still counts as done
    assert median == pytest.approx(float(np.median([v for v in values if v != outlier])))
    assert everything == pytest.approx(float(np.median(values)))
    assert median != pytest.approx(everything)


def test_figures_leave_the_invalid_run_out_unless_asked() -> None:
    data, _ = _with_an_invalid_outlier()
    spec = FigureSpec(x="hidden", color="backend", facet="gpu_load")
    valid, everything = (
        render_figure(data, spec),
        render_figure(dataclasses.replace(data, include_invalid=True), spec),
    )
    assert valid is not None and everything is not None
    assert valid.svg != everything.svg


def test_the_quality_notes_count_invalid_runs_by_check() -> None:
    data, victim = _with_an_invalid_outlier()
    (note,) = [n for n in quality_notes(data) if "not valid" in n]
    assert note.startswith(f"1 of {len(data.done_runs)} done run(s) are not valid (not_throttled 1)")
    assert "--include-invalid" in note and victim in note
    assert not [n for n in quality_notes(build_report_data()) if "not valid" in n]


def test_the_export_marks_each_row_valid_or_not() -> None:
    data, victim = _with_an_invalid_outlier()
    rows = list(csv.DictReader(io.StringIO(tidy_csv(data))))
    assert {r["valid"] for r in rows if r["run_id"] == victim} == {"0"}
    assert {r["valid"] for r in rows if r["run_id"] != victim} == {"1"}


def test_a_level_has_one_colour_in_every_figure() -> None:
    data = build_report_data()
    assert level_colors(data, "backend") == {"cpu": "C0", "gpu": "C1"}
    # An energy figure where only gpu runs have the metric still draws gpu in gpu's colour
    # (matplotlib's C1, #ff7f0e), not in the first colour of the cycle (C0, #1f77b4).
    runs = tuple(
        dataclasses.replace(r, metrics={k: v for k, v in r.metrics.items() if not k.startswith("energy")})
        if r.factors["backend"] == "cpu"
        else r
        for r in data.runs
    )
    figure = render_figure(
        dataclasses.replace(data, runs=runs),
        FigureSpec(x="hidden", y="energy_per_inference_mj", color="backend", kind=FigureKind.BAR),
    )
    assert figure is not None
    # Bars are filled with the level's colour alone (error-bar caps carry a fill and a stroke).
    assert 'fill: #ff7f0e"' in figure.svg and 'fill: #1f77b4"' not in figure.svg


def test_the_phone_section_shows_the_clock_control_it_ran_under() -> None:
    from farm.report.environment import phone_info

    env = {
        "clocks": {
            "requested": "auto",
            "mode": "fixed_performance",
            "as_requested": True,
            "readback": {},
            "affinity": "big",
            "affinity_cpus": [4, 5, 6, 7],
            "notes": ["pin not possible: needs root (adbd as root or a working su)"],
        },
        "throttle": {"throttled": True},
    }
    shown = dict(phone_info("local/x", "Pixel", "arm64-v8a", None, env).properties)
    assert shown["clocks"] == (
        "fixed_performance (asked auto); affinity big (cpus [4, 5, 6, 7]); "
        "pin not possible: needs root (adbd as root or a working su)"
    )
    assert "throttle" not in shown  # per run: counted in the notes instead
    pinned = {
        "requested": "pin",
        "mode": "pin",
        "as_requested": True,
        "affinity": "all",
        "readback": {
            "/sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq": "300000",
            "/sys/devices/system/cpu/cpufreq/policy0/scaling_min_freq": "300000",
        },
    }
    assert dict(phone_info("local/x", None, None, None, {"clocks": pinned}).properties)["clocks"] == (
        "pin; pinned policy0 300000 kHz"
    )
