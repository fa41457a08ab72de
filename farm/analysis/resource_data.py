"""From stored runs to resource-model inputs, and the model file format. Pure: takes the runs the
report query already assembles (farm.report.query.load_report_data) and returns typed values.

A model file (JSON, FORMAT) holds one fitted GEMM model per (phone, backend, precision):
  {"format": "farm-resource-model/1", "experiment": "gemm", "source": "gemm" (or "cnn layers of
   squeezenet1.0": fitted on a cnn experiment's convolutions), "time_metric": "latency_median_ms",
   "models": [{"device_id": "local/VP6520", "backend": "gpu", "precision": "fp32",
               "form": "flops+bytes", "coefficients": {"intercept_ms": ..., "ms_per_gflop": ...,
               "ms_per_mb": ...}, "samples": 32, "shapes": 16,
               "held_out": {"mape_pct": ..., "within_10pct": ..., "max_error_pct": ..., "count": ...},
               "in_sample": {...}, "candidates": {"flops": {...}, "flops+bytes": {...}},
               "kernels": null, or (cnn experiments) the per-kernel-type layer model:
                 {"conv1x1": {"coefficients": {"intercept_ms": ..., "ms_per_gflop": ...,
                  "ms_per_m_out": ..., "ms_per_m_in": ..., "ms_per_m_weights": ...},
                  "samples": 15, "shapes": 15}, "convkxk": {...}, "maxpool": {...}, ...}}]}
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from farm.analysis.cnn_descriptor import DEFAULT_INPUT_SIZE, NETWORKS, network
from farm.analysis.kernel_model import FEATURES as KERNEL_FEATURES
from farm.analysis.kernel_model import KernelModel, KernelType, LayerModel, LayerSample
from farm.analysis.network_model import moved_mb
from farm.analysis.resource_model import FEATURES, FittedModel, GemmModel, GemmSample, HeldOut
from farm.errors import ConfigError
from farm.store.layers import LayerResult
from farm.store.results import StoredResult
from farm.store.runs import RunState

FORMAT = "farm-resource-model/1"
TIME_METRIC = "latency_median_ms"
_LAYER_METRIC = re.compile(r"^layer_\d+_(?P<name>.+)_ms$")


class LayerStatistic(enum.StrEnum):
    """Which of a layer event's statistics over the run's measured iterations stands for the layer.

    MEDIAN is the model's: measured on one virtual phone on a shared 2-core host (2026-12-02, load
    6-14, tests/bench/bench_model.py, 3 repetitions x 10 iterations), the fastest iteration (min_ns)
    of a run was the steadier one in some measurements (each 1.1 repetition against the first: 100 %
    of layers within +-10 % by min, 77-97 % by median) and far off in others (10-50 % by min, 87-100 %
    by median): a run's minimum depends on whether the host had a quiet moment during it, its median
    on the host's typical load. Fitted on the median (the fastest repetition of each shape) the layer
    model met the goal in 11 of 12 repetitions of two measurements, on the minimum in 6 of 12.
    FASTEST stays for comparison (FARM_BENCH_STATISTIC=min)."""

    MEDIAN = "median"
    FASTEST = "min"


@dataclass(frozen=True, order=True)
class ModelKey:
    """Which measurements a model describes: one phone, one backend, one storage precision."""

    device_id: str
    backend: str
    precision: str

    def label(self) -> str:
        return f"{self.device_id} {self.backend} {self.precision}"


@dataclass(frozen=True)
class PhoneModel:
    key: ModelKey
    fitted: FittedModel
    pool_ms_per_mb: float | None = None  # measured pools' rate (cnn experiments), else None
    kernels: LayerModel | None = None  # per kernel type (cnn experiments), else None


def _key(run: StoredResult, params: Mapping[str, Any]) -> ModelKey | None:
    if not run.device_id:
        return None
    factors = {**params, **run.factors}
    return ModelKey(run.device_id, str(factors.get("backend", "cpu")), str(factors.get("precision", "fp32")))


def gemm_samples(
    runs: Iterable[StoredResult], params: Mapping[str, Any], time_metric: str = TIME_METRIC
) -> dict[ModelKey, list[GemmSample]]:
    """GEMM samples of the runs that finished with (m, n, k) and a time, grouped per model key.
    `params` are the experiment's fixed benchmark params (a shape may be fixed there)."""
    groups: dict[ModelKey, list[GemmSample]] = {}
    for run in runs:
        factors = {**params, **run.factors}
        time_ms = run.metrics.get(time_metric)
        key = _key(run, params)
        if run.state is not RunState.DONE or time_ms is None or key is None:
            continue
        try:
            m, n, k = (int(factors[name]) for name in ("m", "n", "k"))
        except (KeyError, TypeError, ValueError):
            continue
        groups.setdefault(key, []).append(GemmSample(m, n, k, float(time_ms), key.precision))
    return groups


def layer_ms(layer: LayerResult, statistic: LayerStatistic) -> float:
    """The layer's time by `statistic`; a row without a minimum (older programs) gives its median."""
    if statistic is LayerStatistic.FASTEST and layer.min_ms is not None and layer.min_ms > 0:
        return layer.min_ms
    return layer.time_ms


def run_layer_ms(
    run: StoredResult,
    layers: Mapping[str, Sequence[LayerResult]],
    statistic: LayerStatistic = LayerStatistic.MEDIAN,
) -> dict[str, float]:
    """A run's per-layer times by layer name: from the layers table (farm.store.layers) where the
    run has rows there (by `statistic`), else from its layer_NN_<name>_ms metrics (runs stored
    before the table, medians only; names come back with `/`: fire2_squeeze1x1 -> fire2/squeeze1x1)."""
    stored = layers.get(run.run_id)
    if stored:
        return {layer.name: layer_ms(layer, statistic) for layer in stored}
    found: dict[str, float] = {}
    for metric, value in run.metrics.items():
        match = _LAYER_METRIC.match(metric)
        if match:
            found[re.sub(r"^(fire\d+)_", r"\1/", match["name"])] = value
    return found


def measured_inputs(runs: Iterable[StoredResult], params: Mapping[str, Any]) -> set[tuple[str, int]]:
    """The (network, input size) pairs the DONE runs of a cnn experiment measured."""
    found = set()
    for run in runs:
        factors = {**params, **run.factors}
        name = str(factors.get("model", NETWORKS[0]))
        if run.state is RunState.DONE and name in DEFAULT_INPUT_SIZE:
            found.add((name, input_size_of(name, factors)))
    return found


def measured_layers(
    runs: Iterable[StoredResult],
    params: Mapping[str, Any],
    network: str,
    layers: Mapping[str, Sequence[LayerResult]] | None = None,
    statistic: LayerStatistic = LayerStatistic.MEDIAN,
) -> dict[ModelKey, dict[str, float]]:
    """Per-layer time (cnn `layer` events) of the runs of `network`, per model key: the fastest
    run's, as the model is fitted to the fastest repetition (see resource_model.fastest_per_shape).
    `layers`: the experiment's layers table rows by run_id (see run_layer_ms)."""
    values: dict[ModelKey, dict[str, list[float]]] = {}
    for run in runs:
        factors = {**params, **run.factors}
        key = _key(run, params)
        if (
            run.state is not RunState.DONE
            or key is None
            or str(factors.get("model", "squeezenet1.0")) != network
        ):
            continue
        for name, value in run_layer_ms(run, layers or {}, statistic).items():
            values.setdefault(key, {}).setdefault(name, []).append(value)
    return {key: {n: min(v) for n, v in found.items()} for key, found in values.items()}


def input_size_of(name: str, factors: Mapping[str, Any]) -> int:
    """The input size a run measured `name` at: its input_size argument, else the network's own.
    Layers of another size are other GEMM shapes, priced by the descriptor at that size."""
    return int(factors.get("input_size", 0) or 0) or DEFAULT_INPUT_SIZE[name]


def layer_samples(
    runs: Iterable[StoredResult],
    params: Mapping[str, Any],
    networks: Sequence[str] = NETWORKS,
    layers: Mapping[str, Sequence[LayerResult]] | None = None,
    statistic: LayerStatistic = LayerStatistic.MEDIAN,
) -> dict[ModelKey, list[LayerSample]]:
    """Per model key, every measured layer of the DONE runs of `networks` (each run's time per
    layer by `statistic`) with its descriptor, for the per-kernel-type model (farm.analysis.kernel_model)."""
    groups: dict[ModelKey, list[LayerSample]] = {}
    for run in runs:
        factors = {**params, **run.factors}
        name = str(factors.get("model", NETWORKS[0]))
        key = _key(run, params)
        if run.state is not RunState.DONE or key is None or name not in networks:
            continue
        times = run_layer_ms(run, layers or {}, statistic)
        for layer in network(name, input_size_of(name, factors)).layers:
            if times.get(layer.name, 0) > 0:
                groups.setdefault(key, []).append(LayerSample(layer, times[layer.name]))
    return groups


@dataclass(frozen=True)
class LayerSamples:
    """What a cnn experiment measured of one model key: convolutions as GEMM samples (m, n, k from
    the built-in descriptor, time from the layer's median per run) and pools as (MB moved, ms)."""

    convs: list[GemmSample]
    pools: list[tuple[float, float]]


def cnn_layer_samples(
    runs: Iterable[StoredResult],
    params: Mapping[str, Any],
    networks: Sequence[str] = NETWORKS,
    stored: Mapping[str, Sequence[LayerResult]] | None = None,
) -> dict[ModelKey, LayerSamples]:
    """Per model key, the layers of the runs of `networks`, each priced by the descriptor at the
    run's own input size (113 px runs are other GEMM shapes, as valid to fit as 227 px ones)."""
    groups: dict[ModelKey, LayerSamples] = {}
    for run in runs:
        factors = {**params, **run.factors}
        name = str(factors.get("model", NETWORKS[0]))
        if name not in networks:
            continue
        for key, layers in measured_layers([run], params, name, stored).items():
            group = groups.setdefault(key, LayerSamples([], []))
            for layer in network(name, input_size_of(name, factors)).layers:
                if layer.name not in layers:
                    continue
                if layer.gemm_mnk is not None:
                    group.convs.append(GemmSample(*layer.gemm_mnk, layers[layer.name], key.precision))
                else:
                    group.pools.append((moved_mb(layer, key.precision), layers[layer.name]))
    return groups


def model_to_json(model: PhoneModel) -> dict[str, Any]:
    fitted = model.fitted
    return {
        **asdict(model.key),
        "form": fitted.model.form,
        "coefficients": dict(fitted.model.coefficients),
        "samples": fitted.samples,
        "shapes": fitted.shapes,
        "held_out": asdict(fitted.held_out),
        "in_sample": asdict(fitted.in_sample),
        "candidates": {form: asdict(errors) for form, errors in fitted.candidates},
        "repeatability": asdict(fitted.repeatability) if fitted.repeatability else None,
        "pool_ms_per_mb": model.pool_ms_per_mb,
        "kernels": _kernels_to_json(model.kernels) if model.kernels is not None else None,
    }


def _kernels_to_json(model: LayerModel) -> dict[str, Any]:
    return {
        str(kernel.kernel): {
            "coefficients": dict(kernel.coefficients),
            "samples": kernel.samples,
            "shapes": kernel.shapes,
        }
        for kernel in model.kernels
    }


def _kernels_from_json(data: Any) -> LayerModel:
    kernels = []
    for name, entry in data.items():
        coefficients = tuple((str(n), float(c)) for n, c in entry["coefficients"].items())
        unknown = [n for n, _ in coefficients if n not in KERNEL_FEATURES]
        if unknown:
            raise ValueError(f"unknown kernel coefficient {unknown[0]!r}")
        kernels.append(
            KernelModel(KernelType(name), coefficients, int(entry["samples"]), int(entry["shapes"]))
        )
    return LayerModel(tuple(kernels))


def model_file(
    experiment: str, time_metric: str, models: Sequence[PhoneModel], source: str = "gemm"
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "experiment": experiment,
        "source": source,
        "time_metric": time_metric,
        "models": [model_to_json(m) for m in models],
    }


def _held_out(data: Any) -> HeldOut:
    return HeldOut(
        float(data["mape_pct"]),
        float(data["within_10pct"]),
        float(data["max_error_pct"]),
        int(data["count"]),
    )


def models_from_json(data: Any, source: str) -> list[PhoneModel]:
    """Parse a model file's JSON; ConfigError naming `source` when it is not one."""
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        raise ConfigError(
            f"{source}: not a farm resource model (format {FORMAT!r})",
            hint="write one with `farm model fit EXPERIMENT --out FILE`",
        )
    models = []
    try:
        for entry in data["models"]:
            key = ModelKey(str(entry["device_id"]), str(entry["backend"]), str(entry["precision"]))
            coefficients = tuple((str(n), float(c)) for n, c in entry["coefficients"].items())
            unknown = [name for name, _ in coefficients if name not in FEATURES]
            if unknown:
                raise ValueError(f"unknown coefficient {unknown[0]!r}")
            candidates = tuple((str(f), _held_out(e)) for f, e in entry.get("candidates", {}).items())
            fitted = FittedModel(
                model=GemmModel(str(entry["form"]), coefficients),
                held_out=_held_out(entry["held_out"]),
                candidates=candidates,
                samples=int(entry["samples"]),
                shapes=int(entry["shapes"]),
                in_sample=_held_out(entry["in_sample"]),
                repeatability=_held_out(entry["repeatability"]) if entry.get("repeatability") else None,
            )
            pool = entry.get("pool_ms_per_mb")
            kernels = _kernels_from_json(entry["kernels"]) if entry.get("kernels") else None
            models.append(PhoneModel(key, fitted, None if pool is None else float(pool), kernels))
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ConfigError(f"{source}: models[{len(models)}]: bad or missing field {error}") from None
    if not models:
        raise ConfigError(f"{source}: the file holds no models")
    return models
