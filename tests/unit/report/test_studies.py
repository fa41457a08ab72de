"""Study sections on synthetic studies with known effects: the sentences state them, and every
number in a sentence is one of the section's tables."""

from __future__ import annotations

import pytest

from farm.report.render import render_html, render_markdown
from farm.report.studies import StudySection, study_section
from tests.fixtures.study_samples import STUDIES, numbers_not_in_tables, study_data


def _section(study: str) -> StudySection:
    section = study_section(study_data(study))
    assert section is not None
    return section


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_every_number_in_a_sentence_is_in_the_sections_tables(study: str) -> None:
    section = _section(study)
    assert section.sentences and section.tables and section.figures
    assert numbers_not_in_tables(section) == {}
    for figure in section.figures:
        assert "<path" in figure.svg and figure.caption


def test_mobirnn_finds_the_load_where_the_gpu_loses_its_lead() -> None:
    section = _section("mobirnn")
    # the sample's GPU speedup is 3 - 2 x load / 0.6: it crosses 1 at load 0.6 on both phones
    crossings = [s for s in section.sentences if "loses its lead at load" in s]
    assert len(crossings) == 2
    for sentence in crossings:
        at = float(sentence.split("loses its lead at load ")[1].split()[0])
        assert at == pytest.approx(0.6, abs=0.02)
        assert "times as fast as cpu at background GPU load 0 " in sentence


def test_squeezenet_names_the_best_g_per_phone_and_fp16s_gain() -> None:
    section = _section("squeezenet")
    best = [s for s in section.sentences if "its fastest g is" in s]
    assert {s.split()[1].rstrip(",") + ":" + s.split("its fastest g is ")[1].split()[0] for s in best} == {
        "local/vp-1:2",
        "local/vp-2:4",
    }
    gains = [float(s.split("makes the GPU ")[1].split()[0]) for s in section.sentences if "fp16 makes" in s]
    assert len(gains) == 2 and all(g == pytest.approx(2.0, rel=0.1) for g in gains)
    layers = next(t for t in section.tables if t.title.startswith("Best g per layer"))
    assert {row[3] for row in layers.rows if row[0] == "local/vp-2"} == {"1", "4"}  # per layer, not one g


def test_training_says_91_percent_moves_data_with_copy_buffers() -> None:
    section = _section("training")
    shares = [float(s.split("moving data takes ")[1].split()[0]) for s in section.sentences]
    assert len(shares) == 4 and all(x == pytest.approx(91, abs=1) for x in shares)
    # the sample's phones are virtual: each share says what it measured there
    assert all("a transfer is a memcpy in host RAM" in s for s in section.sentences)
    real = study_section(study_data("training", virtual=False))
    assert real is not None and not any("memcpy" in s for s in real.sentences)


def test_the_section_opens_the_html_and_markdown_report() -> None:
    data = study_data("gemm")
    html = render_html(data)
    assert html.index('<section id="study">') < html.index("<h2>Data quality</h2>")
    assert "Study: Augur" in render_markdown(data)


def test_an_experiment_without_a_study_has_no_section(report_data: object) -> None:
    assert study_section(report_data) is None  # type: ignore[arg-type]
