"""Data-quality notes on the background load: one format, the tables' numbers (gpu_load_mean),
and an overshoot called an overshoot, not "not reached"."""

from __future__ import annotations

from dataclasses import replace

from farm.report.tables import quality_notes
from tests.fixtures.study_samples import study_data


def test_a_load_above_its_target_is_an_overshoot_and_one_below_falls_short() -> None:
    data = study_data("mobirnn", repetitions=1)
    runs = list(data.runs)
    off = {"gpu_load_target": 0.5, "gpu_load_reached": 0.0}
    runs[0] = replace(runs[0], metrics={**runs[0].metrics, **off, "gpu_load_mean": 0.9712})
    runs[1] = replace(runs[1], metrics={**runs[1].metrics, **off, "gpu_load_mean": 0.3461})
    notes = quality_notes(replace(data, runs=tuple(runs)))
    over = [n for n in notes if "overshot" in n]
    short = [n for n in notes if "fell short" in n]
    assert over == [
        f"1 run(s) overshot their background GPU load target by more than 5 pp (the GPU was busier than "
        f"asked): {runs[0].run_id} ({runs[0].device_id}): target 0.5, achieved 0.971."
    ]
    assert len(short) == 1 and "achieved 0.346" in short[0]
    assert not any("not reached" in n or "did not reach" in n for n in notes)


def test_negative_energy_and_power_are_never_shown_as_results() -> None:
    from farm.report.render import render_markdown

    data = study_data("squeezenet", repetitions=2)
    runs = list(data.runs)
    # one gpu run drew less than idle (net energy below zero), one cpu run measured while charging
    gpu = next(i for i, r in enumerate(runs) if r.factors["backend"] == "gpu")
    cpu = next(i for i, r in enumerate(runs) if r.factors["backend"] == "cpu")
    runs[gpu] = replace(runs[gpu], metrics={**runs[gpu].metrics, "energy_per_inference_mj": -116.0})
    runs[cpu] = replace(runs[cpu], metrics={**runs[cpu].metrics, "power_mean_mw": -1384.0})
    text = render_markdown(replace(data, runs=tuple(runs)))
    assert "-116" not in text and "-1384" not in text
    # and with invalid runs included, still not
    text = render_markdown(replace(data, runs=tuple(runs), include_invalid=True))
    assert "-116" not in text and "-1384" not in text
