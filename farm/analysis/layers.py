"""Per-layer results of programs that report layers (cnn's `layer` events, kernels/cnn/README.md):
parse a run's events into typed layer rows, aggregate them per phone and cell, and find the best
thread granularity `g` per layer and phone (Motamedi et al.'s device-specific tuning: the network's
latency is the sum over layers of each layer's fastest g). Pure: events and rows in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.analysis.iterations import event_kind
from farm.store.layers import LayerResult

__all__ = ["LayerResult", "best_g_per_layer", "layer_table", "parse_layers", "tuned_total_ms"]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if np.isfinite(number) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def parse_layers(events: Iterable[Mapping[str, Any]]) -> tuple[LayerResult, ...]:
    """The `layer` events with an index, a name and a time, in index order (a repeated index: the
    last one wins, as a program that reports twice means its last word)."""
    by_index: dict[int, LayerResult] = {}
    for event in events:
        if event_kind(event) != "layer":
            continue
        index, name, time_ns = (
            _int(event.get("index")),
            _str(event.get("name")),
            _number(event.get("time_ns")),
        )
        if index is None or name is None or time_ns is None:
            continue
        min_ns = _number(event.get("min_ns"))
        by_index[index] = LayerResult(
            index=index,
            name=name,
            kind=_str(event.get("kind")) or "layer",
            time_ms=time_ns / 1e6,
            min_ms=min_ns / 1e6 if min_ns is not None else None,
            flops=_number(event.get("flops")),
            bytes_moved=_number(event.get("bytes")),
            g=_int(event.get("g")),
            conv_path=_str(event.get("conv_path")),
            gemm_m=_int(event.get("gemm_m")),
            gemm_n=_int(event.get("gemm_n")),
            gemm_k=_int(event.get("gemm_k")),
            fused_with=_str(event.get("fused_with")),
        )
    return tuple(by_index[i] for i in sorted(by_index))


@dataclass(frozen=True)
class RunLayers:
    """The layers of one run, with what the report groups them by."""

    run_id: str
    device_id: str
    factors: Mapping[str, Any]
    layers: tuple[LayerResult, ...]


@dataclass(frozen=True)
class LayerRow:
    """One layer of one phone and cell: the median over the cell's runs of the layer's time."""

    device_id: str
    cell: tuple[tuple[str, str], ...]  # the cell's factor levels, in factor order
    index: int
    name: str
    kind: str
    time_ms: float
    runs: int
    share: float  # of the cell's summed layer time
    g: int | None


def _cell(factors: Mapping[str, Any], names: Sequence[str]) -> tuple[tuple[str, str], ...]:
    return tuple((name, str(factors[name])) for name in names if name in factors)


def layer_table(runs: Sequence[RunLayers], factor_names: Sequence[str]) -> list[LayerRow]:
    """Per phone, cell (the factors named) and layer: the median time over runs, and its share of
    the cell's total. Rows ordered by phone, cell (first seen), then layer index."""
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], dict[int, list[LayerResult]]] = {}
    for run in runs:
        key = (run.device_id, _cell(run.factors, factor_names))
        for layer in run.layers:
            groups.setdefault(key, {}).setdefault(layer.index, []).append(layer)
    rows: list[LayerRow] = []
    for (device_id, cell), by_index in groups.items():
        medians = {i: float(np.median([x.time_ms for x in layers])) for i, layers in by_index.items()}
        total = sum(medians.values())
        for index in sorted(by_index):
            first = by_index[index][0]
            rows.append(
                LayerRow(
                    device_id=device_id,
                    cell=cell,
                    index=index,
                    name=first.name,
                    kind=first.kind,
                    time_ms=medians[index],
                    runs=len(by_index[index]),
                    share=medians[index] / total if total > 0 else 0.0,
                    g=first.g,
                )
            )
    return sorted(rows, key=lambda r: (r.device_id, list(groups).index((r.device_id, r.cell)), r.index))


@dataclass(frozen=True)
class BestG:
    """The fastest granularity of one conv layer on one phone (within one setting of the other
    factors), against the slowest and g=1 where they ran."""

    device_id: str
    setting: tuple[tuple[str, str], ...]  # the other factors' levels (backend, precision...)
    name: str
    best_g: int
    best_ms: float
    worst_ms: float
    g1_ms: float | None
    tried: tuple[int, ...]

    @property
    def speedup_vs_g1(self) -> float | None:
        return self.g1_ms / self.best_ms if self.g1_ms is not None and self.best_ms > 0 else None


def best_g_per_layer(runs: Sequence[RunLayers], factor_names: Sequence[str]) -> list[BestG]:
    """Per phone, setting of the factors other than g, and conv layer: the g (the layer event's
    own, which is what ran after fallbacks) with the lowest median time over runs. Layers that ran
    at one g only have no choice to report and are left out."""
    others = [name for name in factor_names if name != "g"]
    times: dict[tuple[str, tuple[tuple[str, str], ...], int, str], dict[int, list[float]]] = {}
    for run in runs:
        setting = _cell(run.factors, others)
        for layer in run.layers:
            if layer.kind != "conv" or layer.g is None:
                continue
            key = (run.device_id, setting, layer.index, layer.name)
            times.setdefault(key, {}).setdefault(layer.g, []).append(layer.time_ms)
    best: list[BestG] = []
    for (device_id, setting, _, name), by_g in sorted(times.items(), key=lambda item: item[0][:3]):
        if len(by_g) < 2:
            continue
        medians = {g: float(np.median(values)) for g, values in by_g.items()}
        fastest = min(medians, key=lambda g: (medians[g], g))
        best.append(
            BestG(
                device_id=device_id,
                setting=setting,
                name=name,
                best_g=fastest,
                best_ms=medians[fastest],
                worst_ms=max(medians.values()),
                g1_ms=medians.get(1),
                tried=tuple(sorted(medians)),
            )
        )
    return best


def tuned_total_ms(best: Sequence[BestG]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Per phone and setting, the convolutions' time at each layer's best g (the paper's tuned
    latency, convolutions only)."""
    totals: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for row in best:
        key = (row.device_id, row.setting)
        totals[key] = totals.get(key, 0.0) + row.best_ms
    return totals
