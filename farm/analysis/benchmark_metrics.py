"""Metrics a benchmark reports about itself: OpenCL build time and cache hit (`info`), GFLOP/s and
per-window latency (`result`), and per-layer times (cnn's `layer` events). Pure, over the events.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from farm.analysis.iterations import event_kind, result_event
from farm.metric import Metric

_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if number == number and abs(number) != float("inf") else None


def _info_metrics(events: Sequence[Mapping[str, Any]]) -> list[Metric]:
    """From the last `info` event: the OpenCL build time, the cache hit, and whether the OpenCL
    device is a CPU (PoCL on a host CPU: a study's GPU claims about fp16 hardware or data movement
    over the phone's bus cannot be tested on it)."""
    infos = [event for event in events if event_kind(event) == "info"]
    if not infos:
        return []
    event = infos[-1]
    metrics: list[Metric] = []
    build_ms = _number(event.get("build_ms"))
    if build_ms is not None:
        metrics.append(Metric("opencl_build_ms", build_ms, "ms"))
    if isinstance(event.get("cache_hit"), bool):
        metrics.append(Metric("opencl_cache_hit", float(event["cache_hit"]), "bool"))
    if event.get("device_type") in ("cpu", "gpu", "accelerator"):
        metrics.append(Metric("opencl_device_cpu", float(event["device_type"] == "cpu"), "bool"))
    return metrics


def _result_metrics(result: Mapping[str, Any] | None) -> list[Metric]:
    if result is None:
        return []
    wanted = {"gflops": ("gflops", "GFLOP/s"), "ms_per_window": ("latency_per_window_ms", "ms")}
    metrics = []
    for key, (name, unit) in wanted.items():
        value = _number(result.get(key))
        if value is not None:
            metrics.append(Metric(name, value, unit))
    return metrics


def layer_metric_name(index: int, name: str) -> str:
    return f"layer_{index:02d}_{_UNSAFE.sub('_', name).strip('_') or 'layer'}_ms"


def _layer_metrics(events: Sequence[Mapping[str, Any]]) -> list[Metric]:
    metrics = []
    for event in events:
        if event_kind(event) != "layer":
            continue
        time_ns = _number(event.get("time_ns"))
        index = event.get("index")
        if time_ns is None or not isinstance(index, int):
            continue
        metrics.append(Metric(layer_metric_name(index, str(event.get("name", ""))), time_ns / 1e6, "ms"))
    return metrics


def benchmark_metrics(events: Sequence[Mapping[str, Any]]) -> list[Metric]:
    return _info_metrics(events) + _result_metrics(result_event(events)) + _layer_metrics(events)
