"""The sustained figure in the report: drawn from each run's series (one column per phone), the
throttle time and the latency before and after it in the caption, listed in the Markdown, and
absent for an experiment without sustained runs."""

from __future__ import annotations

import dataclasses

import numpy as np

from farm.analysis.iterations import Iterations
from farm.analysis.series import Series, SeriesTrace
from farm.analysis.sustained import sustained_series
from farm.experiment import load_text
from farm.report.model import PhoneInfo, ReportData
from farm.report.render import all_figures, render_html, render_markdown
from farm.report.sustained_figure import SPEC, sustained_figure
from farm.store.results import StoredResult
from farm.store.runs import RunState

PHONES = ("local/hot", "local/cool")


def _series(throttle_s: float | None):  # type: ignore[no-untyped-def]
    starts = np.arange(0, 10_000, 10, dtype=np.int64) * 1_000_000  # every 10 ms for 10 s
    at_s = float("inf") if throttle_s is None else throttle_s
    slow = starts >= at_s * 1e9
    took = np.where(slow, 9_000_000, 6_000_000)
    ticks = np.arange(0, 201, dtype=np.int64) * 50_000_000
    capped = ticks >= at_s * 1e9
    trace = SeriesTrace(
        {
            "cpu.freq.policy0": Series.of(ticks, np.where(capped, 900_000, 1_800_000)),
            "thermal.battery": Series.of(ticks, 300 + ticks / 1e9 * 10),  # 0.1 °C
        }
    )
    return sustained_series(
        Iterations(starts, starts + took, None, None, None), trace, time_to_throttle_s=throttle_s
    )


def _data() -> ReportData:
    spec = load_text("name: hot\nbenchmark: {program: lstm}\nmeasurement: {sustained_s: 10}\n")
    runs, series = [], {}
    for index, (device, throttle) in enumerate(zip(PHONES, (4.0, None), strict=True)):
        run_id = f"r{index}"
        metrics = {"latency_median_ms": 7.0, "steady_initial_ratio": 1.5 if throttle else 1.0}
        runs.append(StoredResult(run_id, "c", {}, 0, device, RunState.DONE, metrics=metrics, units={}))
        series[run_id] = _series(throttle)
    return ReportData(
        experiment="hot",
        benchmark="lstm",
        spec=spec,
        factor_names=(),
        phones=tuple(PhoneInfo(p) for p in PHONES),
        runs=tuple(runs),
        sustained=series,
    )


def test_the_sustained_figure_is_drawn_per_phone_and_says_when_each_throttled() -> None:
    data = _data()
    figure = sustained_figure(data)
    assert figure is not None and figure.pdf.startswith(b"%PDF")
    assert all(phone in figure.svg for phone in PHONES)
    assert "clock [MHz]" in figure.svg and "temperature [°C]" in figure.svg
    assert "on local/hot throttled after 4 s, median latency 6 ms before and 9 ms after" in figure.caption
    assert "on local/cool no throttling was seen" in figure.caption
    assert [f.name for f in all_figures(data)].count(SPEC.name) == 1
    assert f'<figure id="fig-{SPEC.name}">' in render_html(data)
    assert f"figures/{SPEC.name}.svg" in render_markdown(data)


def test_no_sustained_figure_without_series() -> None:
    assert sustained_figure(dataclasses.replace(_data(), sustained={})) is None
