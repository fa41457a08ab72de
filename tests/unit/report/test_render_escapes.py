"""Control characters and Markdown from phones and experiment files never reach a report raw."""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ElementTree
from dataclasses import replace

from report_sample import DECLARED, build_report_data

from farm.experiment.sections import FigureKind
from farm.report.export import tidy_csv
from farm.report.figures import render_figure
from farm.report.model import FigureSpec, ReportData
from farm.report.render import render_html, render_markdown
from farm.safe_text import markdown, terminal

ESC = "\x1b[31mRED\x1b]0;owned\x07"
MODEL = f"Pixel{ESC}"
LEVEL = f"gpu\n[1] fake{ESC}"


def _hostile() -> ReportData:
    data = build_report_data(declared=DECLARED)
    phones = tuple(replace(p, model=MODEL, properties=(("ro.product.model", MODEL),)) for p in data.phones)
    runs = tuple(
        replace(r, factors={**r.factors, "backend": LEVEL}) if r.factors["backend"] == "gpu" else r
        for r in data.runs
    )
    return replace(
        data,
        phones=phones,
        runs=runs,
        description=f"An ![image](http://evil.example/t.png) and {ESC}",
        spec=data.spec.model_copy(update={"description": ESC}) if data.spec is not None else None,
    )


def test_html_and_markdown_show_escapes_not_control_characters() -> None:
    data = _hostile()
    figure = render_figure(data, FigureSpec(x="hidden", y="latency_ms", color="backend", kind=FigureKind.BAR))
    assert figure is not None
    html = render_html(data, [figure])
    md = render_markdown(data, [figure])
    for text in (html, md):
        assert "\x1b" not in text and "\x07" not in text
    assert terminal(MODEL) in html and markdown(MODEL) in md
    assert "<img" not in html and "![image]" not in md
    # the Markdown table row of a gpu cell stays one row: the newline in the level is shown as \n
    assert markdown(LEVEL) in md and "\n[1] fake" not in md


def test_figures_are_valid_svg_with_the_level_escaped() -> None:
    figure = render_figure(
        _hostile(), FigureSpec(x="hidden", y="latency_ms", color="backend", kind=FigureKind.BAR)
    )
    assert figure is not None
    ElementTree.fromstring(figure.svg)  # raw control characters are not allowed in XML
    assert "\x1b" not in figure.svg


def test_tidy_csv_has_one_row_per_line_and_no_control_characters() -> None:
    data = _hostile()
    text = tidy_csv(data)
    assert "\x1b" not in text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == text.count("\n") - 1
    gpu = {row["backend"] for row in rows if row["backend"] != "cpu"}
    assert gpu == {terminal(LEVEL)}
