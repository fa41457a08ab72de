import re
from pathlib import Path

import pytest
from report_sample import DECLARED, EVIL, build_report_data

from farm.experiment.sections import FigureKind
from farm.report.derived_figures import render_figures
from farm.report.figures import RenderedFigure, figures_for, render_figure
from farm.report.model import FigureSpec, ReportData
from farm.report.render import render_html, render_markdown, write_report


@pytest.fixture(scope="module")
def rendered() -> list[RenderedFigure]:
    """The figures of the conftest's report_data, drawn once for the module (matplotlib is slow)."""
    return render_figures(build_report_data(declared=DECLARED))


def test_declared_and_default_figures(report_data: ReportData) -> None:
    names = [spec.name for spec in figures_for(report_data)]
    assert names[0] == "latency_ms_vs_hidden_by_backend_per_gpu_load"
    # lstm defaults: latency and energy vs gpu_load per backend and hidden size
    assert "latency_median_ms_vs_gpu_load_by_backend_per_hidden" in names
    assert "energy_per_inference_mj_vs_gpu_load_by_backend_per_hidden" in names
    # a figure without data is left out
    missing = FigureSpec(x="hidden", y="no_such_metric")
    assert render_figure(report_data, missing) is None


def test_figure_svg_has_units_and_escaped_text(report_data: ReportData) -> None:
    figure = render_figure(
        report_data, FigureSpec(x="device", y="latency_ms", color="backend", kind=FigureKind.BAR)
    )
    assert figure is not None
    assert "latency (median) [ms], lower is better" in figure.svg
    assert EVIL not in figure.svg
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in figure.svg
    assert figure.pdf.startswith(b"%PDF")
    line = render_figure(report_data, FigureSpec(x="gpu_load", y="energy_per_inference_mj", color="backend"))
    assert line is not None
    assert "background GPU load [fraction busy]" in line.svg
    assert "energy per inference (above idle) [mJ], lower is better" in line.svg


def test_html_report_is_self_contained_and_escaped(
    report_data: ReportData, rendered: list[RenderedFigure]
) -> None:
    html = render_html(report_data, rendered)
    assert EVIL not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html.lower()
    # every figure inline as SVG, and nothing fetched from the network
    assert html.count("<svg") == len(figures_for(report_data))
    assert not re.search(r"(src|href)=\"https?://", html)
    # plan vs done, failure reason, quality notes
    assert "benchmark exited 3: no OpenCL on &lt;script&gt;" in html
    assert "throttled" in html
    assert "fell short of their background GPU load target" in html
    assert "this machine" in html  # virtual phone timings
    assert "Charging could not be disabled" in html


def test_markdown_escapes_and_links_figures(report_data: ReportData, rendered: list[RenderedFigure]) -> None:
    markdown = render_markdown(report_data, rendered)
    assert EVIL not in markdown
    assert "&lt;script&gt;" in markdown
    for spec in figures_for(report_data):
        assert f"](figures/{spec.name}.svg)" in markdown
    # one table row per cell and phone (2 phones x 2 backends x 2 hidden x 3 loads), then per cell
    rows = [line for line in markdown.splitlines() if line.startswith(("| cpu", "| gpu"))]
    assert len(rows) == 24 + 12
    pooled = {tuple(c.strip() for c in row.split("|")[1:4]): row.split("|") for row in rows[24:]}
    assert pooled["gpu", "128", "0.9"][4].strip() == "6"  # 3 repetitions on each of 2 phones
    assert pooled["gpu", "32", "0.0"][5].strip() == "1"  # the failed run


def test_write_report_files(report_data: ReportData, rendered: list[RenderedFigure], tmp_path: Path) -> None:
    written = write_report(report_data, tmp_path, ("html", "md"), rendered)
    names = {path.name for path in written}
    assert {"report.html", "report.md"} <= names
    svgs = sorted((tmp_path / "figures").glob("*.svg"))
    pdfs = sorted((tmp_path / "figures").glob("*.pdf"))
    assert len(svgs) == len(pdfs) == len(figures_for(report_data))
    html = (tmp_path / "report.html").read_text()
    for svg in svgs:
        assert f'id="fig-{svg.stem}"' in html
    only_md = write_report(report_data, tmp_path / "md", ("md",), rendered)
    assert not (tmp_path / "md" / "report.html").exists()
    assert any(path.name == "report.md" for path in only_md)


def test_few_gauge_readings_are_noted(report_data: ReportData) -> None:
    from dataclasses import replace

    from farm.report.tables import quality_notes

    runs = list(report_data.runs)
    runs[0] = replace(runs[0], metrics={**runs[0].metrics, "power_readings": 1.0})
    notes = quality_notes(replace(report_data, runs=tuple(runs)))
    assert any("fewer than 3 fuel-gauge readings" in note and runs[0].run_id in note for note in notes)
    assert not any("fuel-gauge" in note for note in quality_notes(report_data))
    runs[0] = replace(runs[0], metrics={"power_readings": 0.0, "latency_median_ms": 1.0})
    notes = quality_notes(replace(report_data, runs=tuple(runs)))
    assert any("ended before the fuel gauge updated" in note and runs[0].run_id in note for note in notes)
    assert not any("fewer than 3" in note for note in notes)


def test_energy_default_falls_back_to_gross_without_baseline(report_data: ReportData) -> None:
    from dataclasses import replace

    runs = tuple(
        replace(
            run,
            metrics={
                **{k: v for k, v in run.metrics.items() if k != "energy_per_inference_mj"},
                "energy_per_inference_gross_mj": 3.0,
            },
        )
        for run in report_data.runs
    )
    names = [spec.name for spec in figures_for(replace(report_data, runs=runs, figures=()))]
    assert "energy_per_inference_gross_mj_vs_gpu_load_by_backend_per_hidden" in names
    assert not any(name.startswith("energy_per_inference_mj") for name in names)


def test_box_and_bar_figures_order_numeric_levels(report_data: ReportData) -> None:
    box = render_figure(
        report_data, FigureSpec(x="hidden", y="latency_ms", color="backend", kind=FigureKind.BOX)
    )
    assert box is not None and "latency (median) [ms]" in box.svg
    bar = render_figure(report_data, FigureSpec(x="hidden", y="latency_ms", kind=FigureKind.BAR))
    assert bar is not None
    # tick labels in numeric order: 32 before 128
    assert bar.svg.index(">32<") < bar.svg.index(">128<")


def test_spec_shown_as_yaml_and_tidy_columns_never_clash(report_data: ReportData) -> None:
    from dataclasses import replace

    from farm.report.export import tidy_csv

    markdown = render_markdown(report_data, [])
    # the stored spec as YAML, re-validated: every default filled in, in the model's order
    shown = markdown.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert shown.startswith("name: lstm_gpu_load\n")
    assert "benchmark:\n  program: lstm\n" in shown and "sweep:\n  backend:\n  - cpu\n  - gpu\n" in shown
    assert "measurement:\n  warmup:" in shown
    clashing = replace(report_data, factor_names=("backend", "value"), runs=report_data.runs[:1])
    clashing = replace(clashing, runs=(replace(clashing.runs[0], factors={"backend": "cpu", "value": 7}),))
    header, first = tidy_csv(clashing).splitlines()[:2]
    assert header.split(",") == [
        "experiment",
        "run_id",
        "cell_id",
        "repetition",
        "device",
        "state",
        "valid",
        "backend",
        "factor_value",
        "metric",
        "value",
        "unit",
    ]
    assert ",cpu,7," in first
