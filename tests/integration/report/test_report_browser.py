"""Each study's report as a reader sees it, in Debian's headless chromium: every figure drawn
(a non-empty SVG box with drawn elements), no script error or console error, and the page prints
to PDF (for a paper's appendix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.report.render import write_report
from tests.fixtures.browser import CHROMIUM, check_pages, print_pdf
from tests.fixtures.study_samples import STUDIES, study_data

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium missing: `make system-packages` installs it"
)


def test_every_figure_of_every_study_is_drawn_and_the_page_prints(tmp_path: Path) -> None:
    pages = {}
    for study in sorted(STUDIES):
        write_report(study_data(study, repetitions=3), tmp_path / study, formats=("html",))
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
