"""Per-layer results: parsing cnn's `layer` events, the per-phone table, best g per layer."""

from __future__ import annotations

import pytest

from farm.analysis.layers import RunLayers, best_g_per_layer, layer_table, parse_layers, tuned_total_ms
from farm.store.layers import LayerResult


def event(index: int, name: str, time_ns: float, **extra: object) -> dict[str, object]:
    return {"event": "layer", "index": index, "name": name, "kind": "conv", "time_ns": time_ns, **extra}


def test_parse_keeps_layer_events_in_index_order_with_their_fields() -> None:
    events = [
        {"event": "info", "program": "cnn"},
        event(1, "pool1", 2_000_000, kind="maxpool", min_ns=1_500_000, flops=10.0, bytes=20.0),
        event(0, "conv1", 5_000_000, g=4, conv_path="direct", gemm_m=96, gemm_n=12321, gemm_k=147),
        {"event": "layer", "index": 2, "name": "broken"},  # no time: left out
        {"event": "layer", "index": True, "name": "bool index", "time_ns": 1},  # not an int
        {"event": "layer", "index": 3, "name": "nan", "time_ns": float("nan")},
        {"event": "result", "latency_median_ms": 7.0},
    ]
    conv, pool = parse_layers(events)
    assert (conv.index, conv.name, conv.time_ms, conv.g, conv.gemm_mnk) == (
        0,
        "conv1",
        5.0,
        4,
        (96, 12321, 147),
    )
    assert (pool.kind, pool.min_ms, pool.flops, pool.bytes_moved, pool.gemm_mnk) == (
        "maxpool",
        1.5,
        10.0,
        20.0,
        None,
    )
    # A program that reports a layer twice: its last word counts.
    (again,) = parse_layers([event(0, "conv1", 1e6), event(0, "conv1", 3e6)])
    assert again.time_ms == 3.0


def run(
    run_id: str, device: str, factors: dict[str, object], times: dict[str, float], g: int | None = None
) -> RunLayers:
    layers = tuple(LayerResult(i, name, "conv", t, g=g) for i, (name, t) in enumerate(times.items()))
    return RunLayers(run_id, device, factors, layers)


def test_table_is_the_median_per_phone_cell_and_layer_with_shares() -> None:
    runs = [
        run("a", "lab/p1", {"backend": "gpu"}, {"conv1": 3.0, "conv10": 1.0}),
        run("b", "lab/p1", {"backend": "gpu"}, {"conv1": 5.0, "conv10": 3.0}),
        run("c", "lab/p1", {"backend": "gpu"}, {"conv1": 4.0, "conv10": 100.0}),
        run("d", "lab/p2", {"backend": "gpu"}, {"conv1": 8.0, "conv10": 2.0}),
    ]
    rows = layer_table(runs, ["backend"])
    assert [(r.device_id, r.name, r.time_ms, r.runs) for r in rows] == [
        ("lab/p1", "conv1", 4.0, 3),
        ("lab/p1", "conv10", 3.0, 3),
        ("lab/p2", "conv1", 8.0, 1),
        ("lab/p2", "conv10", 2.0, 1),
    ]
    assert rows[0].share == pytest.approx(4 / 7) and rows[3].share == pytest.approx(0.2)
    assert rows[0].cell == (("backend", "gpu"),)


def test_best_g_is_per_phone_setting_and_layer() -> None:
    runs = []
    # p1: conv1 fastest at g=4, fire2 at g=1; p2 (another phone): conv1 fastest at g=8.
    for g, conv1, fire2 in ((1, 10.0, 2.0), (4, 4.0, 3.0), (8, 6.0, 2.5)):
        for rep in range(2):
            runs.append(
                run(
                    f"p1-{g}-{rep}",
                    "lab/p1",
                    {"g": g, "precision": "fp32"},
                    {"conv1": conv1 + rep, "fire2": fire2},
                    g,
                )
            )
    for g, conv1 in ((1, 9.0), (8, 3.0)):
        runs.append(run(f"p2-{g}", "lab/p2", {"g": g, "precision": "fp32"}, {"conv1": conv1}, g))
    runs.append(
        run("p2-only", "lab/p2", {"g": 1, "precision": "fp16"}, {"conv1": 1.0}, 1)
    )  # one g: no choice
    best = best_g_per_layer(runs, ["precision", "g"])
    got = [(b.device_id, b.setting, b.name, b.best_g, b.best_ms, b.tried) for b in best]
    assert got == [
        ("lab/p1", (("precision", "fp32"),), "conv1", 4, 4.5, (1, 4, 8)),
        ("lab/p1", (("precision", "fp32"),), "fire2", 1, 2.0, (1, 4, 8)),
        ("lab/p2", (("precision", "fp32"),), "conv1", 8, 3.0, (1, 8)),
    ]
    assert best[0].speedup_vs_g1 == pytest.approx(10.5 / 4.5) and best[0].worst_ms == 10.5
    totals = tuned_total_ms(best)
    assert totals[("lab/p1", (("precision", "fp32"),))] == pytest.approx(6.5)
