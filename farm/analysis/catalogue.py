"""The metric catalogue (pure): what a stored metric name means to a reader: a name in words, its
unit and which direction is better. Figures label their axes from it ("latency (median) [ms]")
and tables can too; a metric it does not list is described from its name (`foo_bar_ms` -> "foo
bar [ms]"), so a new metric is never unlabelled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Better(StrEnum):
    LOWER = "lower is better"
    HIGHER = "higher is better"
    NEITHER = ""  # a condition or a share, not a score


@dataclass(frozen=True)
class MetricInfo:
    name: str  # in words: "latency (median)"
    unit: str  # "ms"; "" for a ratio or a count
    better: Better = Better.NEITHER

    def label(self) -> str:
        """The axis label: `latency (median) [ms]`."""
        return f"{self.name} [{self.unit}]" if self.unit else self.name


CATALOGUE: dict[str, MetricInfo] = {
    "latency_median_ms": MetricInfo("latency (median)", "ms", Better.LOWER),
    "latency_mean_ms": MetricInfo("latency (mean)", "ms", Better.LOWER),
    "latency_std_ms": MetricInfo("latency (standard deviation)", "ms", Better.LOWER),
    "latency_mad_ms": MetricInfo("latency (median absolute deviation)", "ms", Better.LOWER),
    "latency_initial_ms": MetricInfo("latency (first minute)", "ms", Better.LOWER),
    "latency_steady_ms": MetricInfo("latency (steady state)", "ms", Better.LOWER),
    "latency_per_window_ms": MetricInfo("latency per window", "ms", Better.LOWER),
    "throughput_per_s": MetricInfo("throughput (1 / mean latency)", "1/s", Better.HIGHER),
    "gflops": MetricInfo("compute rate", "GFLOP/s", Better.HIGHER),
    "energy_per_inference_mj": MetricInfo("energy per inference (above idle)", "mJ", Better.LOWER),
    "energy_per_inference_gross_mj": MetricInfo("energy per inference (gross)", "mJ", Better.LOWER),
    "energy_net_mj": MetricInfo("energy (above idle)", "mJ", Better.LOWER),
    "power_mean_mw": MetricInfo("power (mean)", "mW", Better.LOWER),
    "gpu_load_mean": MetricInfo("background GPU load reached (mean)", "fraction busy"),
    "rss_peak_mb": MetricInfo("memory (peak RSS)", "MB", Better.LOWER),
    "data_movement_share": MetricInfo("share of GPU time moving data", "fraction"),
    "opencl_h2d_total_ms": MetricInfo("OpenCL host-to-device time", "ms", Better.LOWER),
    "opencl_d2h_total_ms": MetricInfo("OpenCL device-to-host time", "ms", Better.LOWER),
    "opencl_kernel_total_ms": MetricInfo("OpenCL kernel time", "ms", Better.LOWER),
    "temperature_max_c": MetricInfo("temperature (max)", "°C", Better.LOWER),
    "steady_initial_ratio": MetricInfo("steady / first-minute latency", "", Better.LOWER),
    "time_to_throttle_s": MetricInfo("time to throttle", "s", Better.HIGHER),
}
# Unit suffixes of metric names (names carry their unit: latency_median_ms, power_mean_mw).
_SUFFIX_UNITS: dict[str, str] = {
    "ms": "ms",
    "s": "s",
    "mw": "mW",
    "mj": "mJ",
    "mb": "MB",
    "kb": "kB",
    "c": "°C",
    "pct": "%",
    "per_s": "1/s",
}
_LAYER = re.compile(r"^layer_\d+_(?P<name>.+)_ms$")


def describe(metric: str, stored_unit: str = "") -> MetricInfo:
    """The catalogue's entry, else one made from the name (and the unit the store has for it)."""
    known = CATALOGUE.get(metric)
    if known is not None:
        return known
    layer = _LAYER.match(metric)
    if layer:
        return MetricInfo(f"layer {layer['name']} time", "ms", Better.LOWER)
    for suffix, unit in sorted(_SUFFIX_UNITS.items(), key=lambda item: -len(item[0])):
        if metric.endswith(f"_{suffix}"):
            return MetricInfo(metric.removesuffix(f"_{suffix}").replace("_", " "), stored_unit or unit)
    return MetricInfo(metric.replace("_", " "), stored_unit)


def axis_label(metric: str, stored_unit: str = "") -> str:
    """`latency (median) [ms], lower is better`: a figure's value axis."""
    info = describe(metric, stored_unit)
    return info.label() + (f", {info.better.value}" if info.better is not Better.NEITHER else "")
