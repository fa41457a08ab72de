"""`farm import trepn FILE...`: Trepn Profiler CSV exports into farm's power metrics (and store)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import click

from farm.analysis.metrics import metrics_by_name
from farm.cli.json_output import echo_json
from farm.cli.options import results_option, store_location
from farm.errors import ConfigError
from farm.experiment.sections import SLUG_PATTERN
from farm.metric import Metric
from farm.store import views
from farm.store.db import Store
from farm.store.runs import PlannedRun, save_experiment, store_imported
from farm.telemetry.trepn import TrepnExport, read_trepn_csv, trepn_power_metrics

IMPORT_PROGRAM = "trepn-import"
# The idle power subtracted from a run's energy: energy / duration of the idle recording.
IDLE_METRIC = "power_time_weighted_mw"


def format_table(results: list[tuple[Path, list[Metric]]]) -> str:
    header = (
        f"{'file':<36} {'duration_s':>10} {'power_mean_W':>12} {'energy_J':>9} {'net_J':>8} {'gpu_load':>8}"
    )
    lines = [header]
    for path, metrics in results:
        by = metrics_by_name(metrics)

        def cell(name: str, scale: float, width: int, digits: int, _by: dict[str, Metric] = by) -> str:
            metric = _by.get(name)
            return f"{metric.value * scale:>{width}.{digits}f}" if metric else f"{'-':>{width}}"

        lines.append(
            f"{path.name:<36} {cell('duration_s', 1, 10, 1)} {cell('power_mean_mw', 1e-3, 12, 3)} "
            f"{cell('energy_total_mj', 1e-3, 9, 2)} {cell('energy_net_mj', 1e-3, 8, 2)} "
            f"{cell('gpu_load_mean', 1, 8, 2)}"
        )
    return "\n".join(lines)


def import_run_id(experiment: str, data: bytes) -> str:
    """The run id of an imported export: its bytes within its experiment (pure), so the same file
    imported into another experiment is another run, and into the same one, the same run."""
    return "trepn-" + hashlib.sha256(experiment.encode() + b"\0" + data).hexdigest()[:16]


def _store_runs(
    store: Store, experiment: str, phone: str, results: list[tuple[Path, list[Metric]]]
) -> list[Path]:
    """Store each file as a DONE run; returns the files that were already stored (left as they were)."""
    if views.spec_json(store, experiment) is None:
        spec = {
            "name": experiment,
            "description": "Imported Trepn Profiler exports",
            "benchmark": {"program": IMPORT_PROGRAM},
            "sweep": {"file": [path.stem for path, _ in results]},
        }
        text = json.dumps(spec, sort_keys=True)
        save_experiment(
            store, experiment, text, hashlib.sha256(text.encode()).hexdigest(), "farm import trepn"
        )
    runs = []
    for seq, (path, metrics) in enumerate(results):
        run_id = import_run_id(experiment, path.read_bytes())
        planned = PlannedRun(run_id, path.stem, (("file", path.stem),), 0, phone, seq)
        runs.append((planned, [Metric(m.name, m.value, m.unit) for m in metrics]))
    kept = store_imported(store, experiment, runs, phone)
    return [path for (run, _), (path, _) in zip(runs, results, strict=True) if run in kept]


def check_experiment_name(name: str) -> None:
    """--experiment names a folder of results (report, export): one plain name."""
    if not re.fullmatch(SLUG_PATTERN, name):
        raise ConfigError(
            f"--experiment {name!r}: not an experiment name",
            hint="lower-case letters, digits, '_' and '-', starting with a letter or digit",
        )


def _read(path: Path, allow_truncated: bool) -> TrepnExport:
    export = read_trepn_csv(path, allow_truncated=allow_truncated)
    if export.truncation is not None:
        click.echo(f"farm: warning: {export.truncation.message}", err=True)
    return export


@click.group("import")
def import_() -> None:
    """Bring measurements made outside farm into farm's metrics and store."""


@import_.command("trepn")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A Trepn export of the idle phone: its mean power is subtracted (energy_net_mj).",
)
@click.option(
    "--inferences",
    type=click.IntRange(min=1),
    default=None,
    help="Inferences done during each recording: adds energy_per_inference_mj.",
)
@click.option("--experiment", default=None, help="Also store each file as a DONE run of this experiment.")
@click.option("--phone", default="trepn", show_default=True, help="Device id the stored runs ran on.")
@results_option
@click.option(
    "--allow-truncated",
    is_flag=True,
    help="Accept an export cut short (no System Statistics block, or a last row cut mid-line): "
    "warn, drop the cut row, and use the samples before the cut.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
def trepn(
    files: tuple[Path, ...],
    baseline: Path | None,
    inferences: int | None,
    experiment: str | None,
    phone: str,
    results: str | None,
    allow_truncated: bool,
    as_json: bool,
) -> None:
    """Read Trepn Profiler CSV exports (each data point with its own time column, units from the
    headers) and compute battery power and energy over each recording.

    power_mean_mw is Trepn's own average (the plain mean of its samples), checked against the
    file's System Statistics block; energy_total_mj integrates each power reading until the next,
    and power_time_weighted_mw = energy_total_mj / duration_s. A file without its statistics block
    was cut and is refused unless --allow-truncated; non-finite numbers are refused.

    \b
    Example (the idle recording first, then a run of 100 images):
      farm import trepn --baseline idle.csv --inferences 100 parallel.csv
      farm import trepn *.csv --experiment squeezenet_trepn --json
    """
    if experiment:
        check_experiment_name(experiment)
    idle_mw = None
    if baseline is not None:
        idle = metrics_by_name(trepn_power_metrics(_read(baseline, allow_truncated)))
        if IDLE_METRIC not in idle:
            raise ConfigError(f"{baseline}: no Battery Power samples: cannot use it as the idle baseline")
        idle_mw = idle[IDLE_METRIC].value
    parsed = []
    for path in files:
        export = _read(path, allow_truncated)
        metrics = trepn_power_metrics(export, idle_power_mw=idle_mw, inferences=inferences)
        if not metrics:
            raise ConfigError(f"{path}: no Battery Power, GPU Load or GPU Frequency samples in this export")
        parsed.append((path, metrics))
    duplicates: list[Path] = []
    if experiment:
        with Store(store_location(results)) as store:
            duplicates = _store_runs(store, experiment, phone, parsed)
        for path in duplicates:
            click.echo(f"farm: {path}: already imported into {experiment!r}; kept the stored run", err=True)
    if as_json:
        doc = [
            {"file": str(path), "metrics": {m.name: {"value": m.value, "unit": m.unit} for m in metrics}}
            for path, metrics in parsed
        ]
        echo_json(doc)
    else:
        click.echo(format_table(parsed))
        if experiment:
            click.echo(f"stored {len(parsed) - len(duplicates)} run(s) in experiment {experiment!r}")
