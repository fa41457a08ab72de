"""Derived metrics on synthetic data with a known answer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from farm.analysis.derived import best_of, crossover, crossovers, relative_to, share_of

RNG = np.random.default_rng(3)


def _noisy(median: float, n: int = 7) -> np.ndarray:
    """n values whose median is exactly `median`, spread +-10% around it."""
    spread = np.sort(RNG.uniform(0.0, 0.1, size=n // 2))
    values = np.concatenate([median * (1 - spread), [median], median * (1 + spread)])
    return RNG.permutation(values)


def _frame(rows: list[tuple[str, dict[str, object], str, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"run_id": f"r{i}", "device": device, **factors, "metric": metric, "value": value}
            for i, (device, factors, metric, value) in enumerate(rows)
        ]
    )


def test_a_gpu_twice_as_fast_as_the_cpu_is_a_speedup_of_two_with_a_ci_around_it() -> None:
    rows = []
    for device, scale in (("local/a", 1.0), ("local/b", 3.0)):  # phones differ; the ratio does not
        for hidden in (32, 128):
            for backend, latency in (("cpu", 20.0), ("gpu", 10.0), ("cpu-mt", 16.0)):
                rows += [
                    (device, {"backend": backend, "hidden": hidden}, "latency_median_ms", v)
                    for v in _noisy(latency * scale * hidden / 32)
                ]
    frame = _frame(rows)
    ratios = relative_to(frame, "latency_median_ms", ("backend", "cpu"), ["backend", "hidden"], speedup=True)
    gpu = [r for r in ratios if r.level == "gpu"]
    assert len(gpu) == 4 and len(ratios) == 8  # 2 phones x 2 sizes x (cpu-mt, gpu)
    for ratio in gpu:
        assert ratio.value == pytest.approx(2.0)
        assert ratio.ci.contains(2.0) and ratio.ci.low > 1.6 and ratio.ci.high < 2.5
        assert ratio.n_level == ratio.n_reference == 7
    assert {r.device for r in gpu} == {"local/a", "local/b"}
    assert {dict(r.cell)["hidden"] for r in gpu} == {32, 128}
    mt = [r for r in ratios if r.level == "cpu-mt"]
    assert all(r.value == pytest.approx(1.25) for r in mt)
    plain = relative_to(frame, "latency_median_ms", ("backend", "cpu"), ["backend", "hidden"])
    assert all(r.value == pytest.approx(0.5) for r in plain if r.level == "gpu")  # gpu / cpu


def test_a_speedup_falling_linearly_through_one_at_0_6_crosses_there() -> None:
    loads = [0.0, 0.3, 0.5, 0.7, 0.9]
    speedup = [2.0 - load / 0.6 for load in loads]
    cpu = [_noisy(10.0, 9) for _ in loads]
    gpu = [_noisy(10.0 / s, 9) for s in speedup]
    found = crossover(loads, cpu, gpu)
    assert found.at == pytest.approx(0.6)
    assert found.falling
    assert found.ci is not None and found.ci.contains(0.6) and found.ci.high - found.ci.low < 0.2
    assert found.crossing_fraction > 0.95


def test_crossovers_of_a_frame_are_per_phone_and_compared_level() -> None:
    # local/a: the GPU's speedup falls linearly through 1 at load 0.6; local/b: it never loses;
    # cpu-mt (1.5x) never crosses either; one load measured on the cpu alone is left out
    loads = [0.0, 0.3, 0.5, 0.7, 0.9]
    rows = []
    for device, gpu_speedup in (("local/a", lambda x: 2.0 - x / 0.6), ("local/b", lambda x: 4.0 - x)):
        for load in loads:
            speed = {"cpu": 1.0, "gpu": gpu_speedup(load), "cpu-mt": 1.5}
            for backend, s in speed.items():
                rows += [
                    (device, {"backend": backend, "gpu_load": load}, "latency_median_ms", v)
                    for v in _noisy(10.0 / s, 9)
                ]
        rows += [(device, {"backend": "cpu", "gpu_load": 1.0}, "latency_median_ms", 10.0)]
    frame = _frame(rows)
    found = {
        (c.device, c.level): c
        for c in crossovers(
            frame, "latency_median_ms", ("backend", "cpu"), "gpu_load", ["backend"], speedup=True
        )
    }
    assert set(found) == {(d, b) for d in ("local/a", "local/b") for b in ("cpu-mt", "gpu")}
    a = found["local/a", "gpu"]
    assert a.found.at == pytest.approx(0.6) and a.found.falling and a.levels == tuple(loads)
    assert a.found.ci is not None and a.found.ci.contains(0.6) and a.found.ci.high - a.found.ci.low < 0.2
    assert a.first_ratio == pytest.approx(2.0) and a.cell == ()
    for key in (("local/b", "gpu"), ("local/a", "cpu-mt"), ("local/b", "cpu-mt")):
        assert found[key].found.at is None and found[key].first_ratio > 1.0
    # a ratio (gpu / cpu) crosses at the same load, rising
    (ratio,) = [
        c
        for c in crossovers(frame, "latency_median_ms", ("backend", "cpu"), "gpu_load", [])
        if c.device == "local/a" and c.level == "gpu"
    ]
    assert ratio.found.at == pytest.approx(0.6, abs=0.02) and not ratio.found.falling


def test_a_ratio_that_stays_above_one_has_no_crossover() -> None:
    cpu = [_noisy(10.0) for _ in range(3)]
    gpu = [_noisy(4.0) for _ in range(3)]
    found = crossover([0.0, 0.5, 0.9], cpu, gpu)
    assert found.at is None and found.ci is None and found.crossing_fraction == 0.0
    with pytest.raises(ValueError, match="ascending"):
        crossover([0.5, 0.0], cpu[:2], gpu[:2])


def test_the_share_of_data_movement_is_the_median_of_each_runs_own_share() -> None:
    rows = []
    for i, total in enumerate(_noisy(100.0, 9)):
        run = {"layers": "784,256,128,16", "backend": "gpu"}
        rows.append(("local/a", run, "step_ms", total))
        rows.append(("local/a", run, "copy_ms", total * (0.91 + 0.01 * (i % 3 - 1))))
    frame = _frame(rows)
    frame["run_id"] = [f"r{i // 2}" for i in range(len(frame))]  # part and whole of one run share it
    (share,) = share_of(frame, "copy_ms", "step_ms", ["layers", "backend"])
    assert share.value == pytest.approx(0.91) and share.runs == 9
    assert share.ci.contains(0.91) and share.ci.low >= 0.9 and share.ci.high <= 0.92
    # parts of a whole given as their pieces: copy / (copy + compute)
    frame.loc[frame.metric == "step_ms", "value"] -= frame.loc[frame.metric == "copy_ms", "value"].to_numpy()
    frame.loc[frame.metric == "step_ms", "metric"] = "compute_ms"
    (pieces,) = share_of(frame, ["copy_ms"], ["copy_ms", "compute_ms"], ["layers", "backend"])
    assert pieces.value == pytest.approx(0.91)
    assert share_of(frame, "copy_ms", "no_such_ms", ["layers", "backend"]) == []


def test_the_best_level_is_the_lowest_median_per_phone_and_cell() -> None:
    best_g = {
        ("local/a", "conv1"): 4,
        ("local/a", "fire2"): 16,
        ("local/b", "conv1"): 8,
        ("local/b", "fire2"): 8,
    }
    rows = []
    for (device, layer), g_best in best_g.items():
        for g in (1, 2, 4, 8, 16):
            latency = 5.0 + abs(np.log2(g) - np.log2(g_best))
            rows += [(device, {"layer": layer, "g": g}, "layer_ms", v) for v in _noisy(latency, 5)]
    found = best_of(_frame(rows), "layer_ms", "g", ["layer", "g"])
    assert {(b.device, dict(b.cell)["layer"]): b.level for b in found} == best_g
    assert all(b.median == pytest.approx(5.0) and b.runner_up_median == pytest.approx(6.0) for b in found)
