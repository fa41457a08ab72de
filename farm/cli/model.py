"""`farm model fit|predict`: an Augur-style resource model from farm's own GEMM measurements.

fit reads an experiment that ran `gemm` from the store, fits one GEMM time model per (phone,
backend, precision) and writes a model file; predict applies it to a CNN descriptor (per-layer
time, total, memory) and, given a cnn experiment, holds it against the measured layer times.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from farm.analysis import kernel_data, resource_data
from farm.analysis.cnn_descriptor import NETWORKS, Network, network_or_file
from farm.analysis.kernel_model import LayerSample, fit_layer_model
from farm.analysis.kernel_predictor import (
    Accuracy,
    Estimator,
    KernelPredictor,
    KernelSample,
    accuracy,
    held_out_errors,
    kernel_of_layer,
    predict_many,
)
from farm.analysis.kernel_predictor import fit as fit_kernels
from farm.analysis.kernel_sampling import PER_KIND, refine, refinement_text
from farm.analysis.network_model import (
    NetworkPrediction,
    pool_rate,
    predict_network,
    predict_network_by_kernel,
)
from farm.analysis.resource_data import ModelKey, PhoneModel
from farm.analysis.resource_model import GemmSample, select_model
from farm.cli.json_output import echo_json
from farm.cli.options import results_option, store_location
from farm.errors import ConfigError
from farm.report.model import ReportData
from farm.report.query import load_report_data
from farm.store import Store
from farm.store.views import last_done_env


def _load(results: str | None, experiment: str) -> ReportData:
    with Store(store_location(results), read_only=True) as store:
        return load_report_data(store, experiment)


def _params(data: ReportData) -> Mapping[str, Any]:
    return data.spec.benchmark.params if data.spec is not None else {}


class Predictor(enum.StrEnum):
    """Which model prices a layer in `farm model predict`."""

    AUTO = "auto"
    GEMM = "gemm"
    KERNELS = "kernels"


@click.group("model")
def model() -> None:
    """Latency and memory predictors, fitted per phone: on sampled kernels (kernel_sampling.yaml,
    nn-Meter's way) or on a GEMM sweep (Augur's), they predict networks and configurations never
    measured.

    \b
    Example:
      farm run experiments/gemm.yaml --variant model     # GEMM sweep on every phone
      farm model fit gemm.model                          # fit per phone, held-out accuracy
      farm model predict --model results/gemm.model/resource_model.json --network squeezenet1.0
    """


def _term(name: str) -> str:
    """`ms_per_m_im2col` -> `M_im2col`, `intercept_ms` -> `a`: a fitted term as fit prints it."""
    return {"intercept_ms": "a", "ms_per_gflop": "GFLOP"}.get(name, name.replace("ms_per_m_", "M_"))


@model.command("fit")
@click.argument("experiment")
@click.argument("more", nargs=-1)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Model file to write (default RESULTS/EXPERIMENT/resource_model.json).",
)
@click.option(
    "--all-repetitions",
    is_flag=True,
    help="Fit every repetition instead of the fastest of each shape (use on a quiet, dedicated phone).",
)
@click.option(
    "--network",
    "networks",
    multiple=True,
    type=click.Choice(NETWORKS),
    help="cnn experiments: fit only the convolutions of this network (repeatable).",
)
@click.option(
    "--refine",
    "refine_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Sampling experiments: write the adaptive round here, an experiment of configurations around "
    "those the predictors got most wrong held out; run it, then fit on both.",
)
@click.option(
    "--estimator",
    type=click.Choice([e.value for e in Estimator]),
    default=Estimator.BOOSTING.value,
    show_default=True,
    help="Sampling experiments: the regressor per kernel type (tests/bench/bench_predict.py compares them).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the model file's JSON.")
@results_option
def fit(
    experiment: str,
    more: tuple[str, ...],
    out: Path | None,
    all_repetitions: bool,
    networks: tuple[str, ...],
    refine_path: Path | None,
    estimator: str,
    as_json: bool,
    results: str | None,
) -> None:
    """Fit GEMM time = a + b*GFLOP + c*MB per phone, backend and precision from EXPERIMENT, and
    report the error on shapes left out of the fit. EXPERIMENT ran the gemm program over shapes
    (m, n, k), or the cnn program: then its convolutions are the GEMMs (per-layer times).

    \b
    Example:
      farm model fit gemm
      farm model fit gemm --json --out gemm_model.json
      farm model fit squeezenet_precision --network squeezenet1.0   # then predict squeezenet1.1
      farm model fit kernel_sampling --refine round2.yaml   # sampled kernels; then the adaptive round:
      farm run round2.yaml && farm model fit kernel_sampling kernel_sampling_refine
    """
    data = _load(results, experiment)
    if data.benchmark == "cnn" and kernel_data.is_sampling(data.runs, _params(data)):
        rounds = [data, *(_load(results, name) for name in more)]
        for extra in rounds[1:]:
            if not kernel_data.is_sampling(extra.runs, _params(extra)):
                raise ConfigError(f"experiment {extra.experiment!r} is no kernel sampling experiment")
        _fit_kernels(rounds, out, refine_path, Estimator(estimator), as_json, results)
        return
    if more:
        raise ConfigError(
            "one experiment at a time, except kernel sampling rounds", hint=f"fit {experiment} alone"
        )
    inputs = _inputs(data, networks)
    groups = inputs.samples
    if not groups:
        raise ConfigError(
            f"experiment {experiment!r} has no finished {data.benchmark} runs with "
            + (
                "m, n, k and a time"
                if data.benchmark == "gemm"
                else "per-layer times of " + ", ".join(networks or NETWORKS)
            ),
            hint="run its sweep first with `farm run FILE`",
        )
    models = []
    for key in sorted(groups):
        try:
            fitted = select_model(groups[key], fastest=not all_repetitions)
            layers = inputs.layers.get(key)
            kernels = fit_layer_model(layers, fastest=not all_repetitions) if layers else None
            models.append(PhoneModel(key, fitted, inputs.pool_rates.get(key), kernels))
        except ConfigError as error:
            raise ConfigError(f"{key.label()}: {error}") from None
    document = resource_data.model_file(experiment, inputs.time_metric, models, inputs.source)
    path = out or store_location(results).artifacts / experiment / "resource_model.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    if as_json:
        echo_json(document)
        return
    click.echo(
        f"{'phone':<24} {'backend':<7} {'prec':<5} {'form':<12} {'a ms':>7} {'ms/GFLOP':>9} "
        f"{'ms/MB':>7} {'shapes':>6} {'held-out MAPE':>13} {'within 10%':>10} {'repeat MAPE':>11}"
    )
    for item in models:
        fitted, coef = item.fitted, item.fitted.model.coefficient
        repeat = f"{fitted.repeatability.mape_pct:.1f}%" if fitted.repeatability else "-"
        click.echo(
            f"{item.key.device_id:<24} {item.key.backend:<7} {item.key.precision:<5} "
            f"{fitted.model.form:<12} {coef('intercept_ms'):7.3f} {coef('ms_per_gflop'):9.2f} "
            f"{coef('ms_per_mb'):7.3f} {fitted.shapes:6d} {fitted.held_out.mape_pct:12.1f}% "
            f"{fitted.held_out.within_10pct:10.0%} {repeat:>11}"
        )
    for item in models:
        if item.kernels is not None:
            # the terms each type kept (chosen by leave-one-shape-out error, kernel_model.choose_form)
            kinds = ", ".join(
                f"{k.kernel} ({k.shapes} shapes: {' + '.join(_term(n) for n, _ in k.coefficients)})"
                for k in item.kernels.kernels
            )
            click.echo(f"{item.key.label()}: per-kernel-type layer model: {kinds}")
    click.echo(
        "held-out: each shape predicted by a fit without it; repeat MAPE: the repetitions of one "
        "shape against each other (the noise no model of m, n, k can remove)"
    )
    click.echo(f"model written to {path}")


@dataclass(frozen=True)
class _Inputs:
    samples: dict[ModelKey, list[GemmSample]]
    pool_rates: dict[ModelKey, float | None]
    source: str
    time_metric: str
    layers: dict[ModelKey, list[LayerSample]] = field(default_factory=dict)  # cnn: every layer


def _inputs(data: ReportData, networks: tuple[str, ...]) -> _Inputs:
    """What to fit from a gemm or a cnn experiment."""
    if data.benchmark == "gemm":
        samples = resource_data.gemm_samples(data.runs, _params(data))
        return _Inputs(samples, {}, "gemm", resource_data.TIME_METRIC)
    if data.benchmark == "cnn":
        ran = {name for name, _ in resource_data.measured_inputs(data.runs, _params(data))}
        chosen = networks or tuple(name for name in NETWORKS if name in ran) or NETWORKS
        layers = resource_data.cnn_layer_samples(data.runs, _params(data), chosen, data.layers)
        return _Inputs(
            {key: group.convs for key, group in layers.items() if group.convs},
            {key: pool_rate(group.pools) for key, group in layers.items()},
            f"cnn layers of {', '.join(chosen)}",
            "layer time_ns (median of the run)",
            resource_data.layer_samples(data.runs, _params(data), chosen, data.layers),
        )
    raise ConfigError(
        f"experiment {data.experiment!r} ran {data.benchmark or 'no benchmark'}, not gemm or cnn",
        hint="fit from a GEMM sweep such as experiments/gemm.yaml",
    )


def _prediction_json(key: ModelKey, prediction: NetworkPrediction) -> dict[str, Any]:
    memory = prediction.memory
    errors = prediction.conv_errors()
    every = prediction.layer_errors()
    return {
        "device_id": key.device_id,
        "backend": key.backend,
        "precision": key.precision,
        "network": prediction.network,
        "layers": [
            {
                "name": layer.name,
                "kind": str(layer.kind),
                "gemm_mnk": list(layer.gemm_mnk) if layer.gemm_mnk else None,
                "gflop": layer.gflop,
                "predicted_ms": layer.predicted_ms,
                "measured_ms": layer.measured_ms,
                "error_pct": layer.error_pct,
            }
            for layer in prediction.layers
        ],
        "total_ms": prediction.total_ms,
        "measured_total_ms": prediction.measured_total_ms,
        "conv_mape_pct": errors[0] if errors else None,
        "conv_within_10pct": errors[1] if errors else None,
        "layers_within_10pct": every[1] if every else None,
        "memory": {
            "weights_bytes": memory.weights_bytes,
            "peak_activations_bytes": memory.peak_activations_bytes,
            "workspace_bytes": memory.workspace_bytes,
            "peak_bytes": memory.peak_bytes,
            "peak_layer": memory.peak_layer,
            "all_feature_maps_bytes": memory.all_feature_maps_bytes,
        },
    }


def _print_prediction(key: ModelKey, prediction: NetworkPrediction, used: str) -> None:
    click.echo(f"\n{prediction.network} on {key.label()} ({used} model)")
    click.echo(f"  {'layer':<20} {'m x n x k':<18} {'GFLOP':>7} {'pred ms':>9} {'meas ms':>9} {'err':>7}")
    for layer in prediction.layers:
        mnk = "x".join(str(d) for d in layer.gemm_mnk) if layer.gemm_mnk else str(layer.kind)
        measured = f"{layer.measured_ms:9.3f}" if layer.measured_ms is not None else f"{'-':>9}"
        error = f"{layer.error_pct:+6.0f}%" if layer.error_pct is not None else f"{'-':>7}"
        click.echo(
            f"  {layer.name:<20} {mnk:<18} {layer.gflop:7.4f} {layer.predicted_ms:9.3f} {measured} {error}"
        )
    measured_total = prediction.measured_total_ms
    line = f"  total {prediction.total_ms:.2f} ms predicted"
    if measured_total is not None:
        line += f", {measured_total:.2f} ms measured ({(prediction.total_ms / measured_total - 1):+.0%})"
    errors = prediction.conv_errors()
    if errors:
        line += f"; conv layers MAPE {errors[0]:.1f}%, {errors[1]:.0%} within 10%"
    every = prediction.layer_errors()
    if every:
        line += f"; all layers {every[1]:.0%} within 10%"
    click.echo(line)
    memory = prediction.memory
    mib = 1024 * 1024
    click.echo(
        f"  memory peak {memory.peak_bytes / mib:.1f} MiB = weights {memory.weights_bytes / mib:.1f} + "
        f"feature maps {memory.peak_activations_bytes / mib:.1f} + im2col {memory.workspace_bytes / mib:.1f} "
        f"(at {memory.peak_layer}); all feature maps {memory.all_feature_maps_bytes / mib:.1f} MiB"
    )


@model.command("predict")
@click.option(
    "--model",
    "model_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Model file from `farm model fit`.",
)
@click.option(
    "--network",
    required=True,
    help=f"A shipped network ({', '.join(NETWORKS)}) or a descriptor file you wrote "
    "(YAML, farm/analysis/networks/README.md).",
)
@click.option(
    "--input-size",
    type=click.IntRange(16, 4096),
    default=None,
    help="Square input in pixels (default the network's own: 227 for squeezenet1.0).",
)
@click.option(
    "--device", "devices", multiple=True, help="Only these phones (device_id as in the model file)."
)
@click.option("--backend", "backends", multiple=True, help="Only these backends (cpu, cpu-mt, gpu).")
@click.option(
    "--compare", "compare", default=None, help="A cnn experiment in the store: show its measured layer times."
)
@click.option(
    "--predictor",
    type=click.Choice([p.value for p in Predictor]),
    default=Predictor.AUTO.value,
    show_default=True,
    help="gemm: every conv as its im2col GEMM (Augur); kernels: the per-kernel-type layer model "
    "of a cnn-fitted file; auto: kernels where the file has them, else gemm.",
)
@click.option(
    "--figure",
    type=click.Path(path_type=Path),
    default=None,
    help="With --compare: write predicted vs measured time per layer (+-10%% band) as SVG here.",
)
@click.option(
    "--baseline",
    type=click.Choice(["augur"]),
    default=None,
    help="augur: the GEMM-only baseline (a model file fitted on a gemm sweep) instead of the "
    "kernel predictor of a sampling experiment's file.",
)
@click.option(
    "--clock-mhz",
    type=click.FloatRange(min=1.0),
    default=None,
    help="Kernel predictors: the clock to predict at (cpu: the fastest policy's, gpu: the GPU's); "
    "default the clock the --compare runs ran at, else the sampled kernels'.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@results_option
def predict(
    model_path: Path,
    network: str,
    input_size: int | None,
    devices: tuple[str, ...],
    backends: tuple[str, ...],
    compare: str | None,
    predictor: str,
    figure: Path | None,
    baseline: str | None,
    clock_mhz: float | None,
    as_json: bool,
    results: str | None,
) -> None:
    """Predict NETWORK's per-layer and total latency (convolutions as GEMMs) and its peak memory
    (weights + feature maps + im2col workspace) on every phone of the model file.

    \b
    Example:
      farm model predict --model results/gemm/resource_model.json --network squeezenet1.0
      farm model predict --model m.json --network squeezenet1.1 --backend gpu --compare squeezenet_precision
      farm model predict --model m.json --network squeezenet1.1 --compare cnn_runs --figure pred.svg
      farm model predict --model m.json --network my_net.yaml
    """
    descriptor = network_or_file(network, input_size)
    kernels = _read_kernel_predictors(model_path)
    if kernels is not None and baseline == "augur":
        raise ConfigError(
            f"{model_path}: a kernel predictor file; --baseline augur needs a GEMM model file",
            hint="fit one with `farm run experiments/gemm.yaml --variant model` and `farm model fit gemm`",
        )
    if kernels is not None:
        _predict_kernels(kernels, descriptor, devices, backends, compare, clock_mhz, as_json, results)
        return
    models = _read_models(model_path)
    chosen = [
        m
        for m in models
        if (not devices or m.key.device_id in devices) and (not backends or m.key.backend in backends)
    ]
    if not chosen:
        known = ", ".join(sorted({m.key.label() for m in models}))
        raise ConfigError(f"{model_path}: no model matches --device/--backend", hint=f"the file has: {known}")
    measured: dict[ModelKey, dict[str, float]] = {}
    if compare is not None:
        data = _load(results, compare)
        if data.benchmark != "cnn":
            raise ConfigError(f"experiment {compare!r} ran {data.benchmark or 'no benchmark'}, not cnn")
        refuse_unlike(compare, resource_data.measured_inputs(data.runs, _params(data)), descriptor)
        measured = resource_data.measured_layers(data.runs, _params(data), descriptor.name, data.layers)
    asked = Predictor(predictor)
    if asked is Predictor.KERNELS and any(m.kernels is None for m in chosen):
        raise ConfigError(
            f"{model_path}: --predictor kernels needs a model fitted on a cnn experiment's layers",
            hint="`farm model fit CNN_EXPERIMENT` writes one; or use --predictor gemm",
        )
    predictions = [
        (m.key, used, _predict(m, used, descriptor, measured.get(m.key)))
        for m in chosen
        for used in [Predictor.KERNELS if asked is not Predictor.GEMM and m.kernels else Predictor.GEMM]
    ]
    if figure is not None:
        _write_figure(figure, [(f"{k.label()} ({used})", p) for k, used, p in predictions])
    if as_json:
        echo_json(
            {
                "network": descriptor.name,
                "predictions": [
                    {**_prediction_json(k, p), "predictor": str(used)} for k, used, p in predictions
                ],
            }
        )
        return
    for key, used, prediction in predictions:
        _print_prediction(key, prediction, used)


def refuse_unlike(experiment: str, measured: set[tuple[str, int]], descriptor: Network) -> None:
    """--compare sets a prediction against runs of the same network at the same input size only
    (a 227 px prediction against 113 px runs would print a meaningless -83 %)."""
    wanted = (descriptor.name, descriptor.input_size)
    if wanted in measured:
        return
    ran = ", ".join(f"{name} at {size} px" for name, size in sorted(measured)) or "no finished cnn run"
    sizes = sorted(size for name, size in measured if name == descriptor.name)
    hint = (
        f"predict at its size: --input-size {sizes[0]}"
        if sizes
        else f"predict --network {sorted(measured)[0][0]}"
        if measured
        else None
    )
    raise ConfigError(
        f"--compare {experiment}: it ran {ran}, not {descriptor.name} at {descriptor.input_size} px: "
        "the layer shapes differ",
        hint=hint,
    )


def _predict(
    model: PhoneModel, used: Predictor, descriptor: Network, measured: dict[str, float] | None
) -> NetworkPrediction:
    if used is Predictor.KERNELS and model.kernels is not None:
        return predict_network_by_kernel(model.kernels, descriptor, model.key.precision, measured)
    return predict_network(
        model.fitted.model, descriptor, model.key.precision, measured, model.pool_ms_per_mb
    )


def _write_figure(path: Path, predictions: list[tuple[str, NetworkPrediction]]) -> None:
    # Imported here: it loads matplotlib, which only --figure needs.
    from farm.report.layers import prediction_figure

    rendered = prediction_figure(predictions)
    if rendered is None:
        raise ConfigError(
            f"{path}: no measured layer to draw", hint="--figure needs --compare with a cnn experiment"
        )
    try:
        path.write_text(rendered.svg, encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot write the figure ({error.strerror})") from None


def _read_models(path: Path) -> list[PhoneModel]:
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(
            f"{path}: cannot read the model file ({error.strerror})",
            hint="write one with `farm model fit EXPERIMENT`",
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}:{error.lineno}: not JSON ({error.msg})") from None
    return resource_data.models_from_json(data, str(path))


def _fit_kernels(
    rounds: list[ReportData],
    out: Path | None,
    refine_path: Path | None,
    estimator: Estimator,
    as_json: bool,
    results: str | None,
) -> None:
    """fit on kernel sampling experiments (a first round and adaptive ones): one kernel predictor
    per phone, backend and precision; with `refine_path`, the next adaptive round's experiment."""
    experiment = rounds[0].experiment
    groups: dict[ModelKey, list[KernelSample]] = {}
    with Store(store_location(results), read_only=True) as store:
        for data in rounds:
            envs = {run.run_id: last_done_env(store, run.run_id) for run in data.runs}
            for key, found in kernel_data.kernel_samples(
                data.runs, _params(data), data.layers, envs=envs
            ).items():
                groups.setdefault(key, []).extend(found)
    if not groups:
        raise ConfigError(
            f"experiment {experiment!r} has no finished single-layer cnn runs with a layer time",
            hint="run the sampling experiment first: `farm run experiments/kernel_sampling.yaml`",
        )
    predictors: dict[ModelKey, KernelPredictor] = {}
    for key, samples in sorted(groups.items()):
        try:
            predictors[key] = fit_kernels(samples, key.precision, estimator)
        except ConfigError as error:
            raise ConfigError(f"{key.label()}: {error}") from None
    document = kernel_data.model_file(experiment, predictors)
    path = out or store_location(results).artifacts / experiment / "kernel_predictor.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    refine_note = _write_refinement(refine_path, experiment, predictors) if refine_path is not None else None
    if as_json:
        echo_json(document)
        return
    for key, predictor in predictors.items():
        kinds = ", ".join(
            f"{kind} ({sum(s.config.kind is kind for s in predictor.samples)})" for kind in predictor.kinds()
        )
        click.echo(f"{key.label()}: kernel predictors ({estimator}) for {kinds}")
    click.echo(f"model written to {path}")
    if refine_note:
        click.echo(refine_note)


def _write_refinement(path: Path, experiment: str, predictors: Mapping[ModelKey, KernelPredictor]) -> str:
    """The adaptive round: per kind, a quarter of the first round's count around the sampled
    configurations with the largest held-out error (pooled over phones and backends)."""
    errors = [(s.config, err) for p in predictors.values() for s, err in held_out_errors(p)]
    sampled = {s.config for p in predictors.values() for s in p.samples}
    counts = {kind: max(2, n // 4) for kind, n in PER_KIND.items()}
    name = f"{experiment}_refine"
    configs = refine(errors, counts, seed=len(sampled), avoid=sampled)
    try:
        backends = sorted({key.backend for key in predictors})
        precisions = sorted({key.precision for key in predictors})
        path.write_text(refinement_text(name, configs, experiment, backends, precisions), encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot write the adaptive round ({error.strerror})") from None
    worst = sorted(errors, key=lambda e: -e[1])[:1]
    at = f" (worst held out: {worst[0][0].kind} {worst[0][1]:.0%} off)" if worst else ""
    return (
        f"adaptive round: {len(configs)} configurations written to {path}{at}; "
        f"`farm run {path}`, then `farm model fit {experiment} {name}`"
    )


def _read_kernel_predictors(path: Path) -> dict[ModelKey, KernelPredictor] | None:
    """The kernel predictors of `path` if it is a kernel predictor file, else None (a GEMM file)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None  # _read_models reports it
    return kernel_data.predictors_from_json(data, str(path)) if kernel_data.is_model_file(data) else None


def _predict_kernels(
    predictors: dict[ModelKey, KernelPredictor],
    descriptor: Network,
    devices: tuple[str, ...],
    backends: tuple[str, ...],
    compare: str | None,
    clock_mhz: float | None,
    as_json: bool,
    results: str | None,
) -> None:
    """Every layer of `descriptor` as the kernel it runs, priced by the phone's learned predictors
    at `clock_mhz`, else the clock the compared runs ran at, else the sampled kernels' median."""
    chosen = {
        key: p
        for key, p in predictors.items()
        if (not devices or key.device_id in devices) and (not backends or key.backend in backends)
    }
    if not chosen:
        known = ", ".join(sorted(k.label() for k in predictors))
        raise ConfigError("no kernel predictor matches --device/--backend", hint=f"the file has: {known}")
    measured: dict[ModelKey, dict[str, float]] = {}
    ran_at: dict[ModelKey, float] = {}
    if compare is not None:
        data = _load(results, compare)
        if data.benchmark != "cnn":
            raise ConfigError(f"experiment {compare!r} ran {data.benchmark or 'no benchmark'}, not cnn")
        refuse_unlike(compare, resource_data.measured_inputs(data.runs, _params(data)), descriptor)
        measured = resource_data.measured_layers(data.runs, _params(data), descriptor.name, data.layers)
        with Store(store_location(results), read_only=True) as store:
            envs = {run.run_id: last_done_env(store, run.run_id) for run in data.runs}
        ran_at = kernel_data.network_clocks(data.runs, _params(data), descriptor.name, envs)
    reports = []
    for key, predictor in sorted(chosen.items()):
        clock = clock_mhz or ran_at.get(key) or _median_clock(predictor)
        times = predict_many(predictor, [kernel_of_layer(layer) for layer in descriptor.layers], clock)
        meas = measured.get(key, {})
        rows = [
            (layer.name, ms, meas.get(layer.name)) for layer, ms in zip(descriptor.layers, times, strict=True)
        ]
        pairs = [(p, m) for _, p, m in rows if m is not None and m > 0]
        reports.append((key, rows, accuracy(pairs) if pairs else None))
    if as_json:
        echo_json({"network": descriptor.name, "predictions": [_kernel_json(*r) for r in reports]})
        return
    for key, rows, acc in reports:
        click.echo(f"\n{descriptor.name} on {key.label()} (kernel predictor)")
        click.echo(f"  {'layer':<20} {'pred ms':>9} {'meas ms':>9} {'err':>7}")
        for name, predicted, got in rows:
            err = f"{(predicted / got - 1) * 100:+6.0f}%" if got else f"{'-':>7}"
            click.echo(f"  {name:<20} {predicted:9.3f} {got if got else '-':>9} {err}")
        click.echo(f"  total {sum(p for _, p, _ in rows):.2f} ms predicted")
        if acc is not None:
            click.echo(f"  {_accuracy_line(acc)}")


def _median_clock(predictor: KernelPredictor) -> float | None:
    clocks = sorted(s.clock_mhz for s in predictor.samples if s.clock_mhz)
    return clocks[len(clocks) // 2] if clocks else None


def _accuracy_line(acc: Accuracy) -> str:
    return (
        f"{acc.count} layers: RMSPE {acc.rmspe_pct:.1f}%, within 5/10/15%: {acc.within_5pct:.0%} / "
        f"{acc.within_10pct:.0%} / {acc.within_15pct:.0%}; total {acc.total_error_pct:+.1f}%"
    )


def _kernel_json(
    key: ModelKey, rows: list[tuple[str, float, float | None]], acc: Accuracy | None
) -> dict[str, Any]:
    return {
        "device_id": key.device_id,
        "backend": key.backend,
        "precision": key.precision,
        "predictor": "kernels-sampled",
        "layers": [{"name": n, "predicted_ms": p, "measured_ms": m} for n, p, m in rows],
        "total_ms": sum(p for _, p, _ in rows),
        "accuracy": None
        if acc is None
        else {
            "rmspe_pct": acc.rmspe_pct,
            "within_5pct": acc.within_5pct,
            "within_10pct": acc.within_10pct,
            "within_15pct": acc.within_15pct,
            "total_error_pct": acc.total_error_pct,
        },
    }
