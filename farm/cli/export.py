"""`farm export EXPERIMENT --csv|--parquet`: tidy data, one row per run and metric."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from farm.cli.options import results_option, store_location
from farm.errors import ConfigError
from farm.report.export import tidy_csv
from farm.report.frame import tidy_frame
from farm.report.query import load_report_data
from farm.store.db import Store


@click.command("export")
@click.argument("experiment")
@click.option("--csv", "as_csv", is_flag=True, help="Write CSV (to --out, or stdout).")
@click.option(
    "--parquet",
    "as_parquet",
    is_flag=True,
    help="Write Parquet (needs --out): the frame of farm.api.load_frame, with phone and validity columns.",
)
@click.option(
    "--out",
    "out_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File to write (default for --csv: stdout).",
)
@results_option
def export(
    experiment: str, as_csv: bool, as_parquet: bool, out_file: Path | None, results: str | None
) -> None:
    """Export the metrics of EXPERIMENT as tidy data: one row per run and metric.

    --csv has columns experiment, run_id, cell_id, repetition, device, state, valid, one per
    factor, metric, value, unit. --parquet writes the frame farm.api.load_frame returns (those
    columns plus the phone's model, whether it is virtual, and one column per validity check).

    \b
    Example (pandas):
      farm export lstm_gpu_load --parquet --out lstm.parquet
      python -c "import pandas as pd; d = pd.read_parquet('lstm.parquet'); \\
                 print(d[d.metric == 'latency_median_ms'].groupby(['backend', 'gpu_load']).value.median())"
    """
    if as_csv == as_parquet:
        raise ConfigError("farm export: choose one format", hint="pass --csv or --parquet")
    if as_parquet and out_file is None:
        raise ConfigError(
            "farm export --parquet: Parquet is binary", hint="name the file with --out FILE.parquet"
        )
    with Store(store_location(results), read_only=True) as store:
        data = load_report_data(store, experiment)
    try:
        if as_parquet and out_file is not None:
            frame = tidy_frame(data)
            frame.to_parquet(out_file, index=False)
            click.echo(f"{out_file}: {len(frame)} rows", err=True)
            return
        text = tidy_csv(data)
        if out_file is None:
            sys.stdout.write(text)
            return
        out_file.write_text(text, encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{out_file}: cannot write: {error.strerror}") from error
    click.echo(f"{out_file}: {text.count(chr(10)) - 1} rows", err=True)
