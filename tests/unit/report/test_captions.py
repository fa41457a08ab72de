"""A figure's caption says which cells it keeps and what each point pools, from its runs."""

from __future__ import annotations

from farm.report.figures import figure_runs, render_figure
from farm.report.model import FigureSpec, ReportData
from farm.report.render import render_html, render_markdown


def test_a_figure_that_names_everything_pools_nothing(report_data: ReportData) -> None:
    spec = FigureSpec(x="hidden", color="backend", facet="device", where=(("gpu_load", (0,)),), title="t")
    figure = render_figure(report_data, spec)
    assert figure is not None
    assert (
        figure.caption == "t: median over runs, error bars = bootstrap 95% CI of the median; only gpu_load=0."
    )
    # only the kept cells are drawn: 2 phones x 2 backends x 2 sizes x 3 repetitions at load 0
    drawn = figure_runs(report_data, spec)
    assert {run.factor("gpu_load") for run in drawn} == {0.0}
    assert len(drawn) == 24


def test_a_figure_that_leaves_a_factor_and_the_phones_out_says_it_pools_them(report_data: ReportData) -> None:
    figure = render_figure(report_data, FigureSpec(x="hidden", color="backend", title="t"))
    assert figure is not None
    assert figure.caption.endswith("; each point pools gpu_load (3 levels: 0.0, 0.5, 0.9) and 2 phones.")


def test_captions_reach_the_html_and_markdown(report_data: ReportData) -> None:
    figure = render_figure(
        report_data, FigureSpec(x="hidden", color="backend", pool=("gpu_load",), title="t")
    )
    assert figure is not None
    assert f"<figcaption>{figure.caption}</figcaption>" in render_html(report_data, [figure])
    assert "each point pools gpu_load" in render_markdown(report_data, [figure])
