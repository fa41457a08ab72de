"""Each study's report as a reader sees it, in Debian's headless chromium: every figure drawn
(a non-empty SVG box with drawn elements), no script error or console error, and the page prints
to PDF (for a paper's appendix)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from farm.experiment import load
from farm.report.model import FigureSpec
from farm.report.query import figure_specs
from farm.report.render import write_report
from tests.fixtures.browser import CHROMIUM, check_pages, print_pdf
from tests.fixtures.study_samples import STUDIES, study_data

EXPERIMENTS = Path(__file__).parents[3] / "experiments"
# The shipped experiments whose declared figures include derived ones (relative_to, share_of) or
# marks (crossover, best_of).
SHIPPED = {
    "squeezenet": "squeezenet_precision.yaml",
    "training": "gpu_training.yaml",
    "mobirnn": "lstm_gpu_load.yaml",
}


def _derived(study: str) -> tuple[FigureSpec, ...]:
    if study not in SHIPPED:
        return ()
    specs = figure_specs(load(EXPERIMENTS / SHIPPED[study]))
    return tuple(spec for spec in specs if spec.derived or spec.best_of is not None)


pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium missing: `make system-packages` installs it"
)


def test_every_figure_of_every_study_is_drawn_and_the_page_prints(tmp_path: Path) -> None:
    pages = {}
    derived = {study: _derived(study) for study in STUDIES}
    assert all(derived[study] for study in SHIPPED)
    for study in sorted(STUDIES):
        data = dataclasses.replace(study_data(study, repetitions=3), figures=derived[study])
        write_report(data, tmp_path / study, formats=("html",))
        pages[study] = tmp_path / study / "report.html"
    checked = check_pages(pages, tmp_path)
    assert set(checked) == set(STUDIES)
    for study, page in checked.items():
        assert page.errors == (), study
        expected = pages[study].read_text(encoding="utf-8").count("<figure")
        assert expected >= 2 and len(page.figures) == expected, study  # the study's and the declared
        for figure in page.figures:
            assert figure.width > 100 and figure.height > 50, (study, figure)
            assert figure.drawn > 20, (study, figure)
        # the shipped derived figures (a speedup, a ratio, a share: per phone with CI bars) are drawn
        ids = {figure.id for figure in page.figures}
        assert {f"fig-{spec.name}" for spec in derived[study]} <= ids, (study, ids)
        # the marks are drawn: where the speedup crosses 1 and its CI band; the best g starred
        for spec in derived[study]:
            (figure,) = [f for f in page.figures if f.id == f"fig-{spec.name}"]
            if spec.crossover is not None:
                drawn = {mark.split("-ci-")[0].rstrip("-0123456789") for mark in figure.marks}
                assert {"farm-mark-crossover"} <= drawn and any("-ci-" in m for m in figure.marks), figure
            if spec.best_of is not None:  # one star per phone and precision
                assert sum(m.startswith("farm-mark-best-") for m in figure.marks) == 2 * 2, figure
    pdf = tmp_path / "mobirnn.pdf"
    printed = print_pdf(pages["mobirnn"], pdf, tmp_path)
    assert printed.returncode == 0, printed.stderr[-2000:]
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 20_000


def test_the_probe_sees_a_broken_figure_and_a_script_error(tmp_path: Path) -> None:
    # the check itself can fail: an empty SVG box and a throwing script are caught
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><head></head><body><figure id='f'><svg width='0' height='0'></svg></figure>"
        "<script>null.boom();</script></body></html>",
        encoding="utf-8",
    )
    checked = check_pages({"broken": page}, tmp_path)["broken"]
    assert checked.figures[0].width == 0 and checked.figures[0].drawn == 0
    assert len(checked.errors) == 1 and checked.errors[0].startswith("error: ")
