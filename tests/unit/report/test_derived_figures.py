"""Declared derived figures (relative_to / speedup / share_of): the values they draw against the
runs' own medians, what their captions say, and that the HTML draws them per phone."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from farm.analysis.aggregate import GroupStat
from farm.errors import ConfigError
from farm.experiment import load_text
from farm.report.derived_figures import (
    crossover_bands,
    crossover_marks,
    draw,
    relative_points,
    render_figures,
    share_points,
)
from farm.report.figures import best_stat
from farm.report.model import FigureSpec, ReportData
from farm.report.query import figure_specs
from farm.report.render import render_html

DEVICE = "lab1/nexus6p-01"
SPEEDUP = FigureSpec(x="gpu_load", relative_to=("backend", "cpu"), speedup=True, where=(("hidden", (128,)),))


def _median(data: ReportData, device: str, metric: str = "latency_median_ms", **factors: object) -> float:
    return float(
        np.median(
            [
                r.metrics[metric]
                for r in data.done_runs
                if r.device_id == device and all(r.factors[k] == v for k, v in factors.items())
            ]
        )
    )


def test_a_speedup_figure_draws_the_ratio_of_medians_per_phone_and_level(report_data: ReportData) -> None:
    points = relative_points(report_data, SPEEDUP)
    assert {p.device for p in points} == {r.device_id for r in report_data.done_runs}
    assert {p.line[0] for p in points} == {"gpu"}  # the reference level is not drawn against itself
    mine = {p.x: p for p in points if p.device == DEVICE}
    assert sorted(mine) == [0.0, 0.5, 0.9]
    for load, point in mine.items():
        cpu = _median(report_data, DEVICE, backend="cpu", hidden=128, gpu_load=load)
        gpu = _median(report_data, DEVICE, backend="gpu", hidden=128, gpu_load=load)
        assert point.value == pytest.approx(cpu / gpu)
        assert point.low <= point.value <= point.high
    # the sample's model: gpu = cpu / 3 * (1 + 2 load), so the speedup falls from ~3 through 1
    assert mine[0.0].value == pytest.approx(3.0, rel=0.1) and mine[0.9].value < 1.2
    ratio = dataclasses.replace(SPEEDUP, speedup=False)
    inverse = {p.x: p.value for p in relative_points(report_data, ratio) if p.device == DEVICE}
    assert inverse[0.5] == pytest.approx(1.0 / mine[0.5].value)


def test_a_speedup_figure_is_drawn_with_its_caption(report_data: ReportData) -> None:
    figure = draw(report_data, SPEEDUP)
    assert figure is not None and figure.pdf.startswith(b"%PDF")
    assert f"device={DEVICE}" in figure.svg and "speedup over backend=cpu" in figure.svg
    assert "median at backend=cpu / median" in figure.caption and "only hidden=128" in figure.caption
    assert figure.name == "latency_median_ms_speedup_over_backend_cpu_vs_gpu_load_at_hidden_128"
    categorical = draw(
        report_data, FigureSpec(x="hidden", relative_to=("backend", "cpu"), pool=("gpu_load",))
    )
    assert categorical is not None and "gpu_load (3 levels" in categorical.caption


def test_a_share_figure_draws_each_runs_part_over_its_whole(report_data: ReportData) -> None:
    runs = []
    for index, run in enumerate(report_data.runs):  # h2d + d2h = kernel * 3 / (1 + hidden / 32)
        kernel = 1.0 + 0.01 * (index % 7)
        moved = kernel * 3.0 / (1.0 + run.factors["hidden"] / 32)
        metrics = {
            "opencl_h2d_total_ms": moved / 2,
            "opencl_d2h_total_ms": moved / 2,
            "opencl_kernel_total_ms": kernel,
        }
        runs.append(dataclasses.replace(run, metrics={**run.metrics, **metrics}))
    data = dataclasses.replace(report_data, runs=tuple(runs))
    moved = ("opencl_h2d_total_ms", "opencl_d2h_total_ms")
    spec = FigureSpec(
        x="hidden", color="backend", share_of=(moved, (*moved, "opencl_kernel_total_ms")), pool=("gpu_load",)
    )
    points = share_points(data, spec)
    assert len(points) == 2 * 2 * 2  # phones x hidden x backend
    for point in points:  # moved / (moved + kernel) = 3 / (3 + 1 + hidden / 32), whatever the kernel
        assert point.value == pytest.approx(3.0 / (4.0 + float(point.x) / 32))  # type: ignore[arg-type]
        assert point.low <= point.value <= point.high
    figure = draw(data, spec)
    assert figure is not None and "Share of opencl_h2d_total_ms + opencl_d2h_total_ms in" in figure.svg
    assert "share of the whole [fraction]" in figure.svg
    assert "median over runs of (opencl_h2d_total_ms + opencl_d2h_total_ms)" in figure.caption


SPEC = """\
name: x
benchmark: {program: lstm}
sweep: {backend: [cpu, gpu], hidden: [32, 128]}
report:
  figures:
    - FIGURE
"""


def test_declared_derived_figures_load_reach_the_html_and_are_checked(report_data: ReportData) -> None:
    experiment = load_text(SPEC.replace("FIGURE", "{x: hidden, relative_to: {backend: cpu}, speedup: true}"))
    (spec,) = figure_specs(experiment)
    assert spec.relative_to == ("backend", "cpu") and spec.speedup and spec.named[:2] == ("hidden", "backend")
    data = dataclasses.replace(report_data, figures=(dataclasses.replace(spec, pool=("gpu_load",)),))
    (first, *_) = render_figures(data)
    assert first.name == "latency_median_ms_speedup_over_backend_cpu_vs_hidden"
    assert f'<figure id="fig-{first.name}">' in render_html(data)
    shared = load_text(
        SPEC.replace("FIGURE", "{x: hidden, color: backend, share_of: {part: [a, b], whole: [a, b, c]}}")
    )
    assert figure_specs(shared)[0].share_of == (("a", "b"), ("a", "b", "c"))
    with pytest.raises(ConfigError, match=r"x.yaml:6: report.figures\[0\].share_of: a figure is relative_to"):
        load_text(
            SPEC.replace(
                "FIGURE", "{x: hidden, relative_to: {backend: cpu}, share_of: {part: [a], whole: [b]}}"
            ),
            "x.yaml",
        )
    with pytest.raises(
        ConfigError, match=r"report.figures\[0\].relative_to.hidden: hidden is the figure's x"
    ):
        load_text(SPEC.replace("FIGURE", "{x: hidden, relative_to: {hidden: 32}, pool: [backend]}"), "x.yaml")


def test_a_crossover_figure_marks_where_the_speedup_crosses_one_with_its_ci(report_data: ReportData) -> None:
    # the sample's model: speedup = 3 / (1 + 2 load), 1 at load 1.0; loads 0, 0.5, 0.9 measured
    # reach 1.07 at 0.9: shift the GPU so that it crosses at 0.6 (speedup 1.0 there by the model)
    runs = []
    for run in report_data.runs:
        load = float(run.factors["gpu_load"])
        if run.factors["backend"] == "gpu" and "latency_median_ms" in run.metrics:
            factor = (3.0 / (1.0 + 2.0 * load)) / (2.0 - load / 0.6)  # speedup becomes 2 - load / 0.6
            run = dataclasses.replace(
                run, metrics={**run.metrics, "latency_median_ms": run.metrics["latency_median_ms"] * factor}
            )
        runs.append(run)
    data = dataclasses.replace(report_data, runs=tuple(runs))
    spec = dataclasses.replace(SPEEDUP, crossover="gpu_load")
    found = crossover_marks(data, spec)
    mine = [c for c in found if c.device == DEVICE]
    assert len(mine) == 1 and mine[0].level == "gpu" and mine[0].found.falling
    assert mine[0].found.at == pytest.approx(0.6, abs=0.05)
    bands = crossover_bands(found)
    assert {b.device for b in bands} == {r.device_id for r in data.done_runs}
    assert all(b.low is None or b.low <= b.at <= b.high for b in bands)  # type: ignore[operator]
    figure = draw(data, spec)
    assert figure is not None
    assert 'id="farm-mark-crossover-0"' in figure.svg
    assert f"backend=gpu on {DEVICE}: crosses 1 at gpu_load {mine[0].found.at:.3g}" in figure.caption
    assert figure.name.endswith("_crossover_at_hidden_128")
    # the plain speedup figure has no marks
    plain = draw(data, SPEEDUP)
    assert plain is not None and "farm-mark-crossover" not in plain.svg


def test_a_best_of_figure_stars_each_lines_lowest_median(report_data: ReportData) -> None:
    spec = FigureSpec(x="gpu_load", color="device", facet="backend", best_of="gpu_load", pool=("hidden",))
    figure = draw(report_data, spec)
    assert figure is not None
    lines = {(r.device_id, r.factors["backend"]) for r in report_data.done_runs}
    assert figure.svg.count('id="farm-mark-best-') == len(lines)
    assert "star: each line's level of gpu_load with the lowest median" in figure.caption
    stats = [
        GroupStat((0.5,), 3, 4.0, 3.0, 5.0),
        GroupStat((0.0,), 3, 2.0, 1.5, 2.5),
        GroupStat((0.9,), 3, 2.0, 1.0, 3.0),
    ]
    assert best_stat(stats) == stats[1] and best_stat([]) is None  # the first of a tie


def test_figure_marks_are_checked_at_load_time() -> None:
    cases = {
        "{x: hidden, color: backend, crossover: hidden}": r"crossover: needs relative_to",
        "{x: hidden, relative_to: {backend: cpu}, crossover: backend}": r"crossover: backend must be the fig",
        "{x: backend, color: device, best_of: backend, pool: [hidden]}": None,
        "{x: hidden, color: backend, best_of: hidden}": r"best_of: the best level is per phone",
        "{x: hidden, color: device, best_of: backend, pool: [backend]}": r"best_of: backend must be the fig",
        "{x: hidden, color: device, best_of: threads, pool: [backend]}": r"best_of: threads is not a swept",
        "{x: hidden, relative_to: {backend: cpu}, best_of: hidden}": r"best_of: marks the lowest median",
    }
    for figure, error in cases.items():
        if error is None:
            load_text(SPEC.replace("FIGURE", figure), "x.yaml")
            continue
        with pytest.raises(ConfigError, match=rf"x.yaml:6: report.figures\[0\].{error}"):
            load_text(SPEC.replace("FIGURE", figure), "x.yaml")
    with pytest.raises(
        ConfigError, match=r"x.yaml:6: report.figures\[0\].crossover: backend is not a numeric"
    ):
        load_text(
            SPEC.replace("FIGURE", "{x: backend, relative_to: {hidden: 32}, crossover: backend}"), "x.yaml"
        )
