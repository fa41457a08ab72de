"""Metrics from a capped event stream (the first N iterations, a uniform sample of the rest and the
program's `iter_summary`, kernels/README.md "Output") against the same metrics from every
iteration's event: exact for counts, window, throughput, mean, std and split sums; within the
histogram's stated relative error for quantiles; within sampling error for the sustained drift."""

from __future__ import annotations

import math

import numpy as np
import pytest

from farm.analysis.iteration_summary import parse_iteration_summary
from farm.analysis.iterations import measured_iterations
from farm.analysis.metrics import compute_run_metrics, metrics_by_name
from farm.analysis.sustained import sustained_metrics

BINS_PER_OCTAVE = 64
RELATIVE_ERROR = 2 ** (1 / (2 * BINS_PER_OCTAVE)) - 1


def _latencies_ns(count: int, seed: int = 7) -> np.ndarray:
    """Lognormal wall times around 60 us that slow down by 30% over the run (a phone heating up),
    with a tail of 1% slow iterations."""
    rng = np.random.default_rng(seed)
    drift = np.linspace(1.0, 1.3, count)
    wall = 60_000 * drift * rng.lognormal(0.0, 0.08, count)
    slow = rng.random(count) < 0.01
    wall[slow] *= rng.uniform(3, 20, int(slow.sum()))
    return np.maximum(1, wall.astype(np.int64))


def _events(wall_ns: np.ndarray, head: int, seed: int = 3) -> list[dict[str, object]]:
    """What a farm program prints for these iterations with --iteration-events=head (0: all)."""
    gaps = np.full(wall_ns.size, 1_000, dtype=np.int64)
    start = 10**12 + np.concatenate([[0], np.cumsum(wall_ns + gaps)[:-1]])
    records = [
        {
            "i": i,
            "t_start_ns": int(s),
            "t_end_ns": int(s + w),
            "h2d_ns": int(w // 10),
            "kernel_ns": int(w // 2),
            "d2h_ns": int(w // 20),
        }
        for i, (s, w) in enumerate(zip(start, wall_ns, strict=True))
    ]
    events: list[dict[str, object]] = [{"event": "info"}, {"event": "phase", "phase": "warmup", "t_ns": 1}]
    events.append({"event": "phase", "phase": "measure", "t_ns": int(start[0])})
    shown = len(records) if head == 0 else min(head, len(records))
    events += [{"event": "iter", **r} for r in records[:shown]]
    rest = np.arange(shown, len(records))
    picked = np.sort(np.random.default_rng(seed).choice(rest, size=min(head, rest.size), replace=False))
    events += [{"event": "iter_sample", **records[int(i)]} for i in picked]
    bins = np.floor(BINS_PER_OCTAVE * np.log2(wall_ns)).astype(np.int64)
    index, count = np.unique(bins, return_counts=True)
    wall_ms = wall_ns / 1e6
    events.append(
        {
            "event": "iter_summary",
            "iterations": len(records),
            "iter_events": shown,
            "samples": int(picked.size),
            "t_start_ns": records[0]["t_start_ns"],
            "t_end_ns": records[-1]["t_end_ns"],
            "mean_ms": float(np.mean(wall_ms)),
            "std_ms": float(np.std(wall_ms, ddof=1)),
            "min_ns": int(wall_ns.min()),
            "max_ns": int(wall_ns.max()),
            "h2d_ns_sum": sum(int(r["h2d_ns"]) for r in records),
            "kernel_ns_sum": sum(int(r["kernel_ns"]) for r in records),
            "d2h_ns_sum": sum(int(r["d2h_ns"]) for r in records),
            "hist_bins_per_octave": BINS_PER_OCTAVE,
            "hist": [[int(k), int(c)] for k, c in zip(index, count, strict=True)],
        }
    )
    events.append({"event": "result", "iterations": len(records)})
    return events


@pytest.fixture(scope="module")
def both() -> tuple[dict, dict, list[dict[str, object]], list[dict[str, object]]]:
    wall = _latencies_ns(20_001)  # odd: the median is one order statistic
    every, capped = _events(wall, head=0), _events(wall, head=1000)
    exact = metrics_by_name(compute_run_metrics(every, None, None, None, None))
    from_summary = metrics_by_name(compute_run_metrics(capped, None, None, None, None))
    return exact, from_summary, every, capped


def test_counts_window_throughput_mean_std_and_split_sums_are_exact(both) -> None:
    exact, capped, _, events = both
    assert sum(e["event"] in ("iter", "iter_sample") for e in events) == 2000  # far fewer than 20001
    exact_names = (
        "iterations_measured",
        "throughput_per_s",
        "measured_s",
        "latency_mean_ms",
        "latency_std_ms",
    )
    exact_names += (
        "opencl_h2d_total_ms",
        "opencl_kernel_total_ms",
        "opencl_d2h_total_ms",
        "data_movement_share",
    )
    for name in exact_names:
        assert capped[name].value == pytest.approx(exact[name].value, rel=1e-9), name
    assert capped["iterations_measured"].value == 20_001


def test_quantiles_within_the_histograms_stated_error(both) -> None:
    exact, capped, _, _ = both
    for name in ("latency_median_ms", "latency_p5_ms", "latency_p10_ms", "latency_p90_ms", "latency_p95_ms",
                 "latency_p99_ms"):  # fmt: skip
        assert capped[name].value == pytest.approx(exact[name].value, rel=RELATIVE_ERROR), name
    # The MAD is a difference of values: its error is bounded by the values' error.
    bound = RELATIVE_ERROR * (2 * exact["latency_median_ms"].value + exact["latency_mad_ms"].value)
    assert abs(capped["latency_mad_ms"].value - exact["latency_mad_ms"].value) <= bound
    # Order-statistic interval against the bootstrap one: the same ranks up to resampling noise.
    width = exact["latency_median_ci_high_ms"].value - exact["latency_median_ci_low_ms"].value
    for end in ("low", "high"):
        name = f"latency_median_ci_{end}_ms"
        allowed = RELATIVE_ERROR * exact[name].value + 0.25 * width
        assert abs(capped[name].value - exact[name].value) <= allowed, name


def test_sustained_drift_from_the_weighted_sample(both) -> None:
    _, _, every, capped = both
    exact = {m.name: m.value for m in sustained_metrics(measured_iterations(every))}
    sampled = {m.name: m.value for m in sustained_metrics(measured_iterations(capped))}
    # The first 1000 iterations are 5% of the run: from them alone the steady median would be the
    # initial one and the 30% drift would vanish; the sample carries the rest of the run.
    assert exact["steady_initial_ratio"] > 1.2
    for name in ("latency_initial_ms", "latency_steady_ms", "steady_initial_ratio"):
        assert sampled[name] == pytest.approx(exact[name], rel=0.02), name


def test_a_summary_that_covers_only_printed_iterations_changes_nothing() -> None:
    events = _events(_latencies_ns(500), head=1000)
    iterations = measured_iterations(events)
    assert iterations.summary is None and iterations.weight is None and len(iterations) == 500


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hist": [[10, 5]]}, "holds 5 of"),
        ({"hist": "x"}, "integer pairs"),
        ({"iterations": -1}, "non-negative integer iterations"),
        ({"mean_ms": None}, "finite number mean_ms"),
    ],
)
def test_a_malformed_summary_names_the_event_and_field(change: dict, message: str) -> None:
    events = _events(_latencies_ns(3000), head=1000)
    summary = next(e for e in events if e["event"] == "iter_summary")
    summary.update(change)
    with pytest.raises(ValueError, match=message) as raised:
        measured_iterations(events)
    assert str(raised.value).startswith(f"event {events.index(summary) + 1}: ")


def test_histogram_percentiles_match_numpy_on_bin_midpoints() -> None:
    """Independent of binning error: values that sit on bin midpoints give numpy's own answer."""
    rng = np.random.default_rng(1)
    index = rng.integers(900, 1100, 4001)
    values_ns = 2.0 ** ((index + 0.5) / BINS_PER_OCTAVE)
    k, c = np.unique(index, return_counts=True)
    summary = parse_iteration_summary(
        {
            "iterations": 4001,
            "iter_events": 10,
            "samples": 10,
            "t_start_ns": 0,
            "t_end_ns": 1,
            "mean_ms": 1.0,
            "std_ms": 0.0,
            "min_ns": 1,
            "max_ns": 2,
            "hist_bins_per_octave": BINS_PER_OCTAVE,
            "hist": [[int(a), int(b)] for a, b in zip(k, c, strict=True)],
        }
    )
    for q in (0.0, 5.0, 50.0, 77.7, 99.0, 100.0):
        assert summary.histogram.percentile_ms(q) == pytest.approx(
            np.percentile(values_ns / 1e6, q), rel=1e-12
        )
    median_ms = float(np.median(values_ns / 1e6))
    assert summary.histogram.mad_ms(median_ms) == pytest.approx(
        float(np.median(np.abs(values_ns / 1e6 - median_ms))), rel=1e-12
    )
    assert math.isclose(summary.histogram.relative_error, RELATIVE_ERROR)
