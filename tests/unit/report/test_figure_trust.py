"""Figures a reader trusts, on the shipped MobiRNN quick variant with known effects: no figure
repeated (the file's, the automatic ones, the study's), a one-point line drawn as bars, axes
labelled from the metric catalogue, legends that name their factors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from farm.analysis.catalogue import axis_label, describe
from farm.experiment import load
from farm.experiment.sections import FigureKind
from farm.report.derived_figures import render_figures
from farm.report.figures import drawn_key
from farm.report.query import figure_specs, table_specs
from farm.report.studies import study_section
from tests.fixtures.study_samples import data_for, mobirnn_metrics, study_data

REPO = Path(__file__).resolve().parents[3]


def _quick() -> object:
    spec = load(REPO / "experiments" / "lstm_gpu_load.yaml", "quick")
    data = data_for(spec, mobirnn_metrics, repetitions=4)
    return replace(data, figures=figure_specs(spec), tables=table_specs(spec))


def test_no_figure_is_drawn_twice() -> None:
    data = _quick()
    figures = render_figures(data)  # type: ignore[arg-type]
    keys = [drawn_key(data, f.spec) for f in figures]  # type: ignore[arg-type]
    assert len(keys) == len(set(keys)), [f.title for f in figures]
    # no automatic figure shows a declared one's metric along the same x (or with x and colour
    # swapped), whatever its facet: the quick variant's hidden has one level, so a facet of it is none
    declared = [f.spec for f in figures if f.spec in data.figures]  # type: ignore[attr-defined]
    for auto in (f.spec for f in figures if f.spec not in data.figures):  # type: ignore[attr-defined]
        for spec in declared:
            if spec.y == auto.y and spec.relative_to is None and auto.relative_to is None:
                assert auto.x != spec.x and {auto.x, auto.color} != {spec.x, spec.color}, (auto, spec)
    section = study_section(data)  # type: ignore[arg-type]
    assert section is not None
    # the file declares the speedup-vs-load figure: the study section does not draw it again
    assert not section.figures


def test_a_line_figure_with_one_x_value_is_drawn_as_bars() -> None:
    data = _quick()
    hidden = next(f for f in render_figures(data) if f.spec.x == "hidden")  # type: ignore[arg-type]
    # quick has hidden 128 only: bars, not a line of single points
    assert "LSTM latency vs hidden units" in hidden.title
    assert hidden.spec.kind is FigureKind.BAR


def test_axis_labels_come_from_the_metric_catalogue() -> None:
    assert axis_label("latency_median_ms", "ms") == "latency (median) [ms], lower is better"
    assert describe("layer_03_fire2_squeeze1x1_ms").label() == "layer fire2_squeeze1x1 time [ms]"
    assert describe("foo_bar_mw").label() == "foo bar [mW]"
    figure = next(f for f in render_figures(_quick()) if f.spec.y == "latency_median_ms")  # type: ignore[arg-type]
    assert "latency (median) [ms], lower is better" in figure.svg
    assert "latency_median_ms [ms]" not in figure.svg


def test_a_ratio_legend_names_its_factors() -> None:
    section = study_section(study_data("mobirnn"))  # no declared figures: the study draws its own
    assert section is not None and section.figures
    svg = section.figures[0].svg
    assert "(128, 2)" not in svg
    assert "backend=gpu (hidden=128, layers=2)" in svg


def test_every_html_table_scrolls_in_its_own_box() -> None:
    import re

    from farm.report.render import render_html

    html = render_html(study_data("mobirnn"))
    tables = html.count("<table>")
    assert tables > 3
    # a table wider than the page scrolls inside its box instead of widening the page
    assert len(re.findall(r'<div class="tablebox"><table>', html)) == tables
    assert ".tablebox { max-width: 100%; overflow-x: auto; }" in html
