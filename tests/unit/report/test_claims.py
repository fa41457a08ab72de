"""Each study's claims judged per phone on synthetic studies with known effects (the samples of
tests/fixtures/study_samples.py), and how the report shows them."""

from __future__ import annotations

import re
from dataclasses import replace

from farm.analysis.verdict import Verdict
from farm.experiment.sections import Study
from farm.report.claims import CPU_DEVICE_FP16, CPU_DEVICE_MOVES, claim_checks
from farm.report.frame import tidy_frame
from farm.report.render import render_html, render_markdown
from farm.report.studies import study_section
from tests.fixtures.study_samples import PHONES, study_data


def _verdicts(study: Study, sample: str, **options: object) -> list[set[Verdict]]:
    data = study_data(sample, **options)  # type: ignore[arg-type]
    return [
        {p.judgement.verdict for p in check.phones} for check in claim_checks(study, data, tidy_frame(data))
    ]


def test_mobirnn_lead_and_loss_reproduced_cpu_mt_share_not() -> None:
    # sample: gpu 3x cpu at load 0, 0.3x at 0.9; cpu-mt 1.5x (half the gpu's gain, below 70%)
    assert _verdicts(Study.MOBIRNN, "mobirnn") == [
        {Verdict.REPRODUCED},
        {Verdict.REPRODUCED},
        {Verdict.NOT_REPRODUCED},
    ]


def test_mobirnn_with_one_run_per_cell_is_undecided_and_shows_no_interval() -> None:
    data = study_data("mobirnn", repetitions=1)
    section = study_section(data)
    assert section is not None
    first = section.claims[0]
    assert "undecided on 2 of 2 phones" in first.verdict
    assert all("none (1 run)" in row for row in first.table.rows)
    # no table of the section shows a single run as an interval "[x, x]"
    for table in (*section.tables, *(c.table for c in section.claims)):
        for row in table.rows:
            for cell in row:
                match = re.fullmatch(r"\[(\S+), (\S+)\]", cell)
                assert not (match and match.group(1) == match.group(2)), (table.title, row)
    assert not any(re.search(r"\[(\S+), \1\]", s) for s in section.sentences)


def test_squeezenet_fp16_cannot_be_tested_on_a_pocl_gpu_but_is_on_a_real_one() -> None:
    virtual = _verdicts(Study.SQUEEZENET, "squeezenet", repetitions=6)
    assert virtual[1] == {Verdict.UNTESTABLE}
    real = _verdicts(Study.SQUEEZENET, "squeezenet", repetitions=6, virtual=False)
    # parallel, fp16 (2x), best g differs by layer, energy 0.2 J < 0.6 J
    assert real == [{Verdict.REPRODUCED}] * 4
    data = study_data("squeezenet", repetitions=6)
    fp16 = claim_checks(Study.SQUEEZENET, data, tidy_frame(data))[1]
    assert {p.judgement.reason for p in fp16.phones} == {CPU_DEVICE_FP16}


def test_training_movement_cannot_be_tested_on_pocl_and_is_reproduced_on_a_real_gpu() -> None:
    assert _verdicts(Study.TRAINING, "training") == [{Verdict.REPRODUCED}, {Verdict.UNTESTABLE}]
    assert _verdicts(Study.TRAINING, "training", virtual=False) == [{Verdict.REPRODUCED}] * 2
    data = study_data("training")
    movement = claim_checks(Study.TRAINING, data, tidy_frame(data))[1]
    assert {p.judgement.reason for p in movement.phones} == {CPU_DEVICE_MOVES}
    # one verdict per phone and model size
    assert len(movement.phones) == 2 * len(PHONES)


def test_gemm_time_is_predicted_from_seven_held_out_shapes_not_from_two() -> None:
    assert _verdicts(Study.GEMM, "gemm7") == [{Verdict.REPRODUCED}]
    assert _verdicts(Study.GEMM, "gemm") == [{Verdict.UNTESTABLE}]


def test_the_report_states_each_claim_with_its_verdict() -> None:
    data = study_data("mobirnn")
    html, md = render_html(data), render_markdown(data)
    for text in (html, md):
        assert "Claim 1: At low background GPU load" in text
        assert "Verdict:" in text and "reproduced on 2 of 2 phones" in text
        assert "not reproduced on 2 of 2 phones" in text


def test_a_phone_with_too_few_valid_loads_says_why_instead_of_going_missing() -> None:
    data = study_data("mobirnn")
    # vp-2's GPU runs are valid at load 0 only (the others, say, never reached their load)
    kept = tuple(
        r
        for r in data.runs
        if not (r.device_id == PHONES[1] and r.factors["backend"] == "gpu" and r.factors["gpu_load"] != 0)
    )
    section = study_section(replace(data, runs=kept))
    assert section is not None
    assert len(section.sentences) == 2
    assert section.sentences[1].startswith(f"On {PHONES[1]}, the GPU's speedup over cpu cannot be followed")
