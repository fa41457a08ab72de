import numpy as np
import pytest

from farm.analysis.iterations import measured_iterations
from farm.analysis.metrics import compute_run_metrics, metrics_by_name
from farm.analysis.power import BatteryCalibration
from farm.analysis.series import Series, SeriesTrace

S = 1_000_000_000
MS = 1_000_000


def _events(latencies_ms: list[float], start_ns: int = 10 * S, gap_ns: int = 0) -> list[dict]:
    events: list[dict] = [
        {"event": "info", "device": "pocl"},
        {"event": "phase", "phase": "warmup", "t_ns": 0},
    ]
    events.append({"event": "iter", "i": 0, "t_start_ns": 1 * S, "t_end_ns": 1 * S + 999 * MS})
    events.append({"event": "phase", "phase": "measure", "t_ns": start_ns})
    t = start_ns
    for i, latency in enumerate(latencies_ms):
        end = t + int(latency * MS)
        events.append(
            {
                "event": "iter",
                "i": i,
                "t_start_ns": t,
                "t_end_ns": end,
                "h2d_ns": 2 * MS,
                "kernel_ns": 6 * MS,
                "d2h_ns": 2 * MS,
            }
        )
        t = end + gap_ns
    events.append({"event": "result", "checksum": 1.0})
    return events


def test_warmup_iterations_are_excluded() -> None:
    iterations = measured_iterations(_events([10.0, 20.0, 30.0]))
    assert len(iterations) == 3
    assert iterations.latency_ms.tolist() == pytest.approx([10.0, 20.0, 30.0])


def test_explicit_phase_on_iter_wins_and_no_phases_means_all() -> None:
    events = [
        {"event": "iter", "phase": "warmup", "t_start_ns": 0, "t_end_ns": 5},
        {"event": "iter", "phase": "measure", "t_start_ns": 10, "t_end_ns": 30},
    ]
    assert len(measured_iterations(events)) == 1
    plain = [
        {"event": "iter", "t_start_ns": 0, "t_end_ns": 5},
        {"event": "iter", "t_start_ns": 6, "t_end_ns": 9},
    ]
    assert len(measured_iterations(plain)) == 2
    with pytest.raises(ValueError, match="event 1"):
        measured_iterations([{"event": "iter", "t_start_ns": 10, "t_end_ns": 5}])


def test_latency_and_opencl_metrics_without_trace() -> None:
    latencies = [10.0, 12.0, 11.0, 50.0, 10.5]
    metrics = metrics_by_name(compute_run_metrics(_events(latencies), None, None, None, None))
    assert metrics["latency_median_ms"].value == pytest.approx(11.0)
    assert metrics["latency_median_ms"].unit == "ms"
    assert metrics["latency_mean_ms"].value == pytest.approx(np.mean(latencies))
    assert metrics["latency_p90_ms"].value == pytest.approx(np.percentile(latencies, 90))
    assert metrics["latency_mad_ms"].value == pytest.approx(1.0)
    assert metrics["latency_median_ci_low_ms"].value <= 11.0 <= metrics["latency_median_ci_high_ms"].value
    assert metrics["throughput_per_s"].value == pytest.approx(5 / (sum(latencies) / 1000))
    assert metrics["opencl_kernel_total_ms"].value == pytest.approx(30.0)
    assert metrics["data_movement_share"].value == pytest.approx(0.4)
    assert "energy_per_inference_mj" not in metrics


def test_throughput_agrees_with_the_latency_even_with_gaps_between_iterations() -> None:
    latencies = [23.0, 23.0, 24.0, 22.0]
    metrics = metrics_by_name(compute_run_metrics(_events(latencies, gap_ns=20 * MS), None, None, None, None))
    # 1 / mean latency, not iterations / window (the window also holds the 20 ms gaps)
    assert metrics["throughput_per_s"].value == pytest.approx(1000 / np.mean(latencies))
    assert metrics["measured_s"].value == pytest.approx((sum(latencies) + 3 * 20) / 1000, rel=1e-3)


def test_no_measured_iteration_is_an_error() -> None:
    with pytest.raises(ValueError, match="no measured iteration"):
        compute_run_metrics([{"event": "phase", "phase": "warmup", "t_ns": 0}], None, None, None, None)


def _telemetry(start_ns: int, seconds: int, *, throttle: bool) -> SeriesTrace:
    """Sampled at 100 Hz; the gauge updates once a second; power 2500 mW while measuring, 1000 before."""
    t = np.arange(0, (start_ns // S + seconds + 2) * 100) * (S // 100)
    measuring = (t >= start_ns) & (t < start_ns + seconds * S)
    gauge_t = (t // S) * S  # value of the update at the last whole second
    gauge_measuring = (gauge_t >= start_ns) & (gauge_t < start_ns + seconds * S)
    current_ua = np.where(gauge_measuring, -625_000.0, -250_000.0)  # ABI sign, µA
    voltage_uv = np.full(t.size, 4_000_000.0)
    # kgsl-like: each reading is the busy share of the whole second that ended before it
    window_end = t // S
    wobble = np.where(window_end % 2 == 0, 0.01, -0.01)  # real counters never repeat exactly
    busy = (
        np.where((window_end > start_ns // S) & (window_end <= start_ns // S + seconds), 0.62, 0.05) + wobble
    )
    freq_hz = np.full(t.size, 600e6)
    if throttle:
        freq_hz[t >= start_ns + seconds * S // 2] = 400e6
    temp_mc = 30_000 + (t / S) * 100  # rising 0.1 °C per second
    rss_kb = np.where(measuring, 204_800.0, 102_400.0)
    return SeriesTrace(
        {
            "battery.current_now": Series.of(t, current_ua),
            "battery.voltage_now": Series.of(t, voltage_uv),
            "gpu.busy": Series.of(t, busy),
            "gpu.freq": Series.of(t, freq_hz),
            "thermal.battery": Series.of(t, temp_mc),
            "mem.rss": Series.of(t, rss_kb),
            "mem.hwm": Series.of(t, np.maximum.accumulate(rss_kb) + np.where(t > start_ns, 1024.0, 0.0)),
        }
    )


def test_energy_load_temperature_memory_known_answers() -> None:
    start = 10 * S
    events = _events([100.0] * 50, start_ns=start)  # 5 s of 100 ms iterations
    trace = _telemetry(start, 5, throttle=False)
    metrics = metrics_by_name(compute_run_metrics(events, trace, BatteryCalibration(), 1000.0, 0.6))
    # 625 mA x 4 V = 2500 mW for 5 s = 12500 mJ gross; idle 1000 mW -> 7500 mJ net over 50 inferences
    assert metrics["power_mean_mw"].value == pytest.approx(2500.0)
    assert metrics["energy_total_mj"].value == pytest.approx(12_500.0)
    assert metrics["energy_net_mj"].value == pytest.approx(7_500.0)
    assert metrics["energy_per_inference_mj"].value == pytest.approx(150.0)
    assert metrics["energy_per_inference_mj"].unit == "mJ"
    assert metrics["gpu_load_mean"].value == pytest.approx(0.62, abs=0.01)
    assert metrics["gpu_load_reached"].value == 1.0
    assert metrics["gpu_load_error_pp"].value == pytest.approx(2.0, abs=1.0)
    assert metrics["throttled"].value == 0.0
    assert metrics["temperature_start_c"].value == pytest.approx(31.0)
    assert metrics["temperature_end_c"].value == pytest.approx(31.5, abs=0.01)
    assert metrics["temperature_max_c"].value == pytest.approx(31.5, abs=0.01)
    assert metrics["rss_peak_mb"].value == pytest.approx(201.0)  # VmHWM saw a peak between samples
    assert metrics["rss_mean_mb"].value == pytest.approx(200.0, rel=0.01)


def test_load_not_reached_and_throttling_flagged() -> None:
    start = 10 * S
    events = _events([100.0] * 50, start_ns=start)
    metrics = metrics_by_name(
        compute_run_metrics(events, _telemetry(start, 5, throttle=True), BatteryCalibration(), None, 0.9)
    )
    assert metrics["gpu_load_reached"].value == 0.0
    assert metrics["throttled"].value == 1.0
    assert metrics["gpu_freq_drop_pct"].value == pytest.approx(100 / 3, abs=0.1)
    assert metrics["gpu_freq_max_mhz"].value == pytest.approx(600.0)
    # without an idle baseline only gross energy is reported
    assert "energy_per_inference_mj" not in metrics
    assert metrics["energy_per_inference_gross_mj"].value == pytest.approx(250.0)


def test_cpu_clocks_per_policy_over_the_measured_window() -> None:
    start = 10 * S
    events = _events([100.0] * 20, start_ns=start)  # measured: 10 s .. 12 s
    t = np.arange(0, 14 * S, 100 * MS, dtype=np.int64)
    # policy0 steady at 1.8 GHz; policy4 at 2.4 GHz, capped to 1.2 GHz from 11 s (and lower
    # still after the run, which must not count)
    little = np.full(t.size, 1_800_000.0)
    big = np.where(t < 11 * S, 2_400_000.0, np.where(t <= 12 * S, 1_200_000.0, 300_000.0))
    trace = SeriesTrace({"cpu.freq.policy0": Series(t, little), "cpu.freq.policy4": Series(t, big)})
    metrics = metrics_by_name(compute_run_metrics(events, trace, BatteryCalibration(), None, None))
    assert metrics["cpu_policy0_freq_mean_mhz"].value == pytest.approx(1800.0)
    assert metrics["cpu_policy0_freq_min_mhz"].value == pytest.approx(1800.0)
    assert metrics["cpu_policy4_freq_min_mhz"].value == pytest.approx(1200.0)
    # 10 samples at 2.4 GHz (10.0 .. 10.9 s), 11 at 1.2 GHz (11.0 .. 12.0 s)
    assert metrics["cpu_policy4_freq_mean_mhz"].value == pytest.approx((10 * 2400 + 11 * 1200) / 21)
    assert metrics["cpu_policy4_freq_mean_mhz"].unit == "MHz"


def test_benchmark_reported_metrics_and_cnn_layers() -> None:
    events = [
        {"event": "info", "device": "pocl", "build_ms": 812.5, "cache_hit": False},
        {"event": "phase", "phase": "measure", "t_ns": 0},
        {"event": "iter", "i": 0, "t_start_ns": 0, "t_end_ns": 4 * MS},
        {"event": "layer", "index": 0, "name": "conv1", "kind": "conv", "time_ns": 3 * MS},
        {"event": "layer", "index": 1, "name": "fire2/squeeze1x1", "kind": "conv", "time_ns": MS // 2},
        {"event": "result", "gflops": 12.5, "ms_per_window": float("nan"), "checksum": 3.0},
    ]
    metrics = metrics_by_name(compute_run_metrics(events, None, None, None, None))
    assert metrics["opencl_build_ms"].value == 812.5
    assert metrics["opencl_cache_hit"].value == 0.0
    assert metrics["gflops"].unit == "GFLOP/s"
    assert "latency_per_window_ms" not in metrics  # NaN is not a measurement
    assert metrics["layer_00_conv1_ms"].value == pytest.approx(3.0)
    assert metrics["layer_01_fire2_squeeze1x1_ms"].value == pytest.approx(0.5)


def test_uncalibrated_battery_gives_no_power_but_other_metrics() -> None:
    start = 10 * S
    metrics = metrics_by_name(
        compute_run_metrics(
            _events([100.0] * 50, start_ns=start), _telemetry(start, 5, throttle=False), None, None, 0.6
        )
    )
    assert "power_mean_mw" not in metrics and "power_readings" not in metrics
    assert metrics["gpu_load_mean"].value == pytest.approx(0.62, abs=0.01)
