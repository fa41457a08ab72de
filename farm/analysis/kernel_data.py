"""Kernel samples from a sampling experiment's stored runs (the cnn program's single-layer mode,
experiments/kernel_sampling.yaml), and the kernel predictor's model file. Pure: the runs come in,
samples and JSON documents go out.

Model file: {"format": "farm-kernel-predictor/1", "experiment": ..., "models": [{"device_id",
"backend", "precision", "samples": [{"kind", "in_maps", "in_size", "out_maps", "kernel", "stride",
"pad", "time_ms", "clock_mhz"}, ...]}]}: the samples themselves, refitted (seeded) when predicting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from farm.analysis.kernel_predictor import KernelConfig, KernelKind, KernelPredictor, KernelSample, fit
from farm.analysis.resource_data import LayerStatistic, ModelKey, run_layer_ms
from farm.errors import ConfigError
from farm.store.layers import LayerResult
from farm.store.results import StoredResult
from farm.store.runs import RunState

FORMAT = "farm-kernel-predictor/1"
SINGLE_LAYER_MODEL = "layer"  # the cnn program's --model for one kernel
_CPU_CLOCK = re.compile(r"^cpu_.+_freq_mean_mhz$")


def is_sampling(runs: Iterable[StoredResult], params: Mapping[str, Any]) -> bool:
    """Whether an experiment's runs are single-layer cnn runs (a kernel sampling experiment)."""
    return any(str({**params, **run.factors}.get("model", "")) == SINGLE_LAYER_MODEL for run in runs)


def pinned_clock_mhz(env: Mapping[str, Any], backend: str) -> float | None:
    """The clock a run was pinned at, from its env.json's clock readback (farm.engine.clocks): the
    GPU's devfreq min = max for gpu, else the fastest CPU policy's scaling min = max; None where
    the run was not pinned as requested (a governor's clock is no one number)."""
    clocks = env.get("clocks")
    if not isinstance(clocks, Mapping) or clocks.get("mode") != "pin" or clocks.get("as_requested") is False:
        return None
    readback = clocks.get("readback")
    if not isinstance(readback, Mapping):
        return None
    found = []
    for path, value in readback.items():
        gpu = "devfreq" in str(path) and str(path).endswith("/max_freq")  # kgsl's or a Mali's
        cpu = str(path).endswith("/scaling_max_freq")
        floor = readback.get(str(path).replace("max_freq", "min_freq"))
        if (gpu if backend == "gpu" else cpu) and floor == value and str(value).isdigit():
            found.append(int(value) / (1e6 if gpu else 1e3))  # devfreq in Hz, cpufreq in kHz
    return max(found) if found else None


def run_clock_mhz(run: StoredResult, backend: str, env: Mapping[str, Any] | None = None) -> float | None:
    """The clock the run's kernel ran at: the clock it was pinned at (`env`: its env.json), else
    the GPU's mean for gpu, else the fastest CPU policy's mean (the big cluster, where farm pins
    the cpu backends); None where not recorded (a short run may end between two clock samples)."""
    pinned = pinned_clock_mhz(env or {}, backend)
    if pinned is not None:
        return pinned
    if backend == "gpu":
        return run.metrics.get("gpu_freq_mean_mhz")
    cpu = [value for name, value in run.metrics.items() if _CPU_CLOCK.match(name)]
    return max(cpu) if cpu else None


def config_of(factors: Mapping[str, Any]) -> KernelConfig:
    """A single-layer run's configuration, with the program's defaults (kernels/cnn/main.c)."""
    layer = str(factors.get("layer", "conv"))
    kernel, stride = int(factors.get("kernel", 3)), int(factors.get("stride", 1))
    pointwise = layer == "conv" and kernel == 1 and stride == 1
    kind = KernelKind.POINTWISE if pointwise else KernelKind(layer)
    channels = int(factors.get("channels", 3))
    out = (
        int(factors.get("out_channels", 16))
        if kind in (KernelKind.CONV, KernelKind.POINTWISE, KernelKind.FC)
        else channels
    )
    size = int(factors.get("input_size", 0) or 56)
    return KernelConfig(kind, channels, size, out, kernel, stride, int(factors.get("pad", 0)))


def kernel_samples(
    runs: Iterable[StoredResult],
    params: Mapping[str, Any],
    layers: Mapping[str, Sequence[LayerResult]],
    statistic: LayerStatistic = LayerStatistic.MEDIAN,
    envs: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[ModelKey, list[KernelSample]]:
    """Every finished single-layer run as a sample, per phone, backend and precision; `envs`: the
    runs' env.json by run_id, for the clock they were pinned at."""
    groups: dict[ModelKey, list[KernelSample]] = {}
    for run in runs:
        factors = {**params, **run.factors}
        if run.state is not RunState.DONE or not run.device_id or factors.get("model") != SINGLE_LAYER_MODEL:
            continue
        time_ms = run_layer_ms(run, layers, statistic).get("layer")
        if time_ms is None or time_ms <= 0:
            continue
        key = ModelKey(
            run.device_id, str(factors.get("backend", "cpu")), str(factors.get("precision", "fp32"))
        )
        clock = run_clock_mhz(run, key.backend, (envs or {}).get(run.run_id))
        sample = KernelSample(config_of(factors), float(time_ms), clock)
        groups.setdefault(key, []).append(sample)
    return groups


def network_clocks(
    runs: Iterable[StoredResult],
    params: Mapping[str, Any],
    network: str,
    envs: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[ModelKey, float]:
    """The median clock the finished runs of `network` ran at, per phone, backend and precision."""
    found: dict[ModelKey, list[float]] = {}
    for run in runs:
        factors = {**params, **run.factors}
        if run.state is not RunState.DONE or not run.device_id or str(factors.get("model")) != network:
            continue
        key = ModelKey(
            run.device_id, str(factors.get("backend", "cpu")), str(factors.get("precision", "fp32"))
        )
        clock = run_clock_mhz(run, key.backend, (envs or {}).get(run.run_id))
        if clock:
            found.setdefault(key, []).append(clock)
    return {key: sorted(values)[len(values) // 2] for key, values in found.items()}


def model_file(experiment: str, predictors: Mapping[ModelKey, KernelPredictor]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "experiment": experiment,
        "models": [
            {
                "device_id": key.device_id,
                "backend": key.backend,
                "precision": key.precision,
                "samples": [
                    {
                        "kind": str(s.config.kind),
                        "in_maps": s.config.in_maps,
                        "in_size": s.config.in_size,
                        "out_maps": s.config.out_maps,
                        "kernel": s.config.kernel,
                        "stride": s.config.stride,
                        "pad": s.config.pad,
                        "time_ms": s.time_ms,
                        "clock_mhz": s.clock_mhz,
                    }
                    for s in predictor.samples
                ],
            }
            for key, predictor in sorted(predictors.items())
        ],
    }


def is_model_file(data: Any) -> bool:
    return isinstance(data, dict) and data.get("format") == FORMAT


def predictors_from_json(data: Any, source: str) -> dict[ModelKey, KernelPredictor]:
    """The predictors of a model file; ConfigError naming `source` and the entry on bad content."""
    found: dict[ModelKey, KernelPredictor] = {}
    for index, entry in enumerate(data.get("models", [])):
        try:
            key = ModelKey(str(entry["device_id"]), str(entry["backend"]), str(entry["precision"]))
            samples = [
                KernelSample(
                    KernelConfig(
                        KernelKind(s["kind"]),
                        int(s["in_maps"]),
                        int(s["in_size"]),
                        int(s["out_maps"]),
                        int(s["kernel"]),
                        int(s["stride"]),
                        int(s["pad"]),
                    ),
                    float(s["time_ms"]),
                    None if s.get("clock_mhz") is None else float(s["clock_mhz"]),
                )
                for s in entry["samples"]
            ]
        except (KeyError, TypeError, ValueError) as error:
            raise ConfigError(f"{source}: models[{index}] is malformed ({error})") from None
        found[key] = fit(samples, key.precision)
    if not found:
        raise ConfigError(f"{source}: no models in the file", hint="refit with `farm model fit EXPERIMENT`")
    return found
