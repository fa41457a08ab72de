"""`farm report EXPERIMENT`: HTML + Markdown report with figures, from the results store."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from farm.analysis import kernel_data
from farm.analysis.kernel_predictor import KernelPredictor
from farm.analysis.prediction_check import check_networks
from farm.analysis.resource_data import ModelKey
from farm.cli.options import results_option, store_location
from farm.errors import ConfigError
from farm.report.model import ReportData
from farm.report.notes import NoteKind, QualityNote
from farm.report.query import load_report_data
from farm.report.render import FORMATS, write_report
from farm.report.run_files import sustained_series_of
from farm.safe_text import terminal
from farm.store.artifacts import ArtifactLocation, artifact_locations, unreadable_here
from farm.store.db import Store
from farm.store.views import last_done_env


def parse_formats(value: str) -> tuple[str, ...]:
    formats = tuple(part.strip().lower() for part in value.split(",") if part.strip())
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ConfigError(f"--format {value!r}: choose from {', '.join(FORMATS)} (comma-separated)")
    return formats


def artifacts_note(elsewhere: Sequence[ArtifactLocation], shown: int = 3) -> str:
    """One line saying which run folders this machine cannot read, and where they are (pure)."""
    listed = ", ".join(loc.where for loc in elsewhere[:shown])
    more = f" and {len(elsewhere) - shown} more" if len(elsewhere) > shown else ""
    return (
        f"{len(elsewhere)} run folder(s) are not on this machine ({listed}{more}); the report uses "
        "the metrics stored in the database, only raw traces and logs are there"
    )


def read_kernel_predictors(path: Path) -> dict[ModelKey, KernelPredictor]:
    """The kernel predictors of `path`; one line naming the file when it is none."""
    try:
        document = json.loads(path.read_text())
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the model file ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}:{error.lineno}: not JSON ({error.msg})") from None
    if not kernel_data.is_model_file(document):
        raise ConfigError(
            f"{path}: no kernel predictor file",
            hint="fit one on a sampling experiment: `farm model fit kernel_sampling`",
        )
    return kernel_data.predictors_from_json(document, str(path))


def with_predictions(
    data: ReportData,
    predictors: Mapping[ModelKey, KernelPredictor],
    envs: Mapping[str, Mapping[str, Any]],
    source: Path,
) -> ReportData:
    """`data` with the predictors held against the networks its runs measured; a one-line error
    when the experiment measured none the file has a predictor for."""
    if data.benchmark != "cnn":
        raise ConfigError(
            f"--model: experiment {data.experiment!r} ran {data.benchmark or 'no benchmark'}, not cnn"
        )
    params = data.spec.benchmark.params if data.spec is not None else {}
    checks = check_networks(data.done_runs, params, data.layers, predictors, envs)
    if not checks:
        known = ", ".join(sorted(key.label() for key in predictors))
        raise ConfigError(
            f"--model {source}: experiment {data.experiment!r} has no finished network run on a phone, "
            f"backend and precision the file has a predictor for ({known})"
        )
    return dataclasses.replace(data, predictions=checks, predictor_source=source.name)


@click.command("report")
@click.argument("experiment")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for report.html, report.md, results.csv and figures/ (default results/EXPERIMENT).",
)
@click.option(
    "--format",
    "formats",
    default="html,md,csv",
    show_default=True,
    help="Comma-separated: html, md, csv (tidy data).",
)
@click.option(
    "--include-invalid",
    is_flag=True,
    help="Use runs whose validity flags failed in figures and cell statistics too (they are always "
    "counted in the data-quality notes and marked in results.csv).",
)
@click.option(
    "--model",
    "model_path",
    type=click.Path(path_type=Path),
    default=None,
    help="A kernel predictor file (`farm model fit` on a sampling experiment): the report adds, per "
    "network the experiment measured, predicted vs measured per layer with the +-10%% band and "
    "the accuracy table (RMSPE, within +-5/10/15%%, total error).",
)
@results_option
def report(
    experiment: str,
    out_dir: Path | None,
    formats: str,
    include_invalid: bool,
    model_path: Path | None,
    results: str | None,
) -> None:
    """Write the report of EXPERIMENT: a single-file HTML page (figures inline, opens offline), a
    Markdown summary, the tidy data as CSV, and every figure as SVG and PDF.

    \b
    It shows what was asked, each phone's environment, plan vs done with failure reasons, the
    figures the experiment declares plus defaults (medians with bootstrap 95% CIs), a table per
    cell, and data-quality notes (throttling, load not reached, charging left on, virtual phones).

    \b
    Example:
      farm report lstm_gpu_load --out /tmp/lstm-report --format html
      farm report nets --model results/kernel_sampling/kernel_predictor.json
    """
    chosen = parse_formats(formats)
    predictors = read_kernel_predictors(model_path) if model_path is not None else None
    location = store_location(results)
    with Store(location, read_only=True) as store:
        data = dataclasses.replace(load_report_data(store, experiment), include_invalid=include_invalid)
        locations = artifact_locations(store, experiment)
        if predictors is not None:
            envs = {run.run_id: last_done_env(store, run.run_id) for run in data.done_runs}
    if predictors is not None and model_path is not None:
        data = with_predictions(data, predictors, envs, model_path)
    elsewhere = unreadable_here(locations, location.artifacts)
    away = {loc.run_id for loc in elsewhere}
    folders = {loc.run_id: location.artifacts / loc.relative for loc in locations if loc.run_id not in away}
    data = dataclasses.replace(data, sustained=sustained_series_of(data, folders))
    if elsewhere:  # another coordinator's disk (a shared store): the metrics are all in the database
        note = artifacts_note(elsewhere)
        click.echo(terminal(f"farm: {note}"), err=True)
        data = dataclasses.replace(data, notes=(*data.notes, QualityNote(NoteKind.ARTIFACTS, note)))
    target = out_dir or location.artifacts / experiment
    try:
        written = write_report(data, target, chosen)
    except OSError as error:
        raise ConfigError(f"{target}: cannot write the report: {error.strerror}") from error
    for path in written:
        if path.suffix in (".html", ".md", ".csv"):
            click.echo(str(path))
    click.echo(f"{sum(1 for p in written if p.suffix == '.svg')} figure(s) in {target / 'figures'}")
