"""The sustained figure (pure): for an experiment with measurement.sustained_s, each run's latency,
clocks and temperature over time, one column per phone, with the time to throttle marked. A
phone's ranking at minute 1 can differ from minute 30; this is where a reader sees it.

Rows: latency (median per time bin), clocks (each CPU policy and the GPU, MHz), temperature (°C,
when the trace has one). Several runs on one phone are drawn over each other, one colour each.
"""

from __future__ import annotations

from matplotlib import rc_context
from matplotlib.figure import Figure

from farm.analysis.sustained import SustainedSeries
from farm.experiment.sections import FigureKind
from farm.report.figures import _RC, RenderedFigure, _label, rendered
from farm.report.model import FigureSpec, ReportData
from farm.report.numbers import number
from farm.store.results import DEVICE, StoredResult

TITLE = "Sustained run: latency, clocks and temperature over time"
SPEC = FigureSpec(x="time_s", y="latency_ms", facet=DEVICE, kind=FigureKind.LINE, title=TITLE)


def _run_label(data: ReportData, run: StoredResult, several: bool) -> str:
    cell = ", ".join(
        f"{name}={run.factor(name)}" for name in data.factor_names if run.factor(name) is not None
    )
    label = cell or "run"
    return f"{label} #{run.repetition}" if several else label


def _sentence(device: str, run: StoredResult, series: SustainedSeries) -> str:
    text = f"on {device}"
    if series.throttle_s is None:
        text += " no throttling was seen"
    else:
        text += f" throttled after {number(series.throttle_s)} s"
        if series.latency_before_ms is not None and series.latency_after_ms is not None:
            text += (
                f", median latency {number(series.latency_before_ms)} ms before and "
                f"{number(series.latency_after_ms)} ms after"
            )
    ratio = run.metrics.get("steady_initial_ratio")
    if ratio is not None:
        text += f", steady/initial {number(ratio)}"
    return text


def sustained_figure(data: ReportData) -> RenderedFigure | None:
    """None when no run has a series (not a sustained experiment, or no folder readable here)."""
    runs = [run for run in data.done_runs if run.run_id in data.sustained and run.device_id]
    if not runs:
        return None
    phones = sorted({run.device_id or "" for run in runs})
    with_temp = any(data.sustained[run.run_id].temperature is not None for run in runs)
    rows = 3 if with_temp else 2
    sentences = []
    with rc_context(_RC):  # type: ignore[arg-type]  # keys are valid rcParams
        figure = Figure(figsize=(min(4.5 * len(phones) + 1.0, 18.0), 2.4 * rows + 0.6), layout="constrained")
        grid = figure.subplots(rows, len(phones), squeeze=False, sharex="col")
        for column, phone in enumerate(phones):
            mine = [run for run in runs if run.device_id == phone]
            several = len(mine) > 1
            axes = grid[:, column]
            for index, run in enumerate(mine):
                series = data.sustained[run.run_id]
                color = f"C{index % 10}"
                label = _label(_run_label(data, run, several))
                axes[0].plot(series.latency.t_s, series.latency.values, color=color, label=label)
                for position, clock in enumerate(series.clocks):
                    style = ("-", "--", ":", "-.")[position % 4]
                    axes[1].plot(
                        clock.t_s, clock.values, color=color, linestyle=style, label=_label(clock.label)
                    )
                if with_temp and series.temperature is not None:
                    axes[2].plot(series.temperature.t_s, series.temperature.values, color=color)
                if series.throttle_s is not None:
                    for ax in axes:
                        ax.axvline(series.throttle_s, color="red", linestyle="--", linewidth=0.9)
                sentences.append(_sentence(phone, run, series))
            axes[0].set_title(_label(phone))
            axes[0].set_ylabel("latency [ms]")
            axes[1].set_ylabel("clock [MHz]")
            if with_temp:
                axes[2].set_ylabel("temperature [°C]")
            axes[-1].set_xlabel("time since the run started [s]")
            for ax in axes:
                ax.grid(True, alpha=0.3)
            axes[0].legend(fontsize=7)
            if axes[1].lines:
                axes[1].legend(fontsize=7)
        figure.suptitle(_label(TITLE))
        caption = (
            f"{TITLE}: per phone, the median latency of each of the run's time bins, each CPU "
            "policy's and the GPU's clock and the temperature; red dashed line: time to throttle "
            "(farm's throttle watch, which polls every few seconds); " + "; ".join(sentences) + "."
        )
        return rendered(SPEC, TITLE, caption, figure)
