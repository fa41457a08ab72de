"""`farm export EXPERIMENT --csv`: tidy data, one row per run and metric."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from farm.cli.options import results_option, store_location
from farm.errors import ConfigError
from farm.report.export import tidy_csv
from farm.report.query import load_report_data
from farm.store.db import Store


@click.command("export")
@click.argument("experiment")
@click.option("--csv", "as_csv", is_flag=True, required=True, help="Write CSV (the only format so far).")
@click.option(
    "--out",
    "out_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File to write (default: stdout).",
)
@results_option
def export(experiment: str, as_csv: bool, out_file: Path | None, results: str | None) -> None:
    """Export the metrics of EXPERIMENT as tidy CSV: one row per run and metric, with columns
    experiment, run_id, cell_id, repetition, device, state, one per factor, metric, value, unit.

    \b
    Example (pandas):
      farm export lstm_gpu_load --csv --out lstm.csv
      python -c "import pandas as pd; d = pd.read_csv('lstm.csv'); \\
                 print(d[d.metric == 'latency_median_ms'].groupby(['backend', 'gpu_load']).value.median())"
    """
    with Store(store_location(results), read_only=True) as store:
        text = tidy_csv(load_report_data(store, experiment))
    if out_file is None:
        sys.stdout.write(text)
        return
    try:
        out_file.write_text(text, encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{out_file}: cannot write: {error.strerror}") from error
    click.echo(f"{out_file}: {text.count(chr(10)) - 1} rows", err=True)
