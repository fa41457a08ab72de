"""Per-run metrics: pure functions from a run's parsed artifacts to named values with units.

The orchestrator calls `compute_run_metrics` after it has pulled a run's artifacts: the benchmark's
JSON Lines events, the sampler trace (farm.telemetry.trace; anything with `.series(name)`), the
phone's battery calibration, the idle baseline measured on this phone in this session, and the
cell's target GPU load. Metrics whose inputs are missing (no battery source, no OpenCL split) are
left out rather than reported as 0. Names carry their unit: latency_median_ms, power_mean_mw ...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from farm.analysis import stats
from farm.analysis.benchmark_metrics import benchmark_metrics
from farm.analysis.iterations import Iterations, measured_iterations
from farm.analysis.power import BatteryCalibration, battery_power, window_power_mw
from farm.analysis.series import DEFAULT_SOURCES, Series, SourceNames, TraceLike, step_mean
from farm.metric import Metric

# Achieved GPU load within this many percentage points of the target counts as reached.
GPU_LOAD_TOLERANCE_PP = 5.0
# A GPU clock that falls this far below the highest clock seen earlier under load is throttling.
THROTTLE_DROP_FRACTION = 0.10
# kgsl closes a gpubusy window once its total passes 1 s.
KGSL_WINDOW_NS = 1_000_000_000
KGSL_WINDOW_MAX_NS = 1_200_000_000
# Samples with GPU busy at least this are "under load" for throttling detection.
UNDER_LOAD_BUSY = 0.5


def latency_metrics(iterations: Iterations) -> list[Metric]:
    summary = iterations.latency_summary()
    metrics = [
        Metric("iterations_measured", float(summary.count), "count"),
        Metric("latency_median_ms", summary.median, "ms"),
        Metric("latency_mean_ms", summary.mean, "ms"),
        Metric("latency_std_ms", summary.std, "ms"),
        Metric("latency_mad_ms", summary.mad, "ms"),
        Metric("latency_median_ci_low_ms", summary.median_ci.low, "ms"),
        Metric("latency_median_ci_high_ms", summary.median_ci.high, "ms"),
    ]
    metrics += [Metric(f"latency_p{q:g}_ms", value, "ms") for q, value in summary.percentiles.items()]
    if summary.mean > 0:
        # Iterations per second of the program's own measured time (1 / mean latency), so it
        # agrees with the latency beside it; the window below also holds the gaps between them.
        metrics.append(Metric("throughput_per_s", 1000.0 / summary.mean, "1/s"))
    start_ns, end_ns = iterations.window_ns
    if end_ns > start_ns:
        # How long the run measured: validity's min-duration check reads it.
        metrics.append(Metric("measured_s", (end_ns - start_ns) / 1e9, "s"))
    return metrics


def opencl_metrics(iterations: Iterations) -> list[Metric]:
    parts = iterations.split_totals_ns()
    metrics = [
        Metric(f"opencl_{name}_total_ms", total_ns / 1e6, "ms")
        for name, total_ns in parts.items()
        if total_ns is not None
    ]
    h2d, kernel, d2h = parts["h2d"], parts["kernel"], parts["d2h"]
    if h2d is not None and kernel is not None and d2h is not None:
        moved = h2d + d2h
        total = moved + kernel
        if total > 0:
            metrics.append(Metric("data_movement_share", moved / total, "fraction"))
    return metrics


def energy_metrics(
    power_mw: Series, iterations: Iterations, idle_power_mw: float | None, *, trailing: bool
) -> list[Metric]:
    return window_energy_metrics(
        power_mw, iterations.window_ns, len(iterations), idle_power_mw, trailing=trailing
    )


def window_energy_metrics(
    power_mw: Series,
    window_ns: tuple[int, int],
    inferences: int | None,
    idle_power_mw: float | None,
    *,
    trailing: bool,
) -> list[Metric]:
    """Power and energy over a window; per inference only when the count is known (and not 0)."""
    start_ns, end_ns = window_ns
    if end_ns <= start_ns:
        return []
    duration_s = (end_ns - start_ns) / 1e9
    mean_mw, readings = window_power_mw(power_mw, start_ns, end_ns, trailing=trailing)
    if readings == 0 and not trailing:
        # A snapshot gauge that did not update while the run measured says nothing about the run:
        # its last reading is from before (maybe from before charging was switched off).
        return [Metric("power_readings", 0.0, "count")]
    gross_mj = mean_mw * duration_s
    per = inferences if inferences else None
    metrics = [
        Metric("power_mean_mw", mean_mw, "mW"),
        Metric("power_readings", float(readings), "count"),
        Metric("energy_total_mj", gross_mj, "mJ"),
    ]
    if per is not None:
        metrics.append(Metric("energy_per_inference_gross_mj", gross_mj / per, "mJ"))
    if idle_power_mw is not None:
        net_mj = gross_mj - idle_power_mw * duration_s
        metrics += [Metric("power_idle_mw", idle_power_mw, "mW"), Metric("energy_net_mj", net_mj, "mJ")]
        if per is not None:
            metrics.append(Metric("energy_per_inference_mj", net_mj / per, "mJ"))
    return metrics


def busy_fraction(busy: np.ndarray, source_format: str | None = None) -> np.ndarray:
    """GPU busy as 0..1. The sampler's `pct` sources hold percentages and `kgsl` ones fractions;
    without that knowledge, values above 1.5 can only be percentages."""
    if source_format == "pct":
        return busy / 100.0
    if source_format in ("kgsl", "float"):
        return busy
    return busy / 100.0 if busy.size and float(np.max(busy)) > 1.5 else busy


def source_format(trace: object, name: str) -> str | None:
    """The sampler's format of a source when the trace records it (farm.telemetry.trace.Trace)."""
    header = getattr(trace, "header", None)
    for source in getattr(header, "sources", ()):
        if getattr(source, "name", None) == name:
            return str(source.format)
    return None


def temperature_source(trace: object, preferred: str) -> str:
    """The preferred zone if sampled, else the first thermal zone the sampler recorded (it puts the
    GPU zone first), else the preferred name (absent: no temperature metrics)."""
    names: tuple[str, ...] = tuple(getattr(trace, "source_names", ()))
    if preferred in names or not names:
        return preferred
    return next((name for name in names if name.startswith("thermal.")), preferred)


def gpu_load_metrics(
    busy: Series,
    start_ns: int,
    end_ns: int,
    target: float | None,
    *,
    source_format: str | None = None,
    benchmark_on_gpu: bool = False,
) -> list[Metric]:
    """Achieved GPU load over the window. Busy counters report the busy share of the window that
    ends at each reading (kgsl gpubusy: ~1 s), so readings are integrated as trailing intervals:
    a run shorter than that window gets the reading that covers it."""
    period = busy.update_period_ns()
    if source_format == "kgsl" and (period is None or period > KGSL_WINDOW_MAX_NS):
        period = KGSL_WINDOW_NS  # a saturated or idle GPU repeats its value: kgsl's window is ~1 s
    readings = busy.readings(period)
    if len(readings) == 0 or end_ns <= start_ns:
        return []
    load = Series(readings.t_ns, busy_fraction(readings.values, source_format))
    achieved = step_mean(load, start_ns, end_ns, trailing=True)
    after = np.flatnonzero(load.t_ns >= end_ns)
    last = int(after[0]) if after.size else len(load) - 1
    first = int(np.searchsorted(load.t_ns, start_ns, side="right"))
    covering = load.values[min(first, last) : last + 1]
    metrics = [
        Metric("gpu_load_mean", achieved, "fraction"),
        Metric("gpu_load_std", stats.std(covering), "fraction"),
    ]
    if target is not None:
        error_pp = (achieved - target) * 100.0
        # A benchmark on the GPU adds its own busy time to the background load: then the busy
        # counter can only show that the background load was not short of its target.
        reached = (
            error_pp >= -GPU_LOAD_TOLERANCE_PP if benchmark_on_gpu else abs(error_pp) <= GPU_LOAD_TOLERANCE_PP
        )
        metrics += [
            Metric("gpu_load_target", target, "fraction"),
            Metric("gpu_load_error_pp", error_pp, "pp"),
            Metric("gpu_load_reached", float(reached), "bool"),
        ]
    return metrics


def to_mhz(freq: np.ndarray) -> np.ndarray:
    """GPU clocks arrive in Hz (kgsl devfreq), kHz (Trepn, MediaTek) or MHz (clock_mhz)."""
    top = float(np.max(freq)) if freq.size else 0.0
    if top > 1e7:
        return freq / 1e6
    if top > 1e4:
        return freq / 1e3
    return freq


def throttling_metrics(
    freq: Series, busy: Series | None, start_ns: int, end_ns: int, *, busy_format: str | None = None
) -> list[Metric]:
    window = freq.within(start_ns, end_ns)
    if len(window) == 0:
        return []
    mhz = to_mhz(window.values)
    running_max = np.maximum.accumulate(mhz)
    under_load = np.ones(mhz.size, dtype=bool)
    if busy is not None and len(busy) > 0:
        index = np.clip(np.searchsorted(busy.t_ns, window.t_ns, side="right") - 1, 0, len(busy) - 1)
        under_load = busy_fraction(busy.values, busy_format)[index] >= UNDER_LOAD_BUSY
    ratios = np.where(under_load & (running_max > 0), mhz / np.where(running_max > 0, running_max, 1), 1.0)
    drop = float(1.0 - np.min(ratios))
    return [
        Metric("gpu_freq_max_mhz", float(np.max(mhz)), "MHz"),
        Metric("gpu_freq_mean_mhz", float(np.mean(mhz)), "MHz"),
        Metric("gpu_freq_drop_pct", drop * 100.0, "%"),
        Metric("throttled", float(drop >= THROTTLE_DROP_FRACTION), "bool"),
    ]


def cpu_clock_metrics(trace: TraceLike, start_ns: int, end_ns: int, prefix: str) -> list[Metric]:
    """Mean and lowest clock of each sampled CPU policy over the run (`cpu_policy0_freq_mean_mhz`,
    ..._min_mhz): what the cores really ran at, caps and governor included."""
    metrics = []
    for name in getattr(trace, "source_names", ()):
        series = trace.series(name) if name.startswith(prefix) else None
        window = series.within(start_ns, end_ns) if series is not None else None
        if window is None or len(window) == 0:
            continue
        mhz = window.values / 1000.0  # scaling_cur_freq is in kHz
        policy = name[len(prefix) :]
        metrics += [
            Metric(f"cpu_{policy}_freq_mean_mhz", float(np.mean(mhz)), "MHz"),
            Metric(f"cpu_{policy}_freq_min_mhz", float(np.min(mhz)), "MHz"),
        ]
    return metrics


def _value_at(series: Series, t_ns: int) -> float:
    """The last sample at or before t_ns (the first one if all are later)."""
    index = int(np.searchsorted(series.t_ns, t_ns, side="right")) - 1
    return float(series.values[max(index, 0)])


def to_celsius(values: np.ndarray) -> np.ndarray:
    """Thermal zones report m°C (ABI), 0.1 °C (battery temp) or °C; phones live in 0..150 °C."""
    top = float(np.max(np.abs(values))) if values.size else 0.0
    if top > 1500:
        return values / 1000.0
    if top > 150:
        return values / 10.0
    return values


def temperature_metrics(temp: Series, start_ns: int, end_ns: int) -> list[Metric]:
    celsius = Series(temp.t_ns, to_celsius(temp.values))
    inside = celsius.within(start_ns, end_ns).values
    start_c = _value_at(celsius, start_ns)
    end_c = _value_at(celsius, end_ns)
    max_c = max([start_c, end_c, *inside.tolist()])
    return [
        Metric("temperature_start_c", start_c, "°C"),
        Metric("temperature_end_c", end_c, "°C"),
        Metric("temperature_max_c", float(max_c), "°C"),
    ]


def memory_metrics(rss_kb: Series, start_ns: int, end_ns: int, hwm_kb: Series | None = None) -> list[Metric]:
    """Mean RSS while measuring; peak RSS over the whole run (VmHWM when sampled: the kernel's own
    high-water mark also catches peaks between two samples)."""
    window = rss_kb.within(start_ns, end_ns)
    values = window.values if len(window) else rss_kb.values
    if values.size == 0:
        return []
    peak_kb = float(np.max(rss_kb.values))
    if hwm_kb is not None and len(hwm_kb) > 0:
        peak_kb = max(peak_kb, float(np.max(hwm_kb.values)))
    return [
        Metric("rss_peak_mb", peak_kb / 1024.0, "MB"),
        Metric("rss_mean_mb", float(np.mean(values)) / 1024.0, "MB"),
    ]


def compute_run_metrics(
    events: Sequence[Mapping[str, Any]],
    trace: TraceLike | None,
    calibration: BatteryCalibration | None,
    idle_power_mw: float | None,
    target_gpu_load: float | None,
    *,
    sources: SourceNames = DEFAULT_SOURCES,
) -> list[Metric]:
    """Every metric one run supports. Raises ValueError if the events hold no measured iteration."""
    iterations = measured_iterations(events)
    if len(iterations) == 0:
        raise ValueError("the benchmark reported no measured iteration")
    metrics = latency_metrics(iterations) + opencl_metrics(iterations) + benchmark_metrics(events)
    if trace is None:
        return metrics
    # Only OpenCL runs split their iterations into h2d / kernel / d2h.
    on_gpu = iterations.kernel_ns is not None
    return metrics + telemetry_metrics(
        trace,
        calibration,
        idle_power_mw,
        target_gpu_load,
        iterations.window_ns,
        len(iterations),
        benchmark_on_gpu=on_gpu,
        sources=sources,
    )


def telemetry_metrics(
    trace: TraceLike,
    calibration: BatteryCalibration | None,
    idle_power_mw: float | None,
    target_gpu_load: float | None,
    window_ns: tuple[int, int],
    inferences: int | None,
    *,
    benchmark_on_gpu: bool,
    sources: SourceNames = DEFAULT_SOURCES,
) -> list[Metric]:
    """What the sampler saw over the benchmark's window (phone clock): power and energy (per
    inference when the count is known), GPU load and clocks, temperature, memory."""
    metrics: list[Metric] = []
    start_ns, end_ns = window_ns
    # Without a calibration (the probe could not tell the current's sign) raw current and voltage
    # mean nothing: the run keeps its other metrics and gets no power rather than a wrong one.
    needs_calibration = trace.series(sources.battery_power) is None
    power = battery_power(trace, calibration, sources) if calibration or not needs_calibration else None
    if power is not None:
        trailing = calibration.gauge_trailing if calibration else False
        metrics += window_energy_metrics(power, window_ns, inferences, idle_power_mw, trailing=trailing)
    busy = trace.series(sources.gpu_busy)
    busy_format = source_format(trace, sources.gpu_busy)
    if busy is not None:
        metrics += gpu_load_metrics(
            busy,
            start_ns,
            end_ns,
            target_gpu_load,
            source_format=busy_format,
            benchmark_on_gpu=benchmark_on_gpu,
        )
    freq = trace.series(sources.gpu_freq)
    if freq is not None:
        metrics += throttling_metrics(freq, busy, start_ns, end_ns, busy_format=busy_format)
    metrics += cpu_clock_metrics(trace, start_ns, end_ns, sources.cpu_freq_prefix)
    temp = trace.series(temperature_source(trace, sources.temperature))
    if temp is not None and len(temp) > 0:
        metrics += temperature_metrics(temp, start_ns, end_ns)
    rss = trace.series(sources.rss)
    if rss is not None and len(rss) > 0:
        metrics += memory_metrics(rss, start_ns, end_ns, trace.series(sources.rss_peak))
    return metrics


def metrics_by_name(metrics: Sequence[Metric]) -> dict[str, Metric]:
    return {metric.name: metric for metric in metrics}
