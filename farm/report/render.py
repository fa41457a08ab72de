"""Render a ReportData to a single-file HTML page (inline SVG, no network) and a Markdown summary,
and write both with the figures as separate SVG and PDF files.

render_html / render_markdown are pure (ReportData in, text out); write_report is the I/O edge.
Untrusted strings (device names, factor levels, reasons) are escaped (farm.safe_text): control
characters in every rendered string, jinja2 autoescape for HTML, `md` (safe_text.markdown) for
Markdown, and matplotlib's SVG writer for text inside figures (labels pass safe_text there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from farm.experiment.model import Experiment
from farm.report import tables
from farm.report.derived_figures import render_figures
from farm.report.export import tidy_csv
from farm.report.figures import RenderedFigure, undrawn_notes
from farm.report.layers import LayerSection, layer_figures, layer_section
from farm.report.model import ReportData
from farm.report.numbers import number
from farm.report.studies import StudySection, study_section
from farm.report.sustained_figure import sustained_figure
from farm.report.views import RenderedTable, render_tables
from farm.safe_text import markdown, printable
from farm.store.runs import RunState

TEMPLATES_DIR = Path(__file__).parent / "templates"
FORMATS: tuple[str, ...] = ("html", "md", "csv")


def _printable(value: Any) -> Any:
    """jinja2 `finalize`: every rendered string loses its control characters (SVG markup is ours)."""
    return printable(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def _spec_text(spec: Experiment | None) -> str:
    """The experiment as YAML, with every default filled in (what the runs were measured with)."""
    if spec is None:
        return "# the stored spec could not be read by this farm (see Data quality)\n"
    document = spec.model_dump(mode="json")
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


def _environment(autoescape: bool) -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=autoescape,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_printable,
    )
    env.filters["num"] = number
    env.filters["md"] = markdown
    return env


@dataclass(frozen=True)
class _Context:
    data: ReportData
    figures: Sequence[RenderedFigure]
    counts: dict[RunState, int]
    failures: list[tables.Failure]
    cells: list[tables.Cell]
    pooled: list[tables.Cell]  # over all phones; empty when only one phone ran
    metrics: list[str]
    notes: list[str]
    spec_text: str
    layers: LayerSection | None  # per-layer results (farm.report.layers), None without any
    tables: list[RenderedTable]  # declared in the experiment's report section
    study: StudySection | None  # the seed paper's argument, when the experiment reproduces one


def all_figures(data: ReportData) -> list[RenderedFigure]:
    """The report's figures: the experiment's own, the sustained runs' curves, the per-layer ones."""
    sustained = sustained_figure(data)
    return render_figures(data) + ([sustained] if sustained else []) + layer_figures(data)


def _context(data: ReportData, figures: Sequence[RenderedFigure] | None) -> dict[str, Any]:
    context = _Context(
        data=data,
        figures=all_figures(data) if figures is None else figures,
        counts=tables.state_counts(data),
        failures=tables.failures(data),
        cells=tables.cells(data),
        pooled=tables.cells(data, by_device=False) if len({r.device_id for r in data.runs}) > 1 else [],
        metrics=tables.table_metrics(data),
        notes=tables.quality_notes(data) + undrawn_notes(data),
        spec_text=_spec_text(data.spec),
        layers=layer_section(data),
        tables=render_tables(data),
        study=study_section(data),
    )
    return {name: getattr(context, name) for name in context.__dataclass_fields__}


def render_html(data: ReportData, figures: Sequence[RenderedFigure] | None = None) -> str:
    context = _context(data, figures)
    # The SVG comes from matplotlib, which escapes the text it draws; mark it safe to inline.
    shown = [*context["figures"], *(context["study"].figures if context["study"] else ())]
    context["inline_svgs"] = {figure.name: Markup(figure.inline_svg) for figure in shown}
    return _environment(autoescape=True).get_template("report.html.j2").render(context)


def render_markdown(
    data: ReportData, figures: Sequence[RenderedFigure] | None = None, figure_dir: str = "figures"
) -> str:
    context = _context(data, figures)
    context["figure_dir"] = figure_dir
    return _environment(autoescape=False).get_template("report.md.j2").render(context)


def write_report(
    data: ReportData,
    out_dir: Path,
    formats: Sequence[str] = FORMATS,
    figures: Sequence[RenderedFigure] | None = None,
) -> list[Path]:
    """Write report.html / report.md / results.csv (tidy) and figures/<name>.svg|.pdf under out_dir;
    returns the paths.
    `figures` defaults to all_figures(data)."""
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"unknown report format(s) {', '.join(unknown)}; choose from {', '.join(FORMATS)}")
    figures = all_figures(data) if figures is None else figures
    study = study_section(data)
    figure_dir = out_dir / "figures"
    figure_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for figure in [*figures, *(study.figures if study else ())]:
        svg_path = figure_dir / f"{figure.name}.svg"
        pdf_path = figure_dir / f"{figure.name}.pdf"
        svg_path.write_text(figure.svg, encoding="utf-8")
        pdf_path.write_bytes(figure.pdf)
        written += [svg_path, pdf_path]
    if "html" in formats:
        html_path = out_dir / "report.html"
        html_path.write_text(render_html(data, figures), encoding="utf-8")
        written.append(html_path)
    if "md" in formats:
        md_path = out_dir / "report.md"
        md_path.write_text(render_markdown(data, figures, "figures"), encoding="utf-8")
        written.append(md_path)
    if "csv" in formats:
        csv_path = out_dir / "results.csv"
        csv_path.write_text(tidy_csv(data), encoding="utf-8")
        written.append(csv_path)
    return written
