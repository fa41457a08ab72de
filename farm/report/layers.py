"""The report's per-layer part, for programs that report layers (cnn): a table of time per layer
per phone and cell, a stacked bar of it per phone, the best g per layer and phone (Motamedi et
al.'s device-specific tuning) and, when an experiment measured both SqueezeNet versions, the
per-kernel-type model fitted on v1.0 against v1.1's measured layers with +-10 % bands (Augur's
predicted-vs-measured figure; farm.analysis.kernel_model); with a kernel predictor file (`farm
report --model`), one such figure per network measured (farm.analysis.prediction_check). Pure:
ReportData in, values and figures out; render.py places them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib import colormaps, rc_context, ticker
from matplotlib.figure import Figure

from farm.analysis import resource_data
from farm.analysis.cnn_descriptor import network
from farm.analysis.kernel_model import fit_layer_model
from farm.analysis.layers import BestG, LayerRow, RunLayers, best_g_per_layer, layer_table, tuned_total_ms
from farm.analysis.network_model import NetworkPrediction, predict_network_by_kernel
from farm.analysis.prediction_check import NetworkCheck, networks_of
from farm.analysis.resource_model import WITHIN_FRACTION
from farm.errors import ConfigError
from farm.experiment.sections import FigureKind
from farm.report.figures import _RC, RenderedFigure, _label, rendered
from farm.report.model import FigureSpec, ReportData, Where
from farm.store.results import DEVICE

# The transfer the report checks: fitted on the first network, predicting the second.
FIT_ON, PREDICT = "squeezenet1.0", "squeezenet1.1"


@dataclass(frozen=True)
class Transfer:
    """The per-kernel-type model of one phone, backend and precision, fitted on FIT_ON's layers,
    against PREDICT's measured layers."""

    label: str  # phone backend precision
    prediction: NetworkPrediction


@dataclass(frozen=True)
class LayerSection:
    rows: tuple[LayerRow, ...]
    best: tuple[BestG, ...]
    tuned_ms: tuple[tuple[str, str, float], ...]  # phone, setting, conv time at each layer's best g
    transfers: tuple[Transfer, ...]

    def cell_label(self, row: LayerRow) -> str:
        return " ".join(f"{name}={value}" for name, value in row.cell) or "all"


def run_layers(data: ReportData) -> list[RunLayers]:
    """The DONE runs (valid ones unless the report includes invalid runs) that stored layers."""
    return [
        RunLayers(run.run_id, run.device_id, run.factors, data.layers[run.run_id])
        for run in data.done_runs
        if run.device_id and data.layers.get(run.run_id) and data.counts(run, "latency_median_ms")
    ]


def _transfers(data: ReportData) -> tuple[Transfer, ...]:
    params = data.spec.benchmark.params if data.spec is not None else {}
    runs = [run for run in data.done_runs if data.counts(run, "latency_median_ms")]
    train = resource_data.layer_samples(runs, params, (FIT_ON,), data.layers)
    measured = resource_data.measured_layers(runs, params, PREDICT, data.layers)
    transfers = []
    for key in sorted(set(train) & set(measured)):
        try:
            model = fit_layer_model(train[key])
            prediction = predict_network_by_kernel(model, network(PREDICT), key.precision, measured[key])
        except ConfigError:
            continue  # a kernel type v1.1 has and the fitted runs lacked (a layers-limited run)
        transfers.append(Transfer(key.label(), prediction))
    return tuple(transfers)


def layer_section(data: ReportData) -> LayerSection | None:
    """None when no run stored layers (the program reports none, or nothing finished)."""
    runs = run_layers(data)
    if not runs:
        return None
    factor_names = [name for name in data.factor_names if name != DEVICE]
    best = best_g_per_layer(runs, factor_names)
    tuned = tuned_total_ms(best)
    return LayerSection(
        rows=tuple(layer_table(runs, factor_names)),
        best=tuple(best),
        tuned_ms=tuple(
            (device, " ".join(f"{n}={v}" for n, v in setting) or "all", ms)
            for (device, setting), ms in sorted(tuned.items())
        ),
        transfers=_transfers(data),
    )


def stacked_figure(section: LayerSection) -> RenderedFigure:
    """Time per layer stacked into each cell's bar, one panel per phone; layers keep one colour."""
    phones = sorted({row.device_id for row in section.rows})
    names = list(dict.fromkeys(row.name for row in sorted(section.rows, key=lambda r: r.index)))
    title = "Time per layer (median over runs), stacked"
    spec = FigureSpec(x="cell", y="layer_time_ms", facet=DEVICE, kind=FigureKind.BAR, title=title)
    with rc_context(_RC):  # type: ignore[arg-type]  # keys are valid rcParams
        figure = Figure(figsize=(min(4.0 * len(phones) + 2.5, 18.0), 4.5), layout="constrained")
        axes = figure.subplots(1, len(phones), squeeze=False, sharey=True)[0]
        palette = colormaps["tab20"]
        for ax, phone in zip(axes, phones, strict=True):
            rows = [row for row in section.rows if row.device_id == phone]
            cells = list(dict.fromkeys(row.cell for row in rows))
            bottoms = [0.0] * len(cells)
            for position, name in enumerate(names):
                heights = [
                    next((r.time_ms for r in rows if r.cell == cell and r.name == name), 0.0)
                    for cell in cells
                ]
                color = palette(position % 20)
                ax.bar(range(len(cells)), heights, bottom=bottoms, color=color, label=_label(name), width=0.7)
                bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
            labels = [" ".join(v for _, v in cell) or "all" for cell in cells]
            ax.set_xticks(range(len(cells)), [_label(x) for x in labels], rotation=30, ha="right")
            ax.set_title(_label(phone))
            ax.grid(True, axis="y", alpha=0.3)
        axes[0].set_ylabel("time per inference [ms]")
        axes[-1].legend(
            fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=2 if len(names) > 16 else 1
        )
        figure.suptitle(_label(title))
        caption = f"{title}: one bar per cell and phone, each layer's median time over the cell's runs."
        return rendered(spec, title, caption, figure)


# A panel of a predicted-vs-measured figure: its label and (measured ms, predicted ms, kind) per layer.
Panel = tuple[str, Sequence[tuple[float, float, str]]]


def prediction_figure(predictions: Sequence[tuple[str, NetworkPrediction]]) -> RenderedFigure | None:
    """Predicted against measured time per layer, log-log, with the y = x line and the +-10 %
    band: one panel per (phone backend precision). None without measured layers."""
    panels: list[Panel] = [
        (label, [(x.measured_ms, x.predicted_ms, str(x.kind)) for x in p.layers if x.measured_ms])
        for label, p in predictions
    ]
    panels = [(label, pairs) for label, pairs in panels if pairs]
    if not panels:
        return None
    title = (
        f"{predictions[0][1].network}: predicted vs measured time per layer (band: +-{WITHIN_FRACTION:.0%})"
    )
    return band_figure(
        title, panels, f"{title}: one point per layer, measured against predicted; the band is +-10 %."
    )


def check_figures(checks: Sequence[NetworkCheck], source: str) -> list[RenderedFigure]:
    """One predicted-vs-measured figure per network the kernel predictor file was held against,
    a panel per phone, backend and precision (its accuracy in nn-Meter's terms in the title)."""
    figures = []
    for name in networks_of(checks):
        mine = [c for c in checks if c.network == name]
        panels: list[Panel] = [
            (
                f"{c.key.label()} @ {c.clock_mhz or 0:.0f} MHz: RMSPE {c.accuracy.rmspe_pct:.0f}%, "
                f"total {c.accuracy.total_error_pct:+.0f}%",
                [(x.measured_ms, x.predicted_ms, x.kind) for x in c.layers],
            )
            for c in mine
        ]
        title = (
            f"{name} at {mine[0].input_size} px: kernel predictor vs measured time per layer "
            f"(band: +-{WITHIN_FRACTION:.0%})"
        )
        caption = (
            f"{title}: one point per layer, measured against predicted by {source or 'the kernel predictor'} "
            "(fitted on sampled kernels, not on this network) at the clock the runs ran at; "
            "the band is +-10 %."
        )
        figures.append(band_figure(title, panels, caption, where=(("model", (name,)),)))
    return figures


def band_figure(title: str, panels: Sequence[Panel], caption: str, where: Where = ()) -> RenderedFigure:
    """Log-log predicted against measured, the y = x line and the +-10 % band, a panel each;
    `where` (the network drawn) makes the figure's file name its own."""
    spec = FigureSpec(
        x="measured_ms", y="predicted_ms", facet=DEVICE, kind=FigureKind.LINE, title=title, where=where
    )
    with rc_context(_RC):  # type: ignore[arg-type]  # keys are valid rcParams
        figure = Figure(figsize=(min(4.0 * len(panels) + 1.0, 16.0), 4.0), layout="constrained")
        axes = figure.subplots(1, len(panels), squeeze=False)[0]
        for ax, (label, pairs) in zip(axes, panels, strict=True):
            low = min(min(m, p) for m, p, _ in pairs) * 0.7
            high = max(max(m, p) for m, p, _ in pairs) * 1.4
            line = [low, high]
            ax.plot(line, line, color="black", linewidth=0.8)
            ax.fill_between(
                line,
                [v * (1 - WITHIN_FRACTION) for v in line],
                [v * (1 + WITHIN_FRACTION) for v in line],
                color="C2",
                alpha=0.2,
                label=f"+-{WITHIN_FRACTION:.0%}",
                gid="farm-band-10pct",
            )
            for kind in dict.fromkeys(kind for _, _, kind in pairs):
                chosen = [(m, p) for m, p, k in pairs if k == kind]
                ax.scatter([m for m, _ in chosen], [p for _, p in chosen], s=14, label=kind)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(low, high)
            ax.set_ylim(low, high)
            for axis in (ax.xaxis, ax.yaxis):  # plain numbers: mathtext is off in farm's figures
                axis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
                axis.set_minor_formatter(ticker.NullFormatter())
            within = sum(abs(p / m - 1) <= WITHIN_FRACTION for m, p, _ in pairs) / len(pairs)
            ax.text(0.97, 0.03, f"{within:.0%} of layers within the band", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=7)  # fmt: skip
            ax.set_title(_label(label), fontsize=8)
            ax.set_xlabel("measured [ms]")
            ax.grid(True, alpha=0.3, which="both")
            ax.legend(fontsize=7)
        axes[0].set_ylabel("predicted [ms]")
        figure.suptitle(_label(title))
        return rendered(spec, title, caption, figure)


def layer_figures(data: ReportData, section: LayerSection | None = None) -> list[RenderedFigure]:
    section = layer_section(data) if section is None else section
    if section is None:
        return []
    figures = [stacked_figure(section)]
    transfer = prediction_figure([(t.label, t.prediction) for t in section.transfers])
    if transfer is not None:
        figures.append(transfer)
    return figures + check_figures(data.predictions, data.predictor_source)
