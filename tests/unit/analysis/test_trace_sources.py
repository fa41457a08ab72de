"""compute_run_metrics on traces shaped like the sampler's (formats, zone names) and ground truth."""

from dataclasses import dataclass

import numpy as np
import pytest

from farm.analysis.groundtruth import TRUTH_CALIBRATION, truth_trace
from farm.analysis.metrics import compute_run_metrics, metrics_by_name
from farm.analysis.series import Series

S = 1_000_000_000


@dataclass(frozen=True)
class _Source:
    name: str
    format: str


@dataclass(frozen=True)
class _Header:
    sources: tuple[_Source, ...]


class _SamplerLikeTrace:
    """Just enough of farm.telemetry.trace.Trace: header.sources, source_names, series()."""

    def __init__(self, series: dict[str, tuple[Series, str]]) -> None:
        self._series = {name: s for name, (s, _) in series.items()}
        self.header = _Header(tuple(_Source(name, fmt) for name, (_, fmt) in series.items()))

    @property
    def source_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.header.sources)

    def series(self, source: str) -> Series | None:
        return self._series.get(source)


def _events() -> list[dict]:
    return [
        {"event": "iter", "i": i, "t_start_ns": i * S // 10, "t_end_ns": (i + 1) * S // 10} for i in range(20)
    ]


def test_pct_busy_below_two_percent_is_still_percent_and_gpu_zone_found() -> None:
    t = np.arange(0, 3 * S, S // 20)
    trace = _SamplerLikeTrace(
        {
            "gpu.busy": (
                Series.of(t, np.full(t.size, 1.0)),
                "pct",
            ),  # 1 %: a fraction heuristic would say 100 %
            "thermal.gpuss-0-usr": (Series.of(t, 40_000 + t / S * 1000), "int"),
        }
    )
    metrics = metrics_by_name(compute_run_metrics(_events(), trace, None, None, 0.0))
    assert metrics["gpu_load_mean"].value == pytest.approx(0.01)
    assert metrics["gpu_load_reached"].value == 1.0
    assert metrics["temperature_start_c"].value == pytest.approx(40.0)
    assert metrics["temperature_end_c"].value == pytest.approx(42.0, abs=0.06)


def test_kgsl_fraction_taken_as_is() -> None:
    t = np.arange(0, 3 * S, S // 20)
    trace = _SamplerLikeTrace({"gpu.busy": (Series.of(t, np.full(t.size, 0.7)), "kgsl")})
    metrics = metrics_by_name(compute_run_metrics(_events(), trace, None, None, 0.5))
    assert metrics["gpu_load_mean"].value == pytest.approx(0.7)
    assert metrics["gpu_load_error_pp"].value == pytest.approx(20.0)
    assert metrics["gpu_load_reached"].value == 0.0


@dataclass(frozen=True)
class _TruthRow:
    t_ns: int
    power_mw: float
    gpu_busy: float
    temp_c: float


def test_ground_truth_rows_give_the_known_energy() -> None:
    # 10 Hz ticks; 3000 mW during [0, 2 s], each row describes the tick that ends at its time
    rows = [_TruthRow(k * S // 10, 3000.0 if k <= 20 else 1000.0, 0.5, 35.0) for k in range(1, 40)]
    metrics = metrics_by_name(
        compute_run_metrics(_events(), truth_trace(rows), TRUTH_CALIBRATION, 1000.0, 0.5)
    )
    assert metrics["energy_total_mj"].value == pytest.approx(6000.0)
    assert metrics["energy_per_inference_mj"].value == pytest.approx(4000.0 / 20)
    assert metrics["gpu_load_mean"].value == pytest.approx(0.5)
    assert metrics["temperature_max_c"].value == pytest.approx(35.0)


def test_snapshot_gauge_energy_within_3_percent_of_truth() -> None:
    """Physics like the virtual phone's: 10 Hz truth ticks, a 1 s fuel gauge that snapshots the
    current (positive µA discharging), a 20 Hz sampler. The run starts mid gauge interval, where
    holding the last idle reading into the window would be off by ~ (0.6 s x 1.5 W) / 8 s."""
    from farm.analysis.power import BatteryCalibration
    from farm.analysis.series import SeriesTrace

    rng = np.random.default_rng(3)
    run_start, run_end = int(10.4 * S), int(18.4 * S)
    ticks = np.arange(0, 25 * S, S // 10)
    busy = (ticks >= run_start) & (ticks < run_end)
    truth_mw = np.where(busy, 2500.0, 1000.0) * (1 + 0.02 * rng.standard_normal(ticks.size))
    voltage_uv = 4_000_000.0
    gauge_ua = np.empty(ticks.size)
    for k, t in enumerate(ticks):  # snapshot at whole seconds, held in between
        gauge_ua[k] = truth_mw[k] / voltage_uv * 1e9 if k == 0 or t % S == 0 else gauge_ua[k - 1]
    sample_t = np.arange(0, 25 * S, S // 20)
    tick_index = np.searchsorted(ticks, sample_t, side="right") - 1
    trace = SeriesTrace(
        {
            "battery.current_now": Series.of(sample_t, gauge_ua[tick_index]),
            "battery.voltage_now": Series.of(sample_t, np.full(sample_t.size, voltage_uv)),
        }
    )
    events = [
        {
            "event": "iter",
            "i": i,
            "t_start_ns": run_start + i * S // 10,
            "t_end_ns": run_start + (i + 1) * S // 10,
        }
        for i in range(80)
    ]
    farm = metrics_by_name(
        compute_run_metrics(events, trace, BatteryCalibration(discharge_sign=1), None, None)
    )
    truth_mj = float(np.sum(truth_mw[busy]) * 0.1)
    assert farm["energy_total_mj"].value == pytest.approx(truth_mj, rel=0.03)
    assert farm["power_readings"].value == 8


def test_run_shorter_than_gauge_and_busy_periods() -> None:
    """A 1 ms run between two readings: no power (the held reading predates the run), and GPU load
    from the first busy reading after the run (its window covers the run)."""
    from farm.analysis.power import BatteryCalibration
    from farm.analysis.series import SeriesTrace

    run = [{"event": "iter", "i": 0, "t_start_ns": 5 * S, "t_end_ns": 5 * S + 1_000_000}]
    trace = SeriesTrace(
        {
            "battery.current_now": Series.of([0, 4 * S, 6 * S], [-1_500_000.0, -1_500_000.0, 400_000.0]),
            "battery.voltage_now": Series.of([0, 6 * S], [4e6, 4e6]),
            "gpu.busy": Series.of([4 * S, 6 * S, 7 * S], [0.1, 0.55, 0.9]),
        }
    )
    metrics = metrics_by_name(
        compute_run_metrics(run, trace, BatteryCalibration(discharge_sign=1), 900.0, 0.5)
    )
    assert metrics["power_readings"].value == 0
    assert "power_mean_mw" not in metrics and "energy_per_inference_mj" not in metrics
    assert metrics["gpu_load_mean"].value == pytest.approx(0.55)


def test_saturated_kgsl_busy_keeps_its_one_second_windows() -> None:
    # readings every 1 s (sampled at 20 Hz): idle, then 1.0 for the windows ending 2..6 s, then 0.3
    t = np.arange(0, 10 * S, S // 20)
    window_end = t // S
    busy = np.where(window_end < 2, 0.0, np.where(window_end <= 6, 1.0, 0.3))
    trace = _SamplerLikeTrace({"gpu.busy": (Series.of(t, busy), "kgsl")})
    run = [{"event": "iter", "i": 0, "t_start_ns": 4 * S, "t_end_ns": 8 * S}]
    metrics = metrics_by_name(compute_run_metrics(run, trace, None, None, None))
    # (4, 6] at 1.0, (6, 8] at 0.3
    assert metrics["gpu_load_mean"].value == pytest.approx(0.65)


def test_gpu_benchmark_adds_to_the_background_load() -> None:
    t = np.arange(0, 3 * S, S // 20)
    trace = _SamplerLikeTrace({"gpu.busy": (Series.of(t, 0.9 + 0.01 * (t // S % 2)), "kgsl")})
    cpu_run = _events()
    gpu_run = [{**e, "h2d_ns": 1, "kernel_ns": 5, "d2h_ns": 1} for e in cpu_run]
    # target 0.5: a CPU benchmark at 0.9 busy means the generator overshot; a GPU one adds its own
    assert (
        metrics_by_name(compute_run_metrics(cpu_run, trace, None, None, 0.5))["gpu_load_reached"].value == 0.0
    )
    assert (
        metrics_by_name(compute_run_metrics(gpu_run, trace, None, None, 0.5))["gpu_load_reached"].value == 1.0
    )
    # short of the target is short either way
    assert (
        metrics_by_name(compute_run_metrics(gpu_run, trace, None, None, 0.99))["gpu_load_reached"].value
        == 0.0
    )
